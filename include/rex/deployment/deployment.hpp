// Deployment: starts a sandbox and hands back the Runtime that reaches into it. Agent code
// programs against Runtime and stays the same whichever deployment (local, remote, Docker,
// dummy) made it.
//
// Lifecycle: start() once, then runtime() until stop(). stop() is safe to call at any time, more
// than once, and after a failed start; it releases everything start() took (the runtime's
// sessions, a container, temporary files). start() after stop() is refused.
//
// Progress: hooks added with add_hook() receive an event at each stage (pulling with bytes and
// percent, creating, starting, waiting for the server, ready, stopping, stopped). They run on
// the deployment's executor, in the order added, and must not block.
//
// Threading: call every member from the executor the deployment was created with.
#pragma once

#include <rex/deployment/checkpoint.hpp>
#include <rex/protocol/responses.hpp>
#include <rex/runtime/runtime.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex {

namespace asio = boost::asio;

enum class DeploymentStage { pulling, creating, starting, waiting, ready, stopping, stopped };

/// "pulling", "creating", ...
std::string_view to_string(DeploymentStage stage) noexcept;

struct DeploymentEvent {
  DeploymentStage stage = DeploymentStage::starting;
  std::string message{};  // one line for people: "pulling python:3.11: Downloading 41%"
  // Pulling only: summed over the image's layers seen so far; percent is -1 while unknown.
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  double percent = -1;
};

using DeploymentHook = std::function<void(const DeploymentEvent&)>;

/// runtime() before start() finished, or after stop().
class DeploymentNotStartedError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// start() failed. The message says what failed and why (for a container: its last log lines);
/// everything start() had taken is released before this is thrown.
class DeploymentStartupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How to reach a started sandbox's rex-server, for a holder that outlives the deployment:
/// SandboxDeployment::release().
struct SandboxHandoff {
  std::string sandbox_id;
  std::string url;                                           // RemoteRuntimeConfig::url
  std::string token;                                         // its auth_token
  std::vector<std::pair<std::string, std::string>> headers;  // its client.headers
};

class Deployment {
 public:
  virtual ~Deployment() = default;
  Deployment() = default;
  Deployment(const Deployment&) = delete;
  Deployment& operator=(const Deployment&) = delete;

  /// Starts the sandbox and waits until its runtime answers. DeploymentStartupError on failure.
  virtual asio::awaitable<void> start() = 0;
  /// Closes the runtime and releases the sandbox. Never throws for a sandbox already gone.
  virtual asio::awaitable<void> stop() = 0;
  /// {is_alive: false, message} before start, after stop, or when the sandbox does not answer.
  virtual asio::awaitable<IsAliveResponse> is_alive();
  /// The runtime of the started sandbox. DeploymentNotStartedError outside start..stop.
  virtual Runtime& runtime() = 0;
  /// True between a successful start() and stop().
  virtual bool started() const noexcept = 0;

  void add_hook(DeploymentHook hook);

  // Checkpoints (rex/deployment/checkpoint.hpp), pauses and metrics of the started sandbox. A
  // deployment without one throws OperationUnsupportedError naming it and the operation.

  /// Saves the sandbox's file system and its sessions' state; the sandbox runs on. A session
  /// whose foreground program still runs is named in not_carried.
  virtual asio::awaitable<Checkpoint> checkpoint();
  /// `count` new started sandboxes from the checkpoint, each with the checkpoint's sessions
  /// under their names; they differ from then on. All or none: a failed one ends the others.
  virtual asio::awaitable<std::vector<std::unique_ptr<Deployment>>> fork(Checkpoint from,
                                                                         int count);
  /// The sandbox as it was at one of its checkpoints (its own, or the one it was forked from):
  /// its file system and sessions; runtime() stays valid and reaches it.
  virtual asio::awaitable<void> rewind(Checkpoint to);
  /// Freezes the sandbox's processes, their memory kept; or, without keep_memory, checkpoints it
  /// and ends it (resume starts it again from that checkpoint).
  virtual asio::awaitable<void> pause(bool keep_memory = true);
  /// Brings a paused sandbox back: thawed, or started from its pause's checkpoint with its
  /// sessions restored.
  virtual asio::awaitable<void> resume();
  /// Whether the sandbox is paused now.
  virtual bool paused() const noexcept { return false; }
  /// Its CPU, memory and disk use now.
  virtual asio::awaitable<SandboxMetrics> metrics();
  /// Removes a checkpoint's image; one gone already is no error.
  virtual asio::awaitable<void> remove_checkpoint(Checkpoint checkpoint);

 protected:
  /// Hands the event to every hook. A hook that throws is ignored: progress reports must not
  /// break a deployment.
  void emit(const DeploymentEvent& event) const noexcept;
  void emit(DeploymentStage stage, std::string message) const noexcept;

 private:
  std::vector<DeploymentHook> hooks_;
};

}  // namespace rex
