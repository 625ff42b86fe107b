// A Docker (or Podman) engine's containers as a SandboxBackend.
#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/core/object_fields.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/docker/engine.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <sys/stat.h>

#include <chrono>
#include <optional>
#include <system_error>

#include "backends/docker/docker_calls.hpp"
#include "deployment/hand_over.hpp"

namespace rex {

namespace {

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
    // The request over the settings, where it sets a field.
    DockerDeploymentConfig d = settings_;
    detail::lay_request_over(d, request);
    if (request.memory)
      d.memory = std::move(request.memory);
    if (request.cpus)
      d.cpus = request.cpus;
    if (!request.network.empty())
      d.network_mode = std::move(request.network);
    for (auto& m : request.mounts)
      d.mounts.push_back(std::move(m));
    if (!request.working_dir.empty())
      d.working_dir = std::move(request.working_dir);
    if (request.lifetime.count() > 0)
      d.max_lifetime = request.lifetime;
    if (!request.name.empty())
      d.container_name = container_name_part(request.name);
    if (request.own_image)
      d.pull = PullPolicy::never;  // a checkpoint's image: the engine has it, no registry does
    std::string failure;
    try {
      auto creating = create_docker_container(
          executor_, std::move(d), std::move(request.deployment_id), std::move(request.progress));
      co_return co_await std::move(creating);  // it removes what it made when it fails
    } catch (const std::exception& e) {
      failure = e.what();
    }
    throw DeploymentStartupError(fmt::format("{}: {}", name(), failure));
  }

  asio::awaitable<void> destroy(std::string id) override {
    std::string failure;
    try {
      auto removing = remove_docker_container(*engine_, id, settings_);
      co_await std::move(removing);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty())
      throw DeploymentStartupError(
          fmt::format("{}: cannot remove container {}: {}", name(), id, failure));
  }

  asio::awaitable<std::optional<std::string>> lost(std::string id) override {
    json::object info;
    try {
      info = co_await engine_->inspect_container(id);
    } catch (const docker::EngineError& e) {
      if (e.status() == 404)
        co_return fmt::format("container {} no longer exists (it was removed)", id);
      co_return std::nullopt;
    } catch (const std::exception&) {
      co_return std::nullopt;  // the engine is out of reach: nothing to say about the container
    }
    const std::string status = field_text(info, {"State", "Status"});
    if (status.empty() || status == "running")
      co_return std::nullopt;
    const json::value* code = nullptr;
    if (const auto* state = info.if_contains("State"); state && state->is_object())
      code = state->get_object().if_contains("ExitCode");
    if (status == "exited" && code != nullptr && code->is_int64())
      co_return fmt::format("container {} exited with code {}", id, code->get_int64());
    co_return fmt::format("container {} is {}", id, status);
  }

  // A build needs the engine at once: an engine whose socket is not there builds nothing (and
  // a gateway with Podman alone builds there).
  bool can(SandboxOperation operation) const noexcept override {
    return operation != SandboxOperation::build || !engine_absent();
  }

  asio::awaitable<SandboxSnapshot> checkpoint(std::string id,
                                              std::map<std::string, std::string> labels) override {
    const std::string tag =
        labels.contains("rex.checkpoint") ? labels["rex.checkpoint"] : std::string("latest");
    std::string failure;
    try {
      auto committing = engine_->commit_container(id, "rex-checkpoint", tag, std::move(labels));
      std::string image = co_await std::move(committing);
      co_return SandboxSnapshot{std::move(image)};
    } catch (const std::exception& e) {
      failure = e.what();
    }
    throw DeploymentStartupError(
        fmt::format("{}: cannot checkpoint container {}: {}", name(), id, failure));
  }

