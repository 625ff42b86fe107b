// Provider: where the gateway's sandboxes run (local processes, Docker, Podman, Kubernetes...). A
// provider is a Deployment's start and stop split apart by a database: create() starts a sandbox
// and says how to reach its rex-server, destroy() removes it by name alone (the gateway that
// created it may have crashed since), and list() says what is running, so a restarted gateway can
// adopt what it finds, mark what vanished and remove what it has no record of.
//
// Guarantees every provider gives:
// - Everything create() makes carries the gateway's id and the session's id (labels, a file),
//   so list() finds it after a crash, and nothing of another gateway or of `rex run` is listed.
// - The sandbox enforces its own hard deadline (rex-server's --max-lifetime), so a gateway that
//   never comes back leaves nothing running for ever.
// - create() that fails leaves nothing behind; destroy() of a sandbox already gone succeeds.
//
// Threading: call every member from the gateway's io_context.
#pragma once

#include <rex/deployment/backend.hpp>
#include <rex/gateway/environment.hpp>
#include <rex/http/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::gateway {

namespace asio = boost::asio;

/// A provider could not do what was asked; the message says what and why.
class ProviderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Where the gateway keeps its own files (the notebook's kernel) in a sandbox with a file system
/// of its own (StartedSandbox::own_filesystem).
inline constexpr std::string_view kSandboxScratchDir = "/tmp/.rex-gateway";
/// The bash session execute's bash cells run in (the notebook's shell). A spare sandbox has it
/// started already, in its working directory.
inline constexpr std::string_view kNotebookShell = "notebook";

/// What a sandbox is made from.
struct SandboxSpec {
  std::string session_id;
  Environment environment;
  std::map<std::string, std::string> env;  // the environment's, with the request's over it
  double max_lifetime = 0;                 // seconds from now until the sandbox ends itself
  std::string image;  // a checkpoint's image to start from instead of the environment's
};

/// How the gateway reaches a sandbox's rex-server; kept in the session's record.
struct SandboxAddress {
  std::string sandbox_id;   // the provider's own name for it
  std::string url;          // rex/http/url.hpp forms
  std::string token;        // the server's X-API-Key
  std::string working_dir;  // where execute runs and relative file paths point
  std::string scratch_dir;  // the gateway's own files in the sandbox (the notebook's kernel)
  // Sent with every request to the server (a routing proxy's headers: e2b).
  std::vector<std::pair<std::string, std::string>> headers;
  // The notebook's shell (kNotebookShell) runs already, in working_dir (a spare's).
  bool shell_started = false;
};

/// One sandbox a provider runs for this gateway.
struct SandboxListing {
  std::string sandbox_id;
  std::string session_id;
  bool running = false;   // false: it exists but its server has ended
  double created_at = 0;  // unix seconds
  // Started ahead of time by an earlier run of this gateway and never handed to a session
  // (session_id is empty): nothing of anyone's is in it, it goes at once.
  bool spare = false;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const noexcept = 0;
  /// Starts the sandbox and waits until its server answers. ProviderError on failure.
  virtual asio::awaitable<SandboxAddress> create(SandboxSpec spec) = 0;
  /// Stops and removes the sandbox. ProviderError when it exists and cannot be removed.
  virtual asio::awaitable<void> destroy(std::string sandbox_id) = 0;
  /// Every sandbox of this gateway that still exists.
  virtual asio::awaitable<std::vector<SandboxListing>> list() = 0;
  /// Keeps `count` sandboxes made from `spec` (its session_id and max_lifetime aside) started
  /// ahead of time; create() of a spec with the same environment and env then hands one out: it
  /// names the session in its labels and gets the spec's max_lifetime as its deadline at that
  /// moment, and another is started in its place. Spares are not in list(). A provider that
  /// cannot relabel a running sandbox ignores this.
  virtual void keep_spares(SandboxSpec spec, std::size_t count) {
    (void)spec;
    (void)count;
  }
  /// Replaces the spares that ended or are about to reach their own deadline. The gateway calls
  /// it with its drift check.
  virtual asio::awaitable<void> tend_spares() { co_return; }
  /// Removes every spare and starts no more (the gateway stops).
  virtual asio::awaitable<void> drop_spares() { co_return; }
  // Checkpoints, pauses and metrics (SandboxBackend's): a provider says which it has; the
  // others throw ProviderError naming the provider and the operation.
  virtual bool can(SandboxOperation operation) const noexcept {
    (void)operation;
    return false;
  }
  /// Saves the sandbox's file system as an image labelled `labels` (and this gateway's); a
  /// SandboxSpec whose image is the returned one starts from it.
  virtual asio::awaitable<std::string> checkpoint(std::string sandbox_id,
                                                  std::map<std::string, std::string> labels);
  /// Removes a checkpoint's image; one gone already is no error. ProviderError while a sandbox
  /// started from it exists.
  virtual asio::awaitable<void> remove_checkpoint(std::string image);
  /// This gateway's checkpoint images, each with its labels (rex.checkpoint: the checkpoint's id).
  virtual asio::awaitable<std::vector<SandboxInfo>> list_checkpoints() {
    co_return std::vector<SandboxInfo>{};
  }
  virtual asio::awaitable<void> pause(std::string sandbox_id);
  virtual asio::awaitable<void> resume(std::string sandbox_id);
  virtual asio::awaitable<SandboxMetrics> metrics(std::string sandbox_id);
  /// Builds a template's image (labelled with this gateway's id); its id. ProviderError with
  /// the build's own words when a step fails.
  virtual asio::awaitable<std::string> build_image(ImageBuild build);
  /// The id of the image `name` where build_image() builds; nullopt when there is none.
  virtual asio::awaitable<std::optional<std::string>> image_id(std::string name) {
    (void)name;
    co_return std::nullopt;
  }
  /// This gateway's template images (build_image's), each with its labels.
  virtual asio::awaitable<std::vector<SandboxInfo>> list_built_images() {
    co_return std::vector<SandboxInfo>{};
  }

  /// True when the sandbox has no boundary of its own but its working directory (local): the
  /// file calls then refuse paths that leave it.
  virtual bool confines_files() const noexcept { return false; }
  /// Prepares the client that reaches one of this provider's sandboxes at `url` (its TLS
  /// material and credentials, when a proxy stands in front of it). Most need nothing.
  virtual void configure_client(const std::string& url, http::ClientConfig& client) const {
    (void)url;
    (void)client;
  }
};

}  // namespace rex::gateway
