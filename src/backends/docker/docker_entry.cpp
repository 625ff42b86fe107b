// The docker backend's entry in the backend table (and its alias podman).
#include <rex/backends/docker/docker_args.hpp>
#include <rex/backends/docker/docker_config.hpp>
#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/backends/docker/docker_gc.hpp>
#include <rex/deployment/registry.hpp>
#include <rex/deployment/sizes.hpp>
#include <rex/docker/engine.hpp>

#include <boost/json/object.hpp>

namespace rex::modules {

namespace {

namespace json = boost::json;

constexpr BackendFlag flags[] = {
    common_flags::image,
    {"--port", "port", "the host port to publish the server on", FlagKind::integer},
    {"--pull", "pull", "never, missing or always"},
    {"--docker-arg", "docker_args",
     "a docker-run flag (repeat for more, e.g. --docker-arg=--memory=1g)", FlagKind::list},
    common_flags::startup_timeout,
    common_flags::workdir,
    common_flags::env,
    {"--keep", "remove_container", "keep the container after exit", FlagKind::off},
    {"--engine", "engine",
     "the engine, as DOCKER_HOST (unix:///PATH, tcp://HOST:PORT); default: DOCKER_HOST or the "
     "runtime's socket"},
};

constexpr BackendAlias aliases[] = {
    {"podman", "docker", "container_runtime", "podman", "a container of Podman (its Docker API)"},
};

void check(DockerDeploymentConfig& c, settings::Reader& r) {
  std::optional<std::string> ignored;
  r.optional_string("python_standalone_dir", ignored);  // rex needs no Python in the image
  std::vector<std::string> ignored_list;
  r.strings("exec_shell", ignored_list);  // rex runs no shell command to start its server
  if (c.image.empty() && !r.defaults())
    r.fail("image", "must not be empty");
  if (c.memory)
    (void)parse_size(*c.memory, "docker.memory");
  // SWE-ReX moves --platform out of docker_args into platform, and refuses both at once.
  std::optional<std::string> from_args;
  json::object scratch;
  apply_docker_args(c.docker_args, scratch, from_args);
  if (from_args) {
    if (c.platform && *c.platform != *from_args)
      r.fail("platform", "given both as platform and as --platform in docker_args");
    c.platform = from_args;
  }
}

std::string describe(const DeploymentConfig& config) {
  const auto& c = config.get<DockerDeploymentConfig>();
  return (c.container_runtime == "podman" ? "podman " : "docker ") + c.image;
}

// `rex gc` on the engine the settings point at.
asio::awaitable<GcReport> gc(asio::any_io_executor executor, DeploymentConfig config,
                             GcOptions options) {
  const auto& c = config.get<DockerDeploymentConfig>();
  auto where = docker::engine_config_from_environment(c.container_runtime);
  if (!c.engine.empty())
    where.host = c.engine;
  docker::Engine engine(executor, where);
  co_return co_await collect_garbage(engine, options);
}

}  // namespace

Backend docker_entry() {
  Backend b = make_backend<DockerDeploymentConfig, DockerDeployment, check>(
      "a container of a Docker engine", flags);
  b.aliases = aliases;
  b.title = "Docker";
  // A gateway's sessions work in /workspace unless their environment says otherwise.
  b.provider_defaults = R"({"startup_timeout": 120, "working_dir": "/workspace"})";
  b.describe = describe;
  b.gc = gc;
  b.open = entry::open<DockerDeploymentConfig, open_docker_backend>;
  return b;
}

}  // namespace rex::modules

namespace rex {

std::span<const std::string_view> hardened_capabilities() noexcept {
  static constexpr std::string_view caps[] = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID",
                                              "KILL",  "SETGID",       "SETUID"};
  return caps;
}

std::string_view to_string(PullPolicy policy) noexcept {
  switch (policy) {
    case PullPolicy::never:
      return "never";
    case PullPolicy::missing:
      return "missing";
    case PullPolicy::always:
      return "always";
  }
  return "missing";
}

}  // namespace rex
