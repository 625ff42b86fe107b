// The registry and the gateway's files on disk: the built-in environments, walking a registry
// directory, and reading files (the registry's and --config's) for the parsers of
// gateway_config.cpp, which do no I/O.
#include <rex/core/text.hpp>
#include <rex/gateway/gateway_config.hpp>
#include <rex/gateway/registry.hpp>

#include <fmt/format.h>
#include <boost/json/array.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

namespace rex::gateway {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

[[noreturn]] void fail_at(const fs::path& path, std::string_view problem) {
  throw GatewayConfigError(fmt::format("{}: {}", path.string(), problem));
}

std::string read_config_text(const fs::path& file) {
  std::error_code ec;
  if (fs::is_directory(file, ec))
    fail_at(file, "cannot read: is a directory");
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open())
    fail_at(file, fmt::format("cannot read: {}", std::strerror(errno)));
  std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (in.bad())
    fail_at(file, "cannot read: input/output error");
  return text;
}

bool is_yaml(const fs::path& file) {
  const std::string extension = ascii_lower(file.extension().string());
  return extension == ".yaml" || extension == ".yml";
}

// The regular files (or links to one) in `dir`, sorted, without hidden ones; none when `dir`
// does not exist.
std::vector<fs::path> files_in(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status))
    return {};
  if (!fs::is_directory(status))
    fail_at(dir, "not a directory");
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    if (path.filename().string().starts_with('.'))
      continue;
    std::error_code type_ec;
    if (it->is_regular_file(type_ec))
      files.push_back(path);
  }
  if (ec)
    fail_at(dir, fmt::format("cannot list: {}", ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

Environment built_in(std::string name, std::string provider, std::string description) {
  Environment env;
  env.name = std::move(name);
  env.provider = std::move(provider);
  env.description = std::move(description);
  return env;
}

json::array strings(const std::vector<std::string>& items) {
  json::array array;
  for (const std::string& item : items)
    array.emplace_back(item);
  return array;
}

}  // namespace

json::object Environment::to_json() const {
  json::object env_json;
  for (const auto& [key, value] : env)
    env_json[key] = value;
  return json::object{
      {"name", name},
      {"description", description},
      {"provider", provider},
      {"image", image},
      {"template", e2b_template},
      {"memory", memory ? json::value(*memory) : json::value(nullptr)},
      {"cpus", cpus ? json::value(*cpus) : json::value(nullptr)},
      {"network", network},
      {"env", std::move(env_json)},
      {"working_dir", working_dir},
      {"mounts", strings(mounts)},
      {"idle_timeout", idle_timeout},
      {"max_lifetime", max_lifetime},
      {"collect", strings(collect)},
      {"spares", spares},
      {"user", user},
      {"start_cmd", start_cmd},
      {"ready_cmd", ready_cmd},
      {"code_interpreter", code_interpreter},
  };
}

Registry::Registry(std::string python_image) {
  Environment local =
      built_in("local", "local",
               "A directory of its own on the gateway's host, served by a rex-server process; no "
               "isolation beyond that directory (for one trusted user)");
  local.spares = kBuiltInLocalSpares;
  Environment python =
      built_in("Python3", "docker",
               fmt::format("Python 3 in a container of {}: execute runs python3", python_image));
  python.image = std::move(python_image);
  environments_.emplace(local.name, std::move(local));
  environments_.emplace(python.name, std::move(python));
  Environment interpreter = built_in(
      "code-interpreter-v1", "docker",
      fmt::format("E2B's code interpreter: run_code of its SDKs on port 49999, Python (with "
                  "matplotlib, numpy and pandas) and bash, in a container of {}",
                  kCodeInterpreterImage));
  interpreter.image = std::string(kCodeInterpreterImage);
  interpreter.code_interpreter = true;
  environments_.emplace(interpreter.name, std::move(interpreter));
}

Registry Registry::load(const fs::path& dir, std::string python_image) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status))
    fail_at(dir, "the registry directory does not exist");
  if (!fs::is_directory(status))
    fail_at(dir, "the registry is not a directory");

  Registry registry(std::move(python_image));
  std::map<std::string, fs::path> defined_by;  // environment name -> file
  for (const fs::path& file : files_in(dir / "environments")) {
    if (!is_yaml(file))
      continue;  // a README beside them, say
    Environment env =
        parse_environment(read_config_text(file), file.string(), file.stem().string());
    const auto [first, added] = defined_by.emplace(env.name, file);
    if (!added) {
      fail_at(file, fmt::format("name: the environment \"{}\" is also defined by {}", env.name,
                                first->second.string()));
    }
    registry.environments_.insert_or_assign(env.name, std::move(env));
  }

  const std::pair<std::string_view, std::map<std::string, json::value>*> kinds[] = {
      {"agents", &registry.agents_}, {"tools", &registry.tools_}, {"prompts", &registry.prompts_}};
  for (const auto& [kind, data] : kinds) {
    std::map<std::string, fs::path> from;  // name -> file
    for (const fs::path& file : files_in(dir / kind)) {
      const std::string name = file.stem().string();
      const auto [first, added] = from.emplace(name, file);
      if (!added) {
        fail_at(file, fmt::format("the {} entry \"{}\" is also defined by {}", kind, name,
                                  first->second.string()));
      }
      data->emplace(
          name, parse_data_file(read_config_text(file), file.string(), file.extension().string()));
    }
  }
  return registry;
}

const Environment* Registry::find(std::string_view name) const {
  const auto it = environments_.find(name);
  return it == environments_.end() ? nullptr : &it->second;
}

std::vector<const Environment*> Registry::environments() const {
  std::vector<const Environment*> all;
  all.reserve(environments_.size());
  for (const auto& [name, env] : environments_)
    all.push_back(&env);
  return all;
}

const std::map<std::string, json::value>& Registry::data(std::string_view kind) const {
  if (kind == "agents")
    return agents_;
  if (kind == "tools")
    return tools_;
  if (kind == "prompts")
    return prompts_;
  static const std::map<std::string, json::value> none;
  return none;
}

GatewayConfig load_gateway_config(const fs::path& file) {
  return parse_gateway_config(read_config_text(file), file.string());
}

}  // namespace rex::gateway
