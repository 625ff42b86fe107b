// What the modal module's backend (modal_backend.cpp) calls of its API code
// (modal_deployment.cpp). Internal to the module.
#pragma once

#include <rex/backends/modal/modal_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string>

namespace rex {

/// `config` with Modal's environment variables and settings file filled in and checked
/// (DeploymentConfigError).
ModalDeploymentConfig resolve_modal_config(ModalDeploymentConfig config);

/// A sandbox of `config` with rex-server running in it behind its tunnel and answering
/// (docs/modal.md), told of each stage through `progress`; DeploymentStartupError naming the
/// call, the sandbox terminated. Sessions work in `working_dir`, else where the sandbox starts
/// processes. `deployment_id` goes into its rex.deployment tag (empty: a random one).
asio::awaitable<StartedSandbox> create_modal_sandbox(asio::any_io_executor executor,
                                                     ModalDeploymentConfig config,
                                                     std::string working_dir,
                                                     std::string deployment_id,
                                                     SandboxProgress progress);

/// How the sandbox ended (Modal's result), or nothing while it runs.
asio::awaitable<std::optional<std::string>> modal_sandbox_lost(asio::any_io_executor executor,
                                                               ModalDeploymentConfig config,
                                                               std::string sandbox_id);

}  // namespace rex
