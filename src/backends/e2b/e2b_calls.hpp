// What the e2b module's backend (e2b_backend.cpp) calls of its API code (e2b_deployment.cpp).
// Internal to the module.
#pragma once

#include <rex/backends/e2b/e2b_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string>

namespace rex {

/// `config` with E2B's environment variables filled in (E2B_API_KEY, E2B_API_URL,
/// E2B_SANDBOX_URL, E2B_DOMAIN) and checked (DeploymentConfigError).
E2BDeploymentConfig resolve_e2b_config(E2BDeploymentConfig config);

/// A sandbox of `config` with rex-server started in it and answering (e2b_deployment.hpp), told
/// of each stage through `progress`; DeploymentStartupError naming the step, the sandbox killed.
/// Sessions work in `working_dir`, else where the sandbox starts processes. `deployment_id` goes
/// into its rex.deployment metadata (empty: none).
asio::awaitable<StartedSandbox> create_e2b_sandbox(asio::any_io_executor executor,
                                                   E2BDeploymentConfig config,
                                                   std::string working_dir,
                                                   std::string deployment_id,
                                                   SandboxProgress progress);

/// DELETE /sandboxes/ID of the resolved `config`'s API (one already gone is no error).
/// DeploymentStartupError when the endpoint refuses.
asio::awaitable<void> kill_e2b_sandbox(asio::any_io_executor executor, E2BDeploymentConfig config,
                                       std::string sandbox_id);

/// Why the endpoint no longer runs the sandbox (gone, paused), or nothing while it runs.
/// DeploymentStartupError when it cannot be asked.
asio::awaitable<std::optional<std::string>> e2b_sandbox_lost(asio::any_io_executor executor,
                                                             E2BDeploymentConfig config,
                                                             std::string sandbox_id);

/// The port rex-server listens on in a started sandbox (its URL or the port header says it).
int e2b_server_port(const StartedSandbox& sandbox);

}  // namespace rex
