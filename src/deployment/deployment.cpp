#include <rex/deployment/deployment.hpp>

namespace rex {

std::string_view to_string(DeploymentStage stage) noexcept {
  switch (stage) {
    case DeploymentStage::pulling:
      return "pulling";
    case DeploymentStage::creating:
      return "creating";
    case DeploymentStage::starting:
      return "starting";
    case DeploymentStage::waiting:
      return "waiting";
    case DeploymentStage::ready:
      return "ready";
    case DeploymentStage::stopping:
      return "stopping";
    case DeploymentStage::stopped:
      return "stopped";
  }
  return "unknown";
}

asio::awaitable<IsAliveResponse> Deployment::is_alive() {
  if (!started()) {
    IsAliveResponse r;
    r.is_alive = false;
    r.message = "the deployment is not started";
    co_return r;
  }
  co_return co_await runtime().is_alive();
}

namespace {
[[noreturn]] void unsupported(std::string_view what) {
  throw OperationUnsupportedError(
      std::string("this deployment cannot ") + std::string(what) +
      ": checkpoints, pauses and metrics need a sandbox backend that has them (docker, podman)");
}
}  // namespace

asio::awaitable<Checkpoint> Deployment::checkpoint() {
  unsupported("checkpoint a sandbox");
  co_return Checkpoint{};
}

asio::awaitable<std::vector<std::unique_ptr<Deployment>>> Deployment::fork(Checkpoint, int) {
  unsupported("fork a sandbox");
  co_return std::vector<std::unique_ptr<Deployment>>{};
}

asio::awaitable<void> Deployment::rewind(Checkpoint) {
  unsupported("rewind a sandbox");
  co_return;
}

asio::awaitable<void> Deployment::pause(bool) {
  unsupported("pause a sandbox");
  co_return;
}

asio::awaitable<void> Deployment::resume() {
  unsupported("resume a sandbox");
  co_return;
}

asio::awaitable<SandboxMetrics> Deployment::metrics() {
  unsupported("measure a sandbox");
  co_return SandboxMetrics{};
}

asio::awaitable<void> Deployment::remove_checkpoint(Checkpoint) {
  unsupported("remove a checkpoint");
  co_return;
}

void Deployment::add_hook(DeploymentHook hook) {
  if (hook)
    hooks_.push_back(std::move(hook));
}

void Deployment::emit(const DeploymentEvent& event) const noexcept {
  for (const auto& hook : hooks_) {
    try {
      hook(event);
    } catch (...) {
    }
  }
}

void Deployment::emit(DeploymentStage stage, std::string message) const noexcept {
  if (hooks_.empty())
    return;
  DeploymentEvent event;
  event.stage = stage;
  event.message = std::move(message);
  emit(event);
}

}  // namespace rex
