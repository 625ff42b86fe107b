// The backend table: one line per backend module, and everything that reads it (configs from
// and to JSON, deployments, flags, names).
#include <rex/backends/backends.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/json_kind.hpp"

// Each module defines its entry (rex/deployment/registry.hpp); the table lists them in the order
// of their rex_backend() lines in CMakeLists.txt (rex/backend_modules.hpp, generated from them),
// which is the help's. A backend this build is made without is named in `missing` instead.
#include <rex/backend_modules.hpp>

namespace rex {

namespace modules {
#define REX_DECLARE_ENTRY(name) Backend name##_entry();
REX_BACKEND_MODULES(REX_DECLARE_ENTRY)
#undef REX_DECLARE_ENTRY
}  // namespace modules

namespace json = boost::json;

namespace {

std::span<const Backend> table_of_backends() {
#define REX_ENTRY(name) modules::name##_entry(),
  static const Backend table[] = {REX_BACKEND_MODULES(REX_ENTRY)};
#undef REX_ENTRY
  return table;
}

std::vector<BackendAlias> aliases_of(std::span<const Backend> table) {
  std::vector<BackendAlias> all;
  for (const Backend& b : table)
    all.insert(all.end(), b.aliases.begin(), b.aliases.end());
  return all;
}

#define REX_MISSING(name, why) MissingBackend{#name, why},
constexpr MissingBackend missing_table[] = {REX_MISSING_BACKENDS(REX_MISSING) MissingBackend{}};
#undef REX_MISSING
// The last element only makes the array non-empty.
constexpr std::span<const MissingBackend> missing{missing_table, std::size(missing_table) - 1};

}  // namespace

std::span<const Backend> backends() noexcept {
  return table_of_backends();
}

std::span<const BackendAlias> backend_aliases() noexcept {
  static const std::vector<BackendAlias> aliases = aliases_of(table_of_backends());
  return aliases;
}

DeploymentConfig default_deployment_config() {
  return backends().front().decode(json::object(), settings::Reader::Use::deployment);
}

std::span<const MissingBackend> missing_backends() noexcept {
  return missing;
}

const Backend* find_backend(std::string_view name) noexcept {
  for (const Backend& b : backends()) {
    if (b.name == name)
      return &b;
  }
  return nullptr;
}

std::string backend_names() {
  std::string names;
  for (const Backend& b : backends()) {
    names += (names.empty() ? "" : ", ") + std::string(b.name);
    for (const BackendAlias& a : backend_aliases()) {
      if (a.backend == b.name)
        names += ", " + std::string(a.name);
    }
  }
  return names;
}

std::string backend_names(const std::function<bool(const Backend&)>& which) {
  std::string names;
  for (const Backend& b : backends()) {
    if (which(b))
      names += (names.empty() ? "" : ", ") + std::string(b.name);
  }
  return names;
}

const BackendFlag& backend_flag(std::string_view flag, std::string_view type) {
  if (const Backend* b = find_backend(type)) {
    if (const BackendFlag* f = b->flag(flag))
      return *f;
  }
  // Those the flag applies to, for the error.
  const std::string types =
      backend_names([flag](const Backend& b) { return b.flag(flag) != nullptr; });
  if (types.empty())
    throw DeploymentConfigError(fmt::format("{}: unknown deployment flag", flag));
  throw DeploymentConfigError(
      fmt::format("{} does not apply to a {} deployment (only to {})", flag, type, types));
}

std::vector<const BackendFlag*> deployment_flags() {
  std::vector<const BackendFlag*> flags;
  for (const Backend& b : backends()) {
    for (const BackendFlag& f : b.flags) {
      if (std::none_of(flags.begin(), flags.end(),
                       [&](const auto* g) { return g->flag == f.flag; }))
        flags.push_back(&f);
    }
  }
  return flags;
}

std::string backend_flag_help(std::string_view flag) {
  // Backends saying the same of the flag share one clause: "docker, kubernetes: the image".
  std::vector<std::pair<std::string, std::string_view>> clauses;
  for (const Backend& b : backends()) {
    if (const BackendFlag* f = b.flag(flag)) {
      auto same = std::find_if(clauses.begin(), clauses.end(),
                               [&](const auto& c) { return c.second == f->help; });
      if (same == clauses.end())
        clauses.emplace_back(std::string(b.name), f->help);
      else
        same->first += ", " + std::string(b.name);
    }
  }
  std::string help;
  for (const auto& [names, text] : clauses)
    help += fmt::format("{}{}: {}", help.empty() ? "" : "; ", names, text);
  return help;
}

std::optional<json::object> backend_base_config(std::string_view name) {
  if (find_backend(name) != nullptr)
    return json::object{{"type", name}};
  for (const BackendAlias& a : backend_aliases()) {
    if (a.name == name && find_backend(a.backend) != nullptr)
      return json::object{{"type", a.backend}, {a.field, a.value}};
  }
  return std::nullopt;
}

std::string describe_deployment(const DeploymentConfig& config) {
  const Backend* b = find_backend(config.type());
  return b != nullptr && b->describe != nullptr ? b->describe(config) : std::string(config.type());
}

std::string_view deployment_type(const DeploymentConfig& config) noexcept {
  return config.type();
}

DeploymentConfig deployment_config_from_json(const json::value& value) {
  if (!value.is_object())
    throw DeploymentConfigError(fmt::format("deployment config: expected an object, got {}",
                                            detail::json_kind_phrase(value)));
  const json::object& o = value.as_object();
  std::string type = "docker";
  if (const json::value* t = o.if_contains("type")) {
    if (!t->is_string())
      throw DeploymentConfigError(fmt::format("deployment config: type: expected a string, got {}",
                                              detail::json_kind_phrase(*t)));
    type = std::string(t->as_string());
  }
  if (const Backend* b = find_backend(type))
    return b->decode(o, settings::Reader::Use::deployment);
  for (const MissingBackend& m : missing) {
    if (m.name == type)
      throw DeploymentConfigError(fmt::format(
          "deployment config: the {} backend is not in this build: {}", type, m.reason));
  }
  std::string names;
  const std::span<const Backend> table = backends();
  for (std::size_t i = 0; i < table.size(); ++i)
    names += fmt::format("{}{}",
                         i == 0                  ? ""
                         : i + 1 == table.size() ? " or "
                                                 : ", ",
                         table[i].name);
  throw DeploymentConfigError(
      fmt::format("deployment config: unknown type \"{}\" (expected {})", type, names));
}

DeploymentConfig with_image(const DeploymentConfig& config, const std::string& image) {
  const Backend* backend = find_backend(config.type());
  const BackendFlag* flag = backend != nullptr ? backend->flag("--image") : nullptr;
  if (flag == nullptr) {
    std::string able = backend_names([](const Backend& b) { return b.flag("--image") != nullptr; });
    if (const auto last = able.rfind(", "); last != std::string::npos)
      able.replace(last, 2, " and ");
    throw DeploymentConfigError(fmt::format(
        "a {} deployment cannot start a sandbox from an image ({} can)", config.type(), able));
  }
  json::object object = to_json(config);
  object[flag->field] = image;
  return deployment_config_from_json(object);
}

DeploymentConfig provider_settings(const Backend& backend, json::object fields) {
  const json::value defaults = json::parse(backend.provider_defaults);
  for (const auto& [key, value] : defaults.as_object()) {
    if (!fields.contains(key))
      fields.emplace(key, value);
  }
  return backend.decode(fields, settings::Reader::Use::defaults);
}

DeploymentConfig load_deployment_config(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw DeploymentConfigError(fmt::format("cannot open deployment config '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  json::value value = json::parse(text.str(), ec);
  if (ec)
    throw DeploymentConfigError(fmt::format("{}: not valid JSON ({})", path, ec.message()));
  try {
    return deployment_config_from_json(value);
  } catch (const DeploymentConfigError& e) {
    throw DeploymentConfigError(fmt::format("{}: {}", path, e.what()));
  }
}

json::object to_json(const DeploymentConfig& config) {
  const Backend* b = find_backend(config.type());
  if (b == nullptr)
    throw DeploymentConfigError(fmt::format("the {} backend is not in this build", config.type()));
  return b->encode(config);
}

std::unique_ptr<Deployment> make_deployment(asio::any_io_executor executor,
                                            DeploymentConfig config) {
  if (config.empty())
    throw DeploymentConfigError("no deployment given");
  const Backend* b = find_backend(config.type());
  if (b == nullptr)
    throw DeploymentConfigError(fmt::format("the {} backend is not in this build", config.type()));
  return b->make(std::move(executor), std::move(config));
}

}  // namespace rex
