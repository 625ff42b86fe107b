#include <rex/core/log.hpp>
#include <rex/gateway/docker_provider.hpp>

#include <rex/deployment/docker_deployment.hpp>
#include <rex/deployment/docker_gc.hpp>
#include <rex/docker/engine.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

namespace rex::gateway {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

// Docker's names: [a-zA-Z0-9][a-zA-Z0-9_.-]*.
std::string container_name_part(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    out += ok ? c : '-';
  }
  return out;
}

std::string label_of(const std::map<std::string, std::string>& labels, std::string_view key) {
  const auto it = labels.find(std::string(key));
  return it == labels.end() ? std::string() : it->second;
}

// A socket directory DockerDeployment made for a network-less container (temp/rex-sock-XXXXXX),
// found among the container's mounts.
std::string socket_dir_of(const json::object& info) {
  const auto* mounts = info.if_contains("Mounts");
  if (mounts == nullptr || !mounts->is_array())
    return {};
  const fs::path temp = fs::temp_directory_path();
  for (const auto& m : mounts->get_array()) {
    const auto* source = m.is_object() ? m.get_object().if_contains("Source") : nullptr;
    if (source == nullptr || !source->is_string())
      continue;
    const fs::path dir(std::string(source->get_string()));
    if (dir.parent_path() == temp && dir.filename().string().starts_with("rex-sock-"))
      return dir.string();
  }
  return {};
}

}  // namespace

struct DockerProvider::Impl {
  asio::any_io_executor executor;
  DockerProviderConfig config;
  docker::EngineConfig engine_config;
  std::unique_ptr<docker::Engine> engine;  // for list and destroy; each create has its own

  Impl(asio::any_io_executor ex, DockerProviderConfig c)
      : executor(std::move(ex)),
        config(std::move(c)),
        engine_config(docker::engine_config_from_environment(config.name)) {
    if (!config.engine.empty())
      engine_config.host = config.engine;
    engine = std::make_unique<docker::Engine>(executor, engine_config);
  }

  // No engine installed here: its unix socket does not exist.
  bool engine_absent() const {
    const std::string endpoint = engine->endpoint();
    constexpr std::string_view unix_scheme = "unix://";
    if (!endpoint.starts_with(unix_scheme))
      return false;
    struct stat st {};
    return ::stat(endpoint.substr(unix_scheme.size()).c_str(), &st) != 0;
  }

  DockerDeploymentConfig deployment_config(const SandboxSpec& spec) const {
    const Environment& env = spec.environment;
    if (env.image.empty())
      throw ProviderError(fmt::format("environment {} names no image; the {} provider needs one",
                                      env.name, config.name));
    DockerDeploymentConfig d;
    d.image = env.image;
    d.container_runtime = config.name;
    d.engine = config.engine;
    d.server_path = config.server_path;
    d.startup_timeout = config.startup_timeout;
    d.memory = env.memory;
    d.cpus = env.cpus;
    d.network_mode = env.network;
    d.env = spec.env;
    d.mounts = env.mounts;
    d.working_dir = env.working_dir.empty() ? std::string(kSandboxWorkingDir) : env.working_dir;
    d.labels[std::string(labels::gateway)] = config.gateway_id;
    d.labels[std::string(labels::session)] = spec.session_id;
    d.max_lifetime = spec.max_lifetime;
    d.container_name =
        fmt::format("rex-{}-{}", container_name_part(config.gateway_id.substr(0, 12)),
                    container_name_part(spec.session_id));
    return d;
  }
};

DockerProvider::DockerProvider(asio::any_io_executor executor, DockerProviderConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(config))) {}

DockerProvider::~DockerProvider() = default;

std::string_view DockerProvider::name() const noexcept {
  return impl_->config.name;
}

asio::awaitable<SandboxAddress> DockerProvider::create(SandboxSpec spec) {
  DockerDeploymentConfig settings = impl_->deployment_config(spec);
  SandboxAddress address;
  address.working_dir = settings.working_dir;
  address.scratch_dir = std::string(kSandboxScratchDir);
  std::string failure;
  try {
    DockerDeployment deployment(impl_->executor, std::move(settings));
    co_await deployment.start();  // removes its container itself when it fails
    const DockerHandoff handoff = deployment.release_container();
    address.sandbox_id = handoff.container_id;
    address.url = handoff.url;
    address.token = handoff.token;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(fmt::format("{}: {}", impl_->config.name, failure));
  co_return address;
}

asio::awaitable<void> DockerProvider::destroy(std::string sandbox_id) {
  docker::Engine& engine = *impl_->engine;
  std::string failure;
  try {
    std::string socket_dir;
    try {
      socket_dir = socket_dir_of(co_await engine.inspect_container(sandbox_id));
    } catch (const docker::EngineError& e) {
      if (e.status() != 404)
        throw;
    }
    co_await engine.remove_container(sandbox_id, true);  // gone already: no error
    if (!socket_dir.empty()) {
      std::error_code ec;
      fs::remove_all(socket_dir, ec);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(
        fmt::format("{}: cannot remove container {}: {}", impl_->config.name, sandbox_id, failure));
}

asio::awaitable<std::vector<SandboxListing>> DockerProvider::list() {
  std::vector<SandboxListing> out;
  if (impl_->engine_absent())
    co_return out;
  const std::vector<std::string> filter{
      fmt::format("{}={}", labels::gateway, impl_->config.gateway_id)};
  const auto containers = co_await impl_->engine->list_containers(filter, true);
  for (const auto& c : containers) {
    SandboxListing s;
    s.sandbox_id = c.id;
    s.session_id = label_of(c.labels, labels::session);
    s.running = c.state == "running";
    s.created_at = static_cast<double>(c.created);
    out.push_back(std::move(s));
  }
  co_return out;
}

}  // namespace rex::gateway
