// SandboxBackend: a place sandboxes live (a Docker engine, a Kubernetes cluster, a cloud's
// sandboxes), as one interface: create a sandbox from a request and hand back how to reach its
// rex-server, destroy one by id alone, list them by labels. SandboxDeployment
// (rex/deployment/sandbox_deployment.hpp) is the Deployment over any backend: its create and
// destroy around one sandbox; a holder that outlives the process that created a sandbox (the
// gateway, which keeps the id in its database) uses the backend directly.
//
// Guarantees every backend gives:
// - create() starts the sandbox and waits until its server answers; when it fails, whatever it
//   made is removed before it throws.
// - Everything create() makes carries the request's labels, so list() finds it again after a
//   crash; and rex-server in the sandbox ends itself at the request's lifetime.
// - destroy() of a sandbox already gone succeeds.
//
// Threading: call every member from the executor the backend was opened with.
#pragma once

#include <rex/deployment/checkpoint.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/settings.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex {

namespace asio = boost::asio;

/// Where sessions work in a container or pod whose request names no place (the engine or the
/// container runtime creates it).
inline constexpr std::string_view kContainerWorkingDir = "/workspace";

/// A call into a sandbox failed, and its backend sees the sandbox lost (gone, ended, its node
/// lost). extra_info: "sandbox", "reason", "error".
class SandboxLostError : public http::ConnectionError {
 public:
  using http::ConnectionError::ConnectionError;
};

/// What a backend can do to a sandbox besides create and destroy it (SandboxBackend::can).
enum class SandboxOperation {
  checkpoint,  // save its file system as an image a new sandbox can start from
  pause,       // freeze its processes, keeping their memory, and thaw them
  metrics,     // its CPU, memory and disk use
  build,       // build an image from a Dockerfile (a template's) that sandboxes start from
};

/// "checkpoint", "pause", "metrics".
std::string_view operation_name(SandboxOperation operation) noexcept;

/// A sandbox's file system, saved by SandboxBackend::checkpoint.
struct SandboxSnapshot {
  std::string image;  // a request's image for a sandbox that starts from it (the image's id)
};

/// An image to build (SandboxBackend::build_image).
struct ImageBuild {
  std::string context_tar;  // a tar file: the Dockerfile at `dockerfile` and the files it copies
  std::string dockerfile = "Dockerfile";
  std::string base;  // the image it starts FROM: present on the backend already, never pulled
  std::string tag;   // the name the image gets ("repo:tag")
  std::map<std::string, std::string> labels;
  std::function<void(std::string_view)> on_line;  // each line of the build's output
};

/// Told each stage of a sandbox's start (creating, pulling with its bytes, starting, waiting).
using SandboxProgress = std::function<void(const DeploymentEvent&)>;

/// What a sandbox is made from, over the backend's own settings.
struct SandboxRequest {
  std::string image{};                          // the image; empty: the settings'
  std::string template_name{};                  // E2B's template; empty: the settings'
  std::map<std::string, std::string> env{};     // the sandbox's environment variables
  std::map<std::string, std::string> labels{};  // on everything made (rex.gateway, rex.session)
  Seconds lifetime{0};                          // until the sandbox ends itself; 0: the settings'
  std::string working_dir{};                    // where sessions work; empty: the backend's choice
  std::optional<std::string> memory{};          // "512m", "2g" or bytes
  std::optional<double> cpus{};
  std::string network{};              // a network mode ("none"); empty: the default
  std::vector<std::string> mounts{};  // "HOST:SANDBOX[:ro]"
  std::string name{};                 // a name for the sandbox where the backend names them
  std::string purpose{};              // what asks, for messages: "environment python"
  // The asking deployment's id, in the sandbox's rex.deployment label (and its name where the
  // backend names sandboxes after it); empty: a random one.
  std::string deployment_id{};
  bool own_image = false;      // the image is the backend's own (a checkpoint's): never pulled
  SandboxProgress progress{};  // unset: nobody listens
};

