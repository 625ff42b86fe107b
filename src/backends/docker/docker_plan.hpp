// DockerDeployment's decisions apart from its I/O: the checked settings of a config, which
// rex-server to inject and how, how the client reaches the server, the container-create body,
// reading the server's address from an inspected container, what a failed start leaves to clean
// up and how its errors read. Pure functions of their inputs (no engine, no clock, no files), so
// start() only performs the engine calls in order. Internal to the library.
#pragma once

#include <rex/backends/docker/docker_config.hpp>
#include <rex/deployment/config.hpp>

#include <boost/json/object.hpp>

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex::detail {

// Where the server lives inside every container, and where its socket goes in network-less mode.
inline constexpr std::string_view kServerInContainer = "/.rex/rex-server";
inline constexpr std::string_view kSocketDirInContainer = "/.rex-run";
inline constexpr std::string_view kSocketName = "rex.sock";
inline constexpr int kServerPort = 8000;

/// A DockerDeploymentConfig that passed validate(), and what follows from it alone.
struct DockerSettings {
  DockerDeploymentConfig config;  // the hardened profile's defaults in, platform from docker_args
  std::string network_mode;       // the container's, after docker_args and create_options
  bool unix_socket = false;       // the server listens on a unix socket in a host directory
};

/// Checks every setting before anything starts: DeploymentConfigError naming the field for one
/// that cannot work (a bad port, an unsupported docker_args flag, a hardened container with a
/// network, ...).
DockerSettings validate(const DockerDeploymentConfig& config);

bool is_hardened(const DockerDeploymentConfig& config);

/// The network the container joins. Docker's default is "bridge"; Podman's compatible API
/// answers to that name too.
std::string network_name(const std::string& network_mode);

/// How the client reaches the server.
enum class ServerRoute {
  unix_socket,     // http+unix, through the socket directory bind-mounted into the container
  published_port,  // a port published on 127.0.0.1 (or config.port)
  container_ip,    // the container's own address on its network; nothing published
  ask_engine,      // container_ip when this machine routes to the container's network, else a port
};

/// Whether the container publishes the server's port, for a route. ask_engine counts as
/// published until the engine has answered.
bool publishes_port(ServerRoute route);

/// One address range of an engine's network, as inspecting the network shows it.
struct NetworkRange {
  std::string gateway;  // empty when the engine names none
  std::string subnet;
};

/// The ranges of an inspected network (its IPAM config), for telling whether this machine routes
/// to it: it does when a gateway is one of its addresses, or, with no gateway named, when one of
/// its addresses lies in the subnet.
std::vector<NetworkRange> network_ranges(const boost::json::object& network_info);

/// What start() does once it knows its engine, before the engine is asked anything.
struct StartPlan {
  bool mount_server = true;  // a read-only bind mount of rex-server, else an upload into it
  ServerRoute route = ServerRoute::published_port;
};

/// DeploymentStartupError when the settings cannot work with this engine (a unix socket a
/// remote engine cannot mount).
StartPlan plan_start(const DockerSettings& settings, bool engine_is_local,
                     const std::string& engine_endpoint);

/// The labels of a container: the config's, the owner's (gc.hpp), the deployment id and,
/// with a max_lifetime, an expiry a minute after the server's own deadline from `now`.
std::map<std::string, std::string> container_labels(const DockerDeploymentConfig& config,
                                                    const std::string& deployment_id,
                                                    const std::map<std::string, std::string>& owner,
                                                    std::int64_t now);

/// What the container-create body depends on beyond the settings.
struct BodyInputs {
  std::string server_path;   // rex-server on the host
  bool mount_server = true;  // bind-mount server_path (else it is uploaded later)
  std::string socket_dir;    // the host directory of the server's socket (unix_socket)
  bool publish_port = true;  // publish the server's port
  std::string token;         // the server's REX_AUTH_TOKEN
  std::map<std::string, std::string> labels;
};

/// The Engine API's container-create body: the server as entrypoint, the config's fields, the
/// hardened profile, then docker_args and create_options; the token and labels always win.
boost::json::object container_body(const DockerSettings& settings, const BodyInputs& inputs);

/// The server's URL in unix-socket mode.
std::string unix_socket_url(const std::string& socket_dir);

/// The container's address on `network` (or on any network when that one shows none), IPv6 in
/// brackets; empty when the inspected container has none.
std::string container_address(const boost::json::object& info, const std::string& network);

/// The server's URL at the container's own address.
std::string container_ip_url(const std::string& address);

/// The host port the engine published for the server; empty when none.
std::string published_host_port(const boost::json::object& info);

/// The server's URL at a published port, reached through docker_internal_host.
std::string published_url(const std::string& docker_internal_host, const std::string& host_port);

/// The exit code (as JSON text, "?" when not given) of an inspected container that stopped;
/// nothing while it runs. A stopped container has no address and no ports.
std::optional<std::string> stopped_exit_code(const boost::json::object& info);

/// The startup error of a container that exited before its server answered.
std::string exited_message(const std::string& name, const std::string& image,
                           const std::string& exit_code, const std::string& logs);

/// What releasing a deployment does, from what exists (after a failed start() and in stop()).
struct Cleanup {
  bool close_runtime = false;  // close its sessions (bounded) and idle connections
  bool kill_container = false;
  bool remove_container = false;  // after the kill, retried while the engine is unreachable
  bool remove_image = false;      // best effort: another container may use it
  bool remove_socket_dir = false;
};

/// The state release() starts from.
struct Resources {
  bool open_runtime = false;  // a runtime not yet closed
  bool engine = false;
  bool container = false;
  bool socket_dir = false;
};

Cleanup plan_cleanup(const DockerDeploymentConfig& config, const Resources& resources);

/// The error a failed start() throws: startup and config errors as they are, engine errors and
/// other std::exceptions as DeploymentStartupError (the latter naming the container `name`);
/// nullptr for anything else, which start() lets through unchanged.
std::exception_ptr startup_failure(std::exception_ptr error, const std::string& name);

}  // namespace rex::detail
