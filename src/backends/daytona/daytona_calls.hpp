// What the daytona module's backend (daytona_backend.cpp) calls of its API code
// (daytona_deployment.cpp). Internal to the module.
#pragma once

#include <rex/backends/daytona/daytona_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string>

namespace rex {

/// `config` with Daytona's environment variables filled in and checked (DeploymentConfigError).
DaytonaDeploymentConfig resolve_daytona_config(DaytonaDeploymentConfig config);

/// A sandbox of `config` with rex-server started in it and answering (docs/daytona.md), told of
/// each stage through `progress`; DeploymentStartupError naming the step, the sandbox deleted.
/// Sessions work in `working_dir`, else where the sandbox starts processes. `deployment_id` goes
/// into its rex.deployment label (empty: a random one).
asio::awaitable<StartedSandbox> create_daytona_sandbox(asio::any_io_executor executor,
                                                       DaytonaDeploymentConfig config,
                                                       std::string working_dir,
                                                       std::string deployment_id,
                                                       SandboxProgress progress);

/// Why Daytona no longer runs the sandbox (its state and reason), or nothing while it is
/// `started`. DeploymentStartupError when Daytona cannot be asked (a sandbox already deleted
/// included).
asio::awaitable<std::optional<std::string>> daytona_sandbox_lost(asio::any_io_executor executor,
                                                                 DaytonaDeploymentConfig config,
                                                                 std::string sandbox_id);

}  // namespace rex