/// How to reach a created sandbox's rex-server.
struct StartedSandbox {
  std::string id;     // the backend's own name for it: destroy() takes it
  std::string url;    // the server's base URL (rex/http/url.hpp forms)
  std::string token;  // its X-API-Key
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
  std::string working_dir;                                   // where sessions work
  // Nothing but this sandbox writes under its fixed paths (a container's or pod's own file
  // system), so a holder may keep its files at one place in every sandbox.
  bool own_filesystem = false;
};

/// One sandbox list() found.
struct SandboxInfo {
  std::string id;
  std::map<std::string, std::string> labels;
  bool running = false;   // false: it exists but its server has ended (or is ending)
  double created_at = 0;  // unix seconds
};

class SandboxBackend {
 public:
  virtual ~SandboxBackend() = default;
  /// "docker", "podman", "kubernetes", ...
  virtual std::string_view name() const noexcept = 0;
  /// Starts a sandbox and waits until its server answers. DeploymentStartupError (its message
  /// says what failed and why) when it cannot, with nothing left behind.
  virtual asio::awaitable<StartedSandbox> create(SandboxRequest request) = 0;
  /// Removes the sandbox. DeploymentStartupError when it exists and cannot be removed.
  virtual asio::awaitable<void> destroy(std::string id) = 0;
  /// Every sandbox that carries all of `labels`.
  virtual asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) = 0;
  /// Why the sandbox `id` is lost (gone, stopped, failed: the backend's own words), or nothing
  /// when the backend sees it running or cannot tell; its server is asked separately.
  virtual asio::awaitable<std::optional<std::string>> lost(std::string id);
  /// Brings the credentials of the clients configure_client() prepared for `url` up to date;
  /// awaited before each call into the sandbox. Most need nothing.
  virtual asio::awaitable<void> refresh_client(std::string url);
  /// After the proxy at `url` refused a call's credentials (401): true when new ones were asked
  /// for (an exec plugin's token revoked early), and the call is worth one more try.
  virtual bool renew_client(const std::string& url) {
    (void)url;
    return false;
  }

  // Checkpoints, pauses and metrics: a backend says which it has (can); the others throw
  // OperationUnsupportedError naming the backend and the operation.

  /// Whether the backend has the operation.
  virtual bool can(SandboxOperation operation) const noexcept {
    (void)operation;
    return false;
  }
  /// Saves the sandbox's file system as an image carrying `labels` (rex.checkpoint ones), the
  /// sandbox kept running (frozen while it is written). A request whose image is the snapshot's
  /// starts a sandbox from it.
  virtual asio::awaitable<SandboxSnapshot> checkpoint(std::string id,
                                                      std::map<std::string, std::string> labels);
  /// Removes a snapshot checkpoint() made; one gone already is no error. A snapshot a sandbox
  /// still starts from stays until that sandbox goes, where the backend keeps it.
  virtual asio::awaitable<void> remove_checkpoint(std::string image);
  /// The snapshots that carry all of `labels`, each as its image and labels.
  virtual asio::awaitable<std::vector<SandboxInfo>> list_checkpoints(
      std::map<std::string, std::string> labels);
  /// Freezes every process of the sandbox (their memory kept) / thaws them.
  virtual asio::awaitable<void> pause(std::string id);
  virtual asio::awaitable<void> resume(std::string id);
  /// Its CPU, memory and disk use now.
  virtual asio::awaitable<SandboxMetrics> metrics(std::string id);
  /// Builds the image; returns its id (a request's image with own_image set starts a sandbox
  /// from it). DeploymentStartupError naming the failed step with the build's own words. The
  /// image is removed with remove_checkpoint().
  virtual asio::awaitable<std::string> build_image(ImageBuild build);
  /// The id of the image `name` on the backend; nullopt when it has none by that name.
  virtual asio::awaitable<std::optional<std::string>> image_id(std::string name);
  /// The images build_image() made that carry all of `labels`, each as its id and labels.
  virtual asio::awaitable<std::vector<SandboxInfo>> list_built_images(
      std::map<std::string, std::string> labels);

  /// Prepares the client that reaches a sandbox of this backend at `url` (the TLS material and
  /// credentials of a proxy in front of it). Most need nothing.
  virtual void configure_client(const std::string& url, http::ClientConfig& client) const {
    (void)url;
    (void)client;
  }
};

}  // namespace rex
