// What the docker module's backend (docker_backend.cpp) calls of the container's start and end
// (docker_deployment.cpp). Internal to the module.
#pragma once

#include <rex/backends/docker/docker_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <string>

namespace rex {

namespace docker {
class Engine;
}

/// A container of `config` whose rex-server answers (docker_deployment.hpp), named
/// rex-<deployment_id> unless config.container_name names it, told of each stage (pulling with
/// its bytes) through `progress`. DeploymentStartupError saying what failed and how to fix it,
/// with the container's last log lines once it ran; what the start made is removed first.
asio::awaitable<StartedSandbox> create_docker_container(asio::any_io_executor executor,
                                                        DockerDeploymentConfig config,
                                                        std::string deployment_id,
                                                        SandboxProgress progress);

/// Kills the container `id` and, as `settings` say, removes it (retried while the engine cannot
/// be reached for a while) and its image; removes the socket directory its start made. One
/// already gone is no error; DeploymentStartupError (or the engine's error) when it stays.
asio::awaitable<void> remove_docker_container(docker::Engine& engine, std::string id,
                                              const DockerDeploymentConfig& settings);

/// The container-create body a start of `config` sends (the server's path and socket directory
/// as placeholders).
boost::json::object docker_create_body(const DockerDeploymentConfig& config,
                                       std::string deployment_id);

}  // namespace rex
