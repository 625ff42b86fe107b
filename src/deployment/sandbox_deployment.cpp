#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/timeout.hpp>
#include <rex/deployment/sandbox_deployment.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include "deployment/sandbox_runtime.hpp"

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <exception>
#include <optional>
#include <utility>

namespace rex {

asio::awaitable<std::optional<std::string>> SandboxBackend::lost(std::string id) {
  (void)id;
  co_return std::nullopt;
}

asio::awaitable<void> SandboxBackend::refresh_client(std::string url) {
  (void)url;
  co_return;
}

SandboxDeployment::SandboxDeployment(asio::any_io_executor executor,
                                     std::unique_ptr<SandboxBackend> backend,
                                     SandboxRequest request)
    : executor_(std::move(executor)),
      backend_(std::move(backend)),
      request_(std::move(request)),
      hooks_(std::make_shared<SandboxProgress>(
          [this](const DeploymentEvent& event) { emit(event); })) {
  if (request_.deployment_id.empty())
    request_.deployment_id = random_hex(6);
}

SandboxDeployment::~SandboxDeployment() {
  *hooks_ = nullptr;  // a start still running reports to nobody
  if (!sandbox_ || stopped_ || released_)
    return;
  // In the background: the sandbox goes though nobody waits for it (a failure leaves it to its
  // own lifetime and to `rex gc`).
  asio::co_spawn(
      executor_,
      [backend = backend_, id = sandbox_->id]() -> asio::awaitable<void> {
        try {
          auto destroying = backend->destroy(id);
          co_await std::move(destroying);
        } catch (const std::exception&) {
        }
      },
      asio::detached);
}

const std::string& SandboxDeployment::deployment_id() const noexcept {
  return request_.deployment_id;
}

asio::awaitable<void> SandboxDeployment::start() {
  if (stopped_)
    throw DeploymentStartupError(
        fmt::format("{} deployment: cannot start again after stop()", backend_->name()));
  if (started_)
    co_return;
  SandboxRequest request = request_;
  request.progress = [hooks = hooks_](const DeploymentEvent& event) {
    if (*hooks)
      (*hooks)(event);
  };
  auto creating = backend_->create(std::move(request));
  StartedSandbox made = co_await std::move(creating);
  sandbox_ = std::make_unique<StartedSandbox>(std::move(made));
  RemoteRuntimeConfig rc;
  rc.url = sandbox_->url;
  rc.auth_token = sandbox_->token;
  rc.client.headers = sandbox_->headers;
  backend_->configure_client(rc.url, rc.client);
  runtime_ = std::make_unique<detail::SandboxRuntime>(
      executor_, backend_, sandbox_->id, sandbox_->url,
      std::make_unique<RemoteRuntime>(executor_, std::move(rc)));
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
    // The sandbox may be gone already, its sessions with it: a few seconds, not the client's
    // whole patience.
    auto closing = with_timeout(runtime_->remote().close(), std::chrono::seconds(10));
    auto closed = capture(std::move(closing));
    (void)co_await std::move(closed);
    runtime_->remote().close_idle_connections();
  }
  auto destroying = backend_->destroy(sandbox_->id);
  co_await std::move(destroying);
  emit(DeploymentStage::stopped, "removed the sandbox " + sandbox_->id);
}

asio::awaitable<IsAliveResponse> SandboxDeployment::is_alive() {
  if (!started_)
    co_return IsAliveResponse{false, fmt::format("{} deployment: {}", backend_->name(),
                                                 stopped_ ? "stopped" : "not started")};
  auto asking = runtime_->is_alive();
  co_return co_await std::move(asking);
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

SandboxHandoff SandboxDeployment::release() {
  if (!started_)
    throw DeploymentNotStartedError(
        fmt::format("{} deployment: {}", backend_->name(), stopped_ ? "stopped" : "not started"));
  runtime_->remote().close_idle_connections();
  started_ = false;
  stopped_ = true;
  released_ = true;
  return SandboxHandoff{sandbox_->id, sandbox_->url, sandbox_->token, sandbox_->headers};
}

}  // namespace rex
