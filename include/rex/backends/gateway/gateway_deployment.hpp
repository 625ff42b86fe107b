// GatewayDeployment: a sandbox taken from a rex gateway (`rex gateway`, docs/gateway.md).
// start() creates a session there (POST /api/sessions, with an Idempotency-Key so a retried
// create makes one sandbox) and waits until its sandbox answers; the runtime speaks SWE-ReX's
// protocol through the gateway's proxy (/api/sessions/ID/swerex), so the gateway records every
// action in the session's transcript; stop() destroys the session (DELETE), keeping its log and
// artifacts on the gateway.
//
// Threading: call every member from the executor the deployment was created with.
#pragma once

#include <rex/backends/gateway/gateway_config.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex {

class GatewayDeployment final : public Deployment {
 public:
  /// DeploymentConfigError for a URL that cannot be used.
  GatewayDeployment(asio::any_io_executor executor, GatewayDeploymentConfig config);
  ~GatewayDeployment() override;

  /// DeploymentStartupError with the gateway's error (code and message) when it refuses or
  /// the sandbox does not answer within startup_timeout.
  asio::awaitable<void> start() override;
  asio::awaitable<void> stop() override;
  Runtime& runtime() override;
  bool started() const noexcept override;

  /// The gateway's id of the session (empty before start()).
  const std::string& session_id() const noexcept { return session_id_; }

 private:
  asio::any_io_executor executor_;
  GatewayDeploymentConfig config_;
  std::string session_id_;
  std::unique_ptr<RemoteRuntime> runtime_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace rex
