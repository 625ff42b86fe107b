// ModalDeployment: a Modal sandbox (modal.com) running rex's own rex-server from the image the
// user names, reached through an encrypted tunnel of Modal's (docs/modal.md).
//
// start(), over Modal's gRPC API (src/deployment/modal/api.proto; the token pair in every call's
// metadata), the calls Modal's SDKs make for the same work:
// - AppGetOrCreate (app_name, made if missing); EnvironmentGetOrCreate (the image builder
//   version); ImageGetOrCreate from `FROM image`, and ImageJoinStreaming until it is built.
// - rex-server as a mount (the local static binary, by its sha256): MountBatchedCheckExistence,
//   else MountPutFile (inline under 4 MiB; else BlobCreate, an HTTP PUT of the bytes to the URL
//   it gives, then MountPutFile with the blob), then MountGetOrCreate at /rex/rex-server.
// - SecretGetOrCreate (owned by the app) with the server's token as REX_AUTH_TOKEN and the
//   environment: the token never appears in the sandbox's definition.
// - SandboxCreate: `/rex/rex-server --host 0.0.0.0 --port PORT --max-lifetime
//   deployment_timeout`, an encrypted port, open network, timeout_secs deployment_timeout, rex's
//   labels as tags, sandbox_definition merged last; SandboxGetTaskId until it is scheduled (a
//   sandbox that ends first fails start() with Modal's result); SandboxGetTunnels for the port's
//   https://HOST[:PORT]; then a RemoteRuntime there, until the server answers. The entrypoint's
//   stderr (SandboxGetLogs) is in the error when it does not.
// - stop() closes the runtime and ends the sandbox (SandboxTerminate); a failed start() ends
//   what it created. is_alive() reports Modal's result (SandboxWait) once the sandbox has ended.
// - UNAVAILABLE, RESOURCE_EXHAUSTED, INTERNAL, UNKNOWN and DEADLINE_EXCEEDED are tried again
//   (five attempts, exponential delays with full jitter, the same idempotency key); a refused
//   token (UNAUTHENTICATED, PERMISSION_DENIED) fails at once, naming where it came from.
//
// gRPC's calls block: they run on a thread of the deployment's own, and the coroutines resume on
// the executor. Threading: call every member from the executor the deployment was created with.
#pragma once

#include <rex/backends/modal/modal_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/sandbox_deployment.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rex {

/// The Deployment over this backend's SandboxBackend (rex/deployment/sandbox_deployment.hpp) with
/// `config` as its settings.
class ModalDeployment final : public SandboxDeployment {
 public:
  /// Fields left empty take Modal's environment variables (MODAL_TOKEN_ID, MODAL_TOKEN_SECRET,
  /// MODAL_SERVER_URL, MODAL_ENVIRONMENT), else the profile of Modal's settings file
  /// (rex/backends/modal/modal_profile.hpp). DeploymentConfigError for no token, a settings file
  /// that cannot be used, a server URL that is not http(s), or a sandbox_definition that is not
  /// a Sandbox message. start() throws DeploymentStartupError naming the call that failed and
  /// what Modal said; a sandbox created before the failure is terminated.
  ModalDeployment(asio::any_io_executor executor, ModalDeploymentConfig config);

  /// The config with the environment's values filled in.
  const ModalDeploymentConfig& config() const noexcept { return config_; }

 private:
  ModalDeploymentConfig config_;
};

/// Ends a sandbox by id (SandboxTerminate, with the deployment's retries); one already ended is
/// no error. `config` gives the API and the token (their environment variables as for the
/// deployment). DeploymentStartupError when Modal refuses.
asio::awaitable<void> terminate_modal_sandbox(asio::any_io_executor executor,
                                              ModalDeploymentConfig config, std::string sandbox_id);

/// A sandbox SandboxList gives.
struct ModalSandboxListing {
  std::string sandbox_id;
  double created_at = 0;  // unix seconds
  bool running = false;   // false: it has ended (its result is set)
  std::map<std::string, std::string> tags;
};

/// The running sandboxes of `config`'s environment that carry every one of `tags` (SandboxList,
/// page by page). DeploymentStartupError when Modal refuses.
asio::awaitable<std::vector<ModalSandboxListing>> list_modal_sandboxes(
    asio::any_io_executor executor, ModalDeploymentConfig config,
    std::map<std::string, std::string> tags);

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_modal_backend(asio::any_io_executor executor,
                                                   ModalDeploymentConfig settings);

}  // namespace rex
