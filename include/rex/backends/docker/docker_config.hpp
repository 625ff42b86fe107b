// DockerDeploymentConfig: a container of a Docker engine or of Podman (docker_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>
#include <boost/json/array.hpp>

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

enum class PullPolicy { never, missing, always };
BOOST_DESCRIBE_ENUM(PullPolicy, never, missing, always)

/// A container started through the Docker Engine API (or Podman's compatible API), with
/// rex-server injected into it. See docker_deployment.hpp.
struct DockerDeploymentConfig {
  static constexpr std::string_view backend = "docker";
  static constexpr settings::Rule rules[] = {
      {.member = "port", .min = 1, .max = 65535},
      {.member = "container_runtime", .choices = "docker|podman"},
      {.member = "server_transfer", .choices = "auto|mount|upload"},
      {.member = "connect", .choices = "auto|port|container_ip"},
      {.member = "pids_limit", .min = -1},
      {.member = "security_profile", .choices = "default|hardened"}};

  // SWE-ReX's fields.
  std::string image = "python:3.11";
  std::optional<int> port{};  // host port on 127.0.0.1; none: the engine picks a free one
  std::vector<std::string> docker_args{};  // docker-run flags, translated (docker_args.hpp)
  Seconds startup_timeout{180.0};
  PullPolicy pull = PullPolicy::missing;
  bool remove_images = false;  // remove the image after stop (when no other container uses it)
  std::optional<std::string> platform{};  // "linux/amd64"; also taken from --platform
  bool remove_container = true;
  std::string container_runtime = "docker";  // docker | podman: picks the default engine socket
  std::string docker_internal_host = "http://127.0.0.1";  // where published ports are reached

  // rex's fields.
  std::string engine{};  // DOCKER_HOST form (unix:///..., tcp://...); empty: the environment's
  std::string network_mode{};  // "none": no network, the server on a bind-mounted unix socket
  std::optional<std::string> memory{};  // "512m", "2g" or bytes
  std::optional<double> cpus{};         // 1.5 = one and a half cores
  std::optional<std::int64_t> pids_limit{};
  std::map<std::string, std::string> env{};
  std::vector<std::string> mounts{};  // "HOST:CONTAINER[:ro]", as docker run -v
  std::map<std::string, std::string> labels{};
  std::string working_dir{};
  std::string user{};
  // Merged into the Engine API's container-create body last, objects key by key, so anything
  // the fields above do not cover can still be set.
  boost::json::object create_options{};
  std::string server_path{};  // the static rex-server to inject; empty: found automatically
  std::string server_transfer = "auto";  // auto | mount | upload (auto: mount when local)
  // How the client reaches the server: auto | port | container_ip. port: a port published on
  // 127.0.0.1 (SWE-ReX's way; works with every engine). container_ip: the container's own
  // address on its network, nothing published, so no proxy process and no firewall rules per
  // container (cheaper starts and stops); this machine must route to that network, as it does
  // to a rootful local engine's bridge. auto: container_ip when the engine is local and the
  // network's gateway is an address of this machine, unless port or docker_internal_host is
  // set; port otherwise. Network modes none and host use a unix socket whatever this says.
  std::string connect = "auto";
  Seconds max_lifetime{86400.0};  // rex-server exits after this many seconds; 0: never
  // Docker's init (docker-init) as PID 1. Without it rex-server is PID 1 and stays behind as
  // the init that reaps orphaned processes and passes signals on, and nothing in the container
  // keeps the server's token in its environment (docker-init keeps it in /proc/1/environ).
  bool init = false;
  std::string container_name{};  // empty: rex-<deployment id>
  // "default", or "hardened": no new privileges, every capability dropped but
  // hardened_capabilities(), a read-only root (tmpfs /tmp and /var/tmp, the work dir a volume),
  // memory and pids limits unless set, and no network (the server on a unix socket).
  std::string security_profile = "default";
};
BOOST_DESCRIBE_STRUCT(DockerDeploymentConfig, (),
                      (image, port, docker_args, startup_timeout, pull, remove_images, platform,
                       remove_container, container_runtime, docker_internal_host, engine,
                       network_mode, memory, cpus, pids_limit, env, mounts, labels, working_dir,
                       user, create_options, server_path, server_transfer, connect, max_lifetime,
                       init, container_name, security_profile))

/// The capabilities a hardened container keeps: what root inside a sandbox needs to own, chmod
/// and chown its files, switch to another user and signal its own processes.
/// CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID.
std::span<const std::string_view> hardened_capabilities() noexcept;

std::string_view to_string(PullPolicy policy) noexcept;

}  // namespace rex
