// A Docker (or Podman) engine's containers as a SandboxBackend.
#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/docker/engine.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

namespace rex {

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

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

class DockerBackend final : public SandboxBackend {
 public:
  /// std::invalid_argument for an engine address that cannot be used.
  DockerBackend(asio::any_io_executor executor, DockerDeploymentConfig settings)
      : executor_(std::move(executor)),
        settings_(std::move(settings)),
        engine_config_(docker::engine_config_from_environment(settings_.container_runtime)) {
    if (!settings_.engine.empty())
      engine_config_.host = settings_.engine;
    engine_ = std::make_unique<docker::Engine>(executor_, engine_config_);
  }

  std::string_view name() const noexcept override { return settings_.container_runtime; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    if (request.image.empty())
      throw DeploymentStartupError(
          fmt::format("{} names no image; the {} provider needs one", request.purpose, name()));
    DockerDeploymentConfig d = settings_;
    d.image = std::move(request.image);
    d.memory = std::move(request.memory);
    d.cpus = request.cpus;
    d.network_mode = std::move(request.network);
    d.env = std::move(request.env);
    d.mounts = std::move(request.mounts);
    d.working_dir = request.working_dir.empty() ? std::string(kContainerWorkingDir)
                                                : std::move(request.working_dir);
    for (auto& [k, v] : request.labels)
      d.labels[k] = v;
    d.max_lifetime = Seconds(request.lifetime);
    if (!request.name.empty())
      d.container_name = container_name_part(request.name);
    StartedSandbox started;
    started.working_dir = d.working_dir;
    started.own_filesystem = true;
    std::string failure;
    try {
      DockerDeployment deployment(executor_, std::move(d));
      co_await deployment.start();  // removes its container itself when it fails
      const DockerHandoff handoff = deployment.release_container();
      started.id = handoff.container_id;
      started.url = handoff.url;
      started.token = handoff.token;
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty())
      throw DeploymentStartupError(fmt::format("{}: {}", name(), failure));
    co_return started;
  }

  asio::awaitable<void> destroy(std::string id) override {
    docker::Engine& engine = *engine_;
    std::string failure;
    try {
      std::string socket_dir;
      try {
        socket_dir = socket_dir_of(co_await engine.inspect_container(id));
      } catch (const docker::EngineError& e) {
        if (e.status() != 404)
          throw;
      }
      co_await engine.remove_container(id, true);  // gone already: no error
      if (!socket_dir.empty()) {
        std::error_code ec;
        fs::remove_all(socket_dir, ec);
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty())
      throw DeploymentStartupError(
          fmt::format("{}: cannot remove container {}: {}", name(), id, failure));
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    std::vector<SandboxInfo> out;
    if (engine_absent())
      co_return out;
    std::vector<std::string> filter;
    for (const auto& [k, v] : labels)
      filter.push_back(fmt::format("{}={}", k, v));
    auto containers = co_await engine_->list_containers(filter, true);
    for (auto& c : containers)
      out.push_back(SandboxInfo{c.id, std::move(c.labels), c.state == "running",
                                static_cast<double>(c.created)});
    co_return out;
  }

 private:
  // No engine installed here: its unix socket does not exist.
  bool engine_absent() const {
    const std::string endpoint = engine_->endpoint();
    constexpr std::string_view unix_scheme = "unix://";
    if (!endpoint.starts_with(unix_scheme))
      return false;
    struct stat st {};
    return ::stat(endpoint.substr(unix_scheme.size()).c_str(), &st) != 0;
  }

  asio::any_io_executor executor_;
  DockerDeploymentConfig settings_;
  docker::EngineConfig engine_config_;
  std::unique_ptr<docker::Engine> engine_;  // for list and destroy; each create has its own
};

}  // namespace

std::unique_ptr<SandboxBackend> open_docker_backend(asio::any_io_executor executor,
                                                    DockerDeploymentConfig settings) {
  return std::make_unique<DockerBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
