// DaytonaDeployment: a sandbox of Daytona (daytona.io), with rex's own rex-server uploaded into
// it and reached through Daytona's preview URL of its port (docs/daytona.md).
//
// start(), over Daytona's REST API (Authorization: Bearer API_KEY):
// - POST /sandbox from the image (a one-line Dockerfile as its build, as Daytona's SDKs send an
//   image) or a snapshot, with rex's labels, the environment, no stop for idleness, and a time
//   to live (ttlMinutes) of container_timeout, so Daytona deletes it whatever happens here; then
//   GET /sandbox/{id} until it is `started` (a build or start that fails ends start() with
//   Daytona's errorReason).
// - Through the sandbox's toolbox (its toolboxProxyUrl + /{id}): rex-server and a file with the
//   server's token uploaded (POST /files/upload-v2), a process session made (POST
//   /process/session) and the server started in it without waiting (POST
//   /process/session/{session}/exec, runAsync) with --max-lifetime container_timeout. No
//   Python, no package installs, no fallback.
// - GET /sandbox/{id}/ports/{port}/preview-url: the URL and the token the preview proxy wants
//   (sent as x-daytona-preview-token, so the sandbox stays private); then a RemoteRuntime there,
//   until the server answers (runtime_timeout). The server's output is read from the session's
//   command logs when it does not.
// - stop() closes the runtime and deletes the sandbox (DELETE /sandbox/{id}); a failed start()
//   deletes what it created. is_alive() reports Daytona's state and reason once the sandbox is
//   no longer started. The lifecycle is SandboxDeployment's over this backend; the calls are the
//   backend's create(), destroy() and lost().
// - 429, 502, 503 and 504 answers (and 409 to a delete) and lost connections are tried again
//   (five attempts, exponential delays with full jitter); a key Daytona refuses (401, 403) fails
//   at once, naming where it came from.
//
// Threading: call every member from the executor the deployment was created with.
#pragma once

#include <rex/backends/daytona/daytona_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/sandbox_deployment.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/array.hpp>

#include <map>
#include <memory>
#include <string>

namespace rex {

/// The Deployment over this backend's SandboxBackend (rex/deployment/sandbox_deployment.hpp) with
/// `config` as its settings.
class DaytonaDeployment final : public SandboxDeployment {
 public:
  /// Fields left empty take Daytona's environment variables, as its SDKs do (DAYTONA_API_KEY,
  /// DAYTONA_API_URL, DAYTONA_TARGET). DeploymentConfigError for a URL that cannot be used or no
  /// API key at all. start() throws DeploymentStartupError naming the step that failed and what
  /// Daytona said; a sandbox created before the failure is deleted.
  DaytonaDeployment(asio::any_io_executor executor, DaytonaDeploymentConfig config);

  /// The config with the environment's values filled in.
  const DaytonaDeploymentConfig& config() const noexcept { return config_; }

 private:
  DaytonaDeploymentConfig config_;
};

/// Deletes a sandbox by id, with the deployment's retries (a sandbox already gone is no error).
/// `config` gives the API (its environment variables as for the deployment).
/// DeploymentStartupError when Daytona refuses.
asio::awaitable<void> delete_daytona_sandbox(asio::any_io_executor executor,
                                             DaytonaDeploymentConfig config,
                                             std::string sandbox_id);

/// Every sandbox whose labels include all of `labels` (GET /sandbox, page by page), as Daytona's
/// Sandbox objects. DeploymentStartupError when Daytona refuses.
asio::awaitable<boost::json::array> list_daytona_sandboxes(
    asio::any_io_executor executor, DaytonaDeploymentConfig config,
    std::map<std::string, std::string> labels);

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_daytona_backend(asio::any_io_executor executor,
                                                     DaytonaDeploymentConfig settings);

}  // namespace rex
