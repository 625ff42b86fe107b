// E2BDeployment: a sandbox of E2B (e2b.dev), or of any endpoint that speaks E2B's API, such as
// a rex gateway (docs/gateway.md). start() creates the sandbox through E2B's control API,
// uploads the static rex-server through the sandbox's own daemon (envd: its /files), starts it
// there as a background process (process.Process/Start, on any free port, which it reads from
// the server's first lines of output), and reaches it through E2B's routing of sandbox ports:
// by host name (https://PORT-SANDBOX.DOMAIN) or, with sandbox_url set, at that one URL with
// the E2b-Sandbox-Id and E2b-Sandbox-Port headers, as E2B's SDKs do with E2B_SANDBOX_URL. The
// runtime is then a RemoteRuntime: the same protocol, sessions and streams as everywhere else.
// stop() kills the sandbox. Its lifetime (timeout) ends it on E2B's side whatever happens here,
// and rex-server's own --max-lifetime ends the server with it.
//
// Threading: call every member from the executor the deployment was created with.
#pragma once

#include <rex/backends/e2b/e2b_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/http/client.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rex {

class E2BDeployment final : public Deployment {
 public:
  /// Fields left empty take E2B's environment variables, as its SDKs do (E2B_API_KEY,
  /// E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN). DeploymentConfigError for a URL that cannot
  /// be used or no API key at all.
  E2BDeployment(asio::any_io_executor executor, E2BDeploymentConfig config);
  ~E2BDeployment() override;

  /// DeploymentStartupError naming the step that failed (create, upload, start, first
  /// answer) and what the endpoint said; a sandbox created before the failure is killed.
  asio::awaitable<void> start() override;
  asio::awaitable<void> stop() override;
  Runtime& runtime() override;
  bool started() const noexcept override;

  /// E2B's sandboxID (empty before start()).
  const std::string& sandbox_id() const noexcept { return sandbox_id_; }
  /// The port rex-server listens on in the sandbox (0 before start()).
  int server_port() const noexcept { return server_port_; }
  /// After start(): how to reach the sandbox's server. Destroying the deployment without
  /// stop() leaves the sandbox running (its timeout still ends it).
  SandboxHandoff handoff() const;
  /// The control API's URL and key, as given or taken from the environment.
  const std::string& api_url() const noexcept { return config_.api_url; }
  const std::string& api_key() const noexcept { return config_.api_key; }

 private:
  asio::awaitable<void> create_sandbox();
  asio::awaitable<void> upload(const std::string& local, const std::string& remote);
  asio::awaitable<int> start_server(const std::string& server, const std::string& token_file);
  std::string port_url(int port) const;
  std::vector<std::pair<std::string, std::string>> port_headers(int port) const;
  http::ClientConfig envd_client_config() const;  // for the sandbox's daemon (envd)
  asio::awaitable<void> kill_sandbox();

  asio::any_io_executor executor_;
  E2BDeploymentConfig config_;
  std::string sandbox_id_;
  std::string envd_token_;
  std::string domain_;
  std::string server_token_;
  int server_port_ = 0;
  std::unique_ptr<RemoteRuntime> runtime_;
  bool started_ = false;
  bool stopped_ = false;
};

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_e2b_backend(asio::any_io_executor executor,
                                                 E2BDeploymentConfig settings);

}  // namespace rex
