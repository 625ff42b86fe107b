#include <rex/deployment/sandbox_deployment.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/format.h>

#include <exception>
#include <optional>
#include <utility>

namespace rex {

asio::awaitable<std::optional<std::string>> SandboxBackend::lost(std::string id) {
  (void)id;
  co_return std::nullopt;
}

SandboxDeployment::SandboxDeployment(asio::any_io_executor executor,
                                     std::unique_ptr<SandboxBackend> backend,
                                     SandboxRequest request)
    : executor_(std::move(executor)), backend_(std::move(backend)), request_(std::move(request)) {}

SandboxDeployment::~SandboxDeployment() = default;

asio::awaitable<void> SandboxDeployment::start() {
  if (stopped_)
    throw DeploymentStartupError(
        fmt::format("{} deployment: cannot start again after stop()", backend_->name()));
  if (started_)
    co_return;
  SandboxRequest request = request_;
  request.progress = [this](DeploymentStage stage, std::string message) {
    emit(stage, std::move(message));
  };
  auto creating = backend_->create(std::move(request));
  StartedSandbox made = co_await std::move(creating);
  sandbox_ = std::make_unique<StartedSandbox>(std::move(made));
  RemoteRuntimeConfig rc;
  rc.url = sandbox_->url;
  rc.auth_token = sandbox_->token;
  rc.client.headers = sandbox_->headers;
  backend_->configure_client(rc.url, rc.client);
  runtime_ = std::make_unique<RemoteRuntime>(executor_, std::move(rc));
  started_ = true;
  emit(DeploymentStage::ready,
       fmt::format("rex-server at {} (sandbox {})", sandbox_->url, sandbox_->id));
}

asio::awaitable<void> SandboxDeployment::stop() {
  if (stopped_)
    co_return;
  stopped_ = true;
  const bool was_started = started_;
  started_ = false;
  if (!sandbox_)
    co_return;  // never created: a failed create removed what it made
  emit(DeploymentStage::stopping, "removing the sandbox " + sandbox_->id);
  if (was_started && runtime_) {
    try {
      auto closing = runtime_->close();
      co_await std::move(closing);
    } catch (const std::exception&) {
      // The sandbox may be gone already; its sessions went with it.
    }
  }
  auto destroying = backend_->destroy(sandbox_->id);
  co_await std::move(destroying);
  emit(DeploymentStage::stopped, "removed the sandbox " + sandbox_->id);
}

namespace {

// The backend's reason when it sees the sandbox lost; its failure to answer counts as one.
asio::awaitable<std::optional<std::string>> lost_reason(SandboxBackend& backend, std::string id) {
  std::string failure;
  try {
    auto asking = backend.lost(std::move(id));
    co_return co_await std::move(asking);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  co_return failure;
}

}  // namespace

asio::awaitable<IsAliveResponse> SandboxDeployment::is_alive() {
  if (!started_)
    co_return IsAliveResponse{false, fmt::format("{} deployment: {}", backend_->name(),
                                                 stopped_ ? "stopped" : "not started")};
  auto looking = lost_reason(*backend_, sandbox_->id);
  if (const std::optional<std::string> why = co_await std::move(looking))
    co_return IsAliveResponse{false, *why};
  auto answering = runtime_->is_alive();
  IsAliveResponse answer = co_await std::move(answering);
  if (answer.is_alive)
    co_return answer;
  // The server stopped answering: the sandbox may have ended since the backend was asked, and
  // then the backend says how.
  auto again = lost_reason(*backend_, sandbox_->id);
  if (const std::optional<std::string> why = co_await std::move(again))
    co_return IsAliveResponse{false, *why};
  co_return answer;
}

Runtime& SandboxDeployment::runtime() {
  if (!started_)
    throw DeploymentNotStartedError(
        fmt::format("{} deployment: {}", backend_->name(), stopped_ ? "stopped" : "not started"));
  return *runtime_;
}

bool SandboxDeployment::started() const noexcept {
  return started_;
}

const StartedSandbox& SandboxDeployment::sandbox() const {
  if (!sandbox_)
    throw DeploymentNotStartedError(fmt::format("{} deployment: not started", backend_->name()));
  return *sandbox_;
}

const std::string& SandboxDeployment::sandbox_id() const noexcept {
  static const std::string none;
  return sandbox_ ? sandbox_->id : none;
}

const std::string& SandboxDeployment::url() const noexcept {
  static const std::string none;
  return sandbox_ ? sandbox_->url : none;
}

SandboxHandoff SandboxDeployment::handoff() const {
  if (!started_)
    throw DeploymentNotStartedError(fmt::format("{} deployment: not started", backend_->name()));
  return SandboxHandoff{sandbox_->id, sandbox_->url, sandbox_->token, sandbox_->headers};
}

}  // namespace rex