  asio::awaitable<std::string> build_image(ImageBuild build) override {
    std::string failure;
    try {
      // No registry is asked for the base: a FROM the engine lacks fails here, in words.
      auto inspecting = engine_->inspect_image(build.base);
      if (!(co_await std::move(inspecting)))
        failure = fmt::format(
            "the base image '{}' is not on the engine (images are not pulled for a build: "
            "build or load it there first)",
            build.base);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (failure.empty()) {
      try {
        auto building = engine_->build_image(build.context_tar, build.dockerfile, build.tag,
                                             std::move(build.labels), std::move(build.on_line));
        co_return co_await std::move(building);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    throw DeploymentStartupError(fmt::format("{}: {}", name(), failure));
  }

  asio::awaitable<std::optional<std::string>> image_id(std::string name) override {
    auto inspecting = engine_->inspect_image(std::move(name));
    const auto found = co_await std::move(inspecting);
    const auto* id = found ? found->if_contains("Id") : nullptr;
    if (id == nullptr || !id->is_string())
      co_return std::nullopt;
    co_return std::string(id->get_string());
  }

  asio::awaitable<std::vector<SandboxInfo>> list_built_images(
      std::map<std::string, std::string> labels) override {
    return images_labelled("rex.template", std::move(labels));
  }

  asio::awaitable<void> remove_checkpoint(std::string image) override {
    std::optional<docker::EngineError> refused;
    try {
      auto removing = engine_->remove_image(image, false);
      co_await std::move(removing);
    } catch (const docker::EngineError& e) {
      if (e.status() != 409)
        throw;
      refused = e;
    }
    if (refused)
      throw std::runtime_error(fmt::format(
          "{}: cannot remove checkpoint image {}: a sandbox started from it, or a checkpoint "
          "taken of such a sandbox, still exists (stop those sandboxes and remove those "
          "checkpoints first): {}",
          name(), image, refused->what()));
  }

  asio::awaitable<std::vector<SandboxInfo>> list_checkpoints(
      std::map<std::string, std::string> labels) override {
    return images_labelled("rex.checkpoint", std::move(labels));
  }

  asio::awaitable<void> pause(std::string id) override {
    auto pausing = engine_->pause_container(id);
    co_await std::move(pausing);
  }

  asio::awaitable<void> resume(std::string id) override {
    auto resuming = engine_->unpause_container(id);
    co_await std::move(resuming);
  }

  asio::awaitable<SandboxMetrics> metrics(std::string id) override {
    auto sampling = engine_->container_stats(id);
    const docker::ContainerStats stats = co_await std::move(sampling);
    auto measuring = engine_->container_size(id);
    const auto [written, total] = co_await std::move(measuring);
    SandboxMetrics m;
    m.cpu_percent = stats.cpu_percent;
    m.cpu_count = stats.cpu_count;
    m.memory_used = stats.memory_used;
    m.memory_limit = stats.memory_limit;
    m.disk_used = written > 0 ? static_cast<std::uint64_t>(written) : 0;
    m.disk_total = total > 0 ? static_cast<std::uint64_t>(total) : 0;
    m.timestamp =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    co_return m;
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
      // A paused container's server is frozen, not ended.
      out.push_back(SandboxInfo{c.id, std::move(c.labels),
                                c.state == "running" || c.state == "paused",
                                static_cast<double>(c.created)});
    co_return out;
  }

 private:
  // No engine installed here: its unix socket does not exist.
  // The engine's images that carry the label `kind` and all of `labels`, each as its id and
  // labels (none when the engine's socket is not there).
  asio::awaitable<std::vector<SandboxInfo>> images_labelled(
      std::string kind, std::map<std::string, std::string> labels) {
    std::vector<SandboxInfo> out;
    if (engine_absent())
      co_return out;
    std::vector<std::string> filter{std::move(kind)};
    for (const auto& [k, v] : labels)
      filter.push_back(fmt::format("{}={}", k, v));
    auto images = co_await engine_->list_images(filter);
    for (auto& image : images)
      out.push_back(SandboxInfo{image.id, std::move(image.labels), false,
                                static_cast<double>(image.created)});
    co_return out;
  }

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
