// E2BDeployment: a sandbox of E2B (e2b.dev), or of any endpoint that speaks E2B's API, such as
// a rex gateway (docs/gateway.md). start() creates the sandbox through E2B's control API,
// uploads the static rex-server through the sandbox's own daemon (envd: its /files), starts it
// there as a background process (process.Process/Start, on any free port, which it reads from
// the server's first lines of output), and reaches it through E2B's routing of sandbox ports:
// by host name (https://PORT-SANDBOX.DOMAIN) or, with sandbox_url set, at that one URL with
// the E2b-Sandbox-Id and E2b-Sandbox-Port headers, as E2B's SDKs do with E2B_SANDBOX_URL. The
// runtime is then a RemoteRuntime: the same protocol, sessions and streams as everywhere else.
// stop() kills the sandbox; is_alive() says when the endpoint no longer runs it (gone, paused).
// Its lifetime (timeout) ends it on E2B's side whatever happens here, and rex-server's own
// --max-lifetime ends the server with it. The lifecycle is SandboxDeployment's over this
// backend; the calls are the backend's create(), destroy() and lost().
//
// Threading: call every member from the executor the deployment was created with.
#pragma once

#include <rex/backends/e2b/e2b_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/sandbox_deployment.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace rex {

/// The Deployment over this backend's SandboxBackend (rex/deployment/sandbox_deployment.hpp) with
/// `config` as its settings; its sandbox id is E2B's sandboxID.
class E2BDeployment final : public SandboxDeployment {
 public:
  /// Fields left empty take E2B's environment variables, as its SDKs do (E2B_API_KEY,
  /// E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN). DeploymentConfigError for a URL that cannot
  /// be used or no API key at all. start() throws DeploymentStartupError naming the step that
  /// failed (create, upload, start, first answer) and what the endpoint said; a sandbox created
  /// before the failure is killed.
  E2BDeployment(asio::any_io_executor executor, E2BDeploymentConfig config);

  /// The config with the environment's values filled in (the control API's URL and key).
  const E2BDeploymentConfig& config() const noexcept { return config_; }
  /// The port rex-server listens on in the sandbox (0 unless started).
  int server_port() const noexcept;

 private:
  E2BDeploymentConfig config_;
};

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_e2b_backend(asio::any_io_executor executor,
                                                 E2BDeploymentConfig settings);

}  // namespace rex
