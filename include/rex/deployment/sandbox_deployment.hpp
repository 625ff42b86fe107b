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

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

class RemoteRuntime;

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
  /// stop()); empty before. A rewind or a resume from a checkpoint changes them.
  const std::string& sandbox_id() const noexcept;
  const std::string& url() const noexcept;

  // Checkpoints on the backends that have them (SandboxBackend::can); the others throw
  // OperationUnsupportedError naming the backend and the operation. While the sandbox is paused
  // its runtime does not answer; checkpoint, fork from it and stop work.
  asio::awaitable<Checkpoint> checkpoint() override;
  asio::awaitable<std::vector<std::unique_ptr<Deployment>>> fork(Checkpoint from,
                                                                 int count) override;
  /// fork(), as the deployments they are.
  asio::awaitable<std::vector<std::unique_ptr<SandboxDeployment>>> fork_sandboxes(Checkpoint from,
                                                                                  int count);
  /// std::invalid_argument for a checkpoint of another sandbox (neither taken of this one nor
  /// the one it was forked from) or of another backend.
  asio::awaitable<void> rewind(Checkpoint to) override;
  asio::awaitable<void> pause(bool keep_memory = true) override;
  asio::awaitable<void> resume() override;
  bool paused() const noexcept override;
  asio::awaitable<SandboxMetrics> metrics() override;
  /// Makes deployments, not started, each of which starts as a fork of `from` (its sandbox from
  /// the checkpoint's image, the checkpoint's sessions restored): a SandboxPool's factory for
  /// handing out forks of one checkpoint (rex/pool/sandbox_pool_config.hpp: forks_of). They
  /// share this deployment's backend and settings, not its lifetime.
  std::function<std::unique_ptr<Deployment>(asio::any_io_executor)> fork_factory(
      Checkpoint from) const;
  /// An error naming the checkpoint while a sandbox started from it still exists.
  asio::awaitable<void> remove_checkpoint(Checkpoint checkpoint) override;

 private:
  struct Shared {};  // the backend is another deployment's too (a fork's)
  SandboxDeployment(Shared, asio::any_io_executor executor, std::shared_ptr<SandboxBackend> backend,
                    SandboxRequest request);
  // A deployment, not started, that starts as a fork of `from` (fork_sandboxes, fork_factory).
  static std::unique_ptr<SandboxDeployment> make_fork(asio::any_io_executor executor,
                                                      std::shared_ptr<SandboxBackend> backend,
                                                      const SandboxRequest& original,
                                                      const Checkpoint& from);
  // The deployment's hooks as a backend's progress (they report to nobody once it is gone).
  SandboxProgress relay() const;
  // The client of a sandbox's server, prepared by the backend.
  std::unique_ptr<RemoteRuntime> client_of(const StartedSandbox& sandbox) const;
  void require(SandboxOperation operation, std::string_view what) const;
  void require_started(std::string_view what) const;
  // Starts a sandbox from the checkpoint in place of this one (whose runtime then reaches it)
  // and recreates its sessions; the old one goes. Nothing changes when the start fails.
  asio::awaitable<void> replace_from(const Checkpoint& from);
  asio::awaitable<void> restore_sessions(const Checkpoint& from);
  // Removes the own images no sandbox uses any more (the rest are kept for later).
  asio::awaitable<void> remove_own_images();

  enum class Pause { none, frozen, ended };

  asio::any_io_executor executor_;
  std::shared_ptr<SandboxBackend> backend_;  // shared with a destroy in the background
  SandboxRequest request_;
  std::unique_ptr<StartedSandbox> sandbox_;  // once created
  std::unique_ptr<detail::SandboxRuntime> runtime_;
  bool started_ = false;
  bool stopped_ = false;
  bool released_ = false;
  Pause pause_ = Pause::none;
  std::optional<Checkpoint> pause_checkpoint_;  // an ended pause's
  std::string origin_;                          // the checkpoint it came from or took last
  std::set<std::string> lineage_;               // checkpoints it may rewind to
  // Images of its own pauses that its sandbox started from: removed once nothing uses them.
  std::vector<std::string> own_images_;
  std::string current_image_;          // what the sandbox now started from, when it is one of those
  std::vector<std::string> retiring_;  // sandboxes rewinds replaced, removed in the background
  std::optional<Checkpoint> fork_of_;  // start() makes a fork of it (fork_factory's)
  // The deployment's hooks as the backend's progress; emptied when the deployment goes, so that
  // a start still running then reports to nobody.
  std::shared_ptr<SandboxProgress> hooks_;
};

}  // namespace rex
