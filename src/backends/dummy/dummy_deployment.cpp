#include <rex/backends/dummy/dummy_deployment.hpp>

namespace rex {

DummyDeployment::DummyDeployment(DummyDeploymentConfig config)
    : runtime_(std::move(config.run_in_session_outputs)) {}

asio::awaitable<void> DummyDeployment::start() {
  if (stopped_)
    throw DeploymentStartupError("dummy deployment: cannot start again after stop()");
  emit(DeploymentStage::starting, "starting a dummy runtime");
  started_ = true;
  emit(DeploymentStage::ready, "dummy runtime ready");
  co_return;
}

asio::awaitable<void> DummyDeployment::stop() {
  if (stopped_)
    co_return;
  stopped_ = true;
  if (!started_)
    co_return;
  emit(DeploymentStage::stopping, "stopping the dummy runtime");
  co_await runtime_.close();
  started_ = false;
  emit(DeploymentStage::stopped, "dummy runtime stopped");
}

Runtime& DummyDeployment::runtime() {
  if (!started_)
    throw DeploymentNotStartedError(stopped_ ? "dummy deployment: stopped"
                                             : "dummy deployment: not started");
  return runtime_;
}

bool DummyDeployment::started() const noexcept {
  return started_;
}
DummyRuntime& DummyDeployment::dummy_runtime() noexcept {
  return runtime_;
}

}  // namespace rex
