#include <rex/backends/local/local_deployment.hpp>

#include <filesystem>
#include <system_error>

namespace rex {

LocalDeployment::LocalDeployment(asio::any_io_executor executor, LocalDeploymentConfig config)
    : executor_(std::move(executor)), config_(std::move(config)) {}

LocalDeployment::~LocalDeployment() = default;

asio::awaitable<void> LocalDeployment::start() {
  if (stopped_)
    throw DeploymentStartupError("local deployment: cannot start again after stop()");
  if (runtime_)
    co_return;
  emit(DeploymentStage::starting, "starting a local runtime");
  LocalRuntimeConfig rc;
  if (!config_.working_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config_.working_dir, ec);
    if (ec)
      throw DeploymentStartupError("local deployment: cannot create working_dir '" +
                                   config_.working_dir + "': " + ec.message());
    rc.session.working_dir = std::filesystem::absolute(config_.working_dir).string();
  }
  for (const auto& [k, v] : config_.env)
    rc.session.environment[k] = v;
  runtime_ = std::make_unique<LocalRuntime>(executor_, std::move(rc));
  emit(DeploymentStage::ready, "local runtime ready");
}

asio::awaitable<void> LocalDeployment::stop() {
  if (stopped_)
    co_return;
  stopped_ = true;
  if (!runtime_)
    co_return;
  emit(DeploymentStage::stopping, "closing local sessions");
  try {
    co_await runtime_->close();
  } catch (const std::exception&) {
    // Sessions that cannot close cleanly are killed by the runtime's destructor.
  }
  // The runtime itself lives on until the deployment is destroyed: a call still suspended in it
  // (another coroutine's command) resumes on a live object and ends with an error.
  emit(DeploymentStage::stopped, "local runtime stopped");
}

Runtime& LocalDeployment::runtime() {
  if (!runtime_ || stopped_)
    throw DeploymentNotStartedError(stopped_ ? "local deployment: stopped"
                                             : "local deployment: not started");
  return *runtime_;
}

bool LocalDeployment::started() const noexcept {
  return runtime_ != nullptr && !stopped_;
}

}  // namespace rex
