// SandboxDeployment: the Deployment over any SandboxBackend. start() creates one sandbox from
// its request (the backend starts it, waits for its rex-server and removes what it made when
// that fails), then reaches its server with a RemoteRuntime; stop() closes the runtime's
// sessions and destroys the sandbox; is_alive() asks the backend whether the sandbox is lost,
// then the server. A call through runtime() that fails because the sandbox is lost throws
// SandboxLostError with the backend's reason. Destroying a started deployment without stop()
// destroys its sandbox in the background, unless release() handed it over. A backend's own
// Deployment is this one with its settings (DaytonaDeployment, KubernetesDeployment).
//
// Threading: call every member from the executor the deployment was created with.
#pragma once

#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex {

namespace detail {
class SandboxRuntime;
}

class SandboxDeployment : public Deployment {
 public:
  /// The stages of the start reach the hooks (request.progress is this deployment's); the
  /// request's deployment_id is this deployment's (a random one when it sets none).
  SandboxDeployment(asio::any_io_executor executor, std::unique_ptr<SandboxBackend> backend,
                    SandboxRequest request);
  ~SandboxDeployment() override;

  /// DeploymentStartupError with the backend's words; nothing is left behind.
  asio::awaitable<void> start() override;
  /// Closes the runtime's sessions and destroys the sandbox (one already gone is no error).
  asio::awaitable<void> stop() override;
  /// The backend's reason when it sees the sandbox lost, else the server's answer.
  asio::awaitable<IsAliveResponse> is_alive() override;
  Runtime& runtime() override;
  bool started() const noexcept override;

  /// The started sandbox: its id, its server's URL, token and headers, where sessions work.
  /// DeploymentNotStartedError before start().
  const StartedSandbox& sandbox() const;
  /// Hands the started sandbox over to the caller, who then owns its end: how to reach its
  /// server. The deployment forgets it (neither stop() nor its destruction destroys it) and is
  /// stopped. DeploymentNotStartedError unless started.
  SandboxHandoff release();
  SandboxBackend& backend() noexcept { return *backend_; }
  const SandboxBackend& backend() const noexcept { return *backend_; }
  /// The id in the sandbox's rex.deployment label.
  const std::string& deployment_id() const noexcept;
  /// The backend's id of the sandbox, and its server's base URL, once created (they stay after
  /// stop()); empty before.
  const std::string& sandbox_id() const noexcept;
  const std::string& url() const noexcept;

 private:
  asio::any_io_executor executor_;
  std::shared_ptr<SandboxBackend> backend_;  // shared with a destroy in the background
  SandboxRequest request_;
  std::unique_ptr<StartedSandbox> sandbox_;  // once created
  std::unique_ptr<detail::SandboxRuntime> runtime_;
  bool started_ = false;
  bool stopped_ = false;
  bool released_ = false;
  // The deployment's hooks as the backend's progress; emptied when the deployment goes, so that
  // a start still running then reports to nobody.
  std::shared_ptr<SandboxProgress> hooks_;
};

}  // namespace rex
