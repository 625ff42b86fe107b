#include <rex/backends/remote/remote_deployment.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/url.hpp>

#include <fmt/format.h>

#include <chrono>

#include "core/clock.hpp"

namespace rex {

namespace {

// SWE-ReX joins host and port as "{host}:{port}"; rex accepts a whole URL as host, so the port
// replaces one already there only when the URL has none.
std::string join_url(const RemoteDeploymentConfig& c) {
  std::string url = c.host;
  while (url.ends_with('/'))
    url.pop_back();
  if (c.port) {
    if (*c.port <= 0 || *c.port > 65535)
      throw DeploymentConfigError(fmt::format("remote.port: {} is not a TCP port", *c.port));
    url += fmt::format(":{}", *c.port);
  }
  try {
    (void)http::parse_url(url);
  } catch (const http::InvalidUrlError& e) {
    throw DeploymentConfigError(fmt::format("remote.host: {}", e.what()));
  }
  return url;
}

}  // namespace

RemoteDeployment::RemoteDeployment(asio::any_io_executor executor, RemoteDeploymentConfig config)
    : executor_(std::move(executor)), config_(std::move(config)), url_(join_url(config_)) {}

RemoteDeployment::~RemoteDeployment() = default;

asio::awaitable<void> RemoteDeployment::start() {
  if (stopped_)
    throw DeploymentStartupError("remote deployment: cannot start again after stop()");
  if (started_)
    co_return;
  RemoteRuntimeConfig rc;
  rc.url = url_;
  rc.auth_token = config_.auth_token;
  rc.is_alive_timeout =
      std::max(rex::detail::seconds_to_ms(config_.timeout), std::chrono::milliseconds(1));
  runtime_ = std::make_unique<RemoteRuntime>(executor_, std::move(rc));
  emit(DeploymentStage::waiting, "waiting for " + url_);
  // A refused token will not get better by waiting: say so at once.
  const IsAliveResponse first = co_await runtime_->is_alive();
  if (!first.is_alive && (first.message.starts_with("Status code 401 ") ||
                          first.message.starts_with("Status code 403 "))) {
    runtime_.reset();
    throw DeploymentStartupError(fmt::format(
        "remote deployment: the server at {} refused the auth_token: {}", url_, first.message));
  }
  std::string failure;
  if (!first.is_alive) {
    try {
      co_await runtime_->wait_until_alive(rex::detail::seconds_to_ms(config_.startup_timeout));
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (!failure.empty()) {
    runtime_.reset();
    throw DeploymentStartupError(
        fmt::format("remote deployment: the server at {} did not answer within {} s: {}", url_,
                    config_.startup_timeout.count(), failure));
  }
  started_ = true;
  emit(DeploymentStage::ready, "connected to " + url_);
}

asio::awaitable<void> RemoteDeployment::stop() {
  if (stopped_)
    co_return;
  stopped_ = true;
  if (!runtime_)
    co_return;
  if (config_.close_on_stop)
    emit(DeploymentStage::stopping, "closing sessions at " + url_);
  if (started_ && config_.close_on_stop) {
    try {
      co_await runtime_->close();
    } catch (const std::exception&) {
      // The server may already be gone; its sessions went with it.
    }
  }
  started_ = false;
  // runtime_ stays until the deployment is destroyed: calls still in flight end with errors
  // instead of resuming on a freed object.
  emit(DeploymentStage::stopped, "disconnected from " + url_);
}

Runtime& RemoteDeployment::runtime() {
  if (!started_)
    throw DeploymentNotStartedError(stopped_ ? "remote deployment: stopped"
                                             : "remote deployment: not started");
  return *runtime_;
}

bool RemoteDeployment::started() const noexcept {
  return started_;
}
const std::string& RemoteDeployment::url() const noexcept {
  return url_;
}

}  // namespace rex
