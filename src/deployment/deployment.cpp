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
