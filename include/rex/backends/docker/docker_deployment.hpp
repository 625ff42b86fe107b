// DockerDeployment: a container started through the Docker Engine API (or Podman's compatible
// API), with rex-server injected into it, reached by a RemoteRuntime.
//
// - The image is used as it is: it needs bash, and neither Python nor network access. The static
//   rex-server goes in as a read-only bind mount when the engine runs on this machine, or is
//   uploaded into the created container (PUT /containers/{id}/archive) when it does not; it
//   becomes the container's entrypoint.
// - Networking: when this machine routes to the container's network (a rootful engine here; see
//   config.connect), the client reaches the server at the container's own address and nothing
//   is published: no proxy process and no firewall rules per container. Otherwise the server's
//   port is published on 127.0.0.1 with a host port the engine picks (or config.port), read
//   back after start, so parallel deployments never race for ports. With network_mode "none"
//   (or "host") the server listens on a unix socket in a host directory bind-mounted into the
//   container and the client connects over http+unix.
// - The server needs a token; a fresh random one is made for every container.
// - Nothing leaks: every container carries labels naming its owner process (host, boot, pid,
//   start time), its deployment id and its expiry, and its server exits after max_lifetime, so
//   `rex gc` (gc.hpp) can remove what a killed process left behind. stop() and a failed
//   start() remove the container (unless remove_container is false); destroying a started
//   deployment without stop() starts its removal in the background. The lifecycle is
//   SandboxDeployment's over this backend; the calls are the backend's create(), destroy() and
//   lost() (a container removed or exited).
// - Startup failures say what failed and how to fix it; when the container started, the error
//   carries its last log lines.
#pragma once

#include <rex/backends/docker/docker_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/sandbox_deployment.hpp>
#include <rex/deployment/server_binary.hpp>

#include <boost/json/object.hpp>

#include <memory>
#include <string>

namespace rex {

/// The Deployment over this backend's SandboxBackend (rex/deployment/sandbox_deployment.hpp) with
/// `config` as its settings; its sandbox id is the container's id.
class DockerDeployment final : public SandboxDeployment {
 public:
  /// DeploymentConfigError for settings that cannot work (an unsupported docker_args flag, a
  /// bad memory size, ...), before anything is started.
  DockerDeployment(asio::any_io_executor executor, DockerDeploymentConfig config);

  /// The settings, the container's name filled in.
  const DockerDeploymentConfig& config() const noexcept { return config_; }
  /// Empty until the container is created (and after a start that failed).
  const std::string& container_id() const noexcept { return sandbox_id(); }

  /// The container-create body start() sends, for inspection: the server's mount and socket
  /// directory shown as they will be for a local engine, its token a fresh one.
  boost::json::object create_body() const;

 private:
  DockerDeployment(asio::any_io_executor executor, DockerDeploymentConfig config, std::string id);

  DockerDeploymentConfig config_;
};

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_docker_backend(asio::any_io_executor executor,
                                                    DockerDeploymentConfig settings);

}  // namespace rex
