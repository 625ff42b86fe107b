// RemoteDeployment: a server that is already running (rex-server or swerex-remote), reached by
// URL and token. start() waits until it answers; stop() closes its sessions and leaves the
// server running, since this process did not start it.
#pragma once

#include <rex/backends/remote/remote_config.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <memory>
#include <string>

namespace rex {

class RemoteDeployment final : public Deployment {
 public:
  /// DeploymentConfigError when host and port do not make a valid URL.
  explicit RemoteDeployment(asio::any_io_executor executor, RemoteDeploymentConfig config = {});
  ~RemoteDeployment() override;

  /// DeploymentStartupError (with the last is_alive message) when the server does not answer
  /// within startup_timeout.
  asio::awaitable<void> start() override;
  asio::awaitable<void> stop() override;
  Runtime& runtime() override;
  bool started() const noexcept override;

  /// The base URL in use: host with the port applied.
  const std::string& url() const noexcept;

 private:
  asio::any_io_executor executor_;
  RemoteDeploymentConfig config_;
  std::string url_;
  std::unique_ptr<RemoteRuntime> runtime_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace rex
