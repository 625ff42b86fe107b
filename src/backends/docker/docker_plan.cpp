// DockerDeployment's decisions apart from its I/O (see the header).
#include <rex/backends/docker/docker_args.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/docker/engine_error.hpp>

#include <fmt/format.h>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>

#include "backends/docker/docker_plan.hpp"
#include "backends/docker/json_fields.hpp"

namespace rex::detail {

namespace json = boost::json;

namespace {

// The hardened profile's defaults for what the config leaves unset.
constexpr std::string_view kHardenedWorkDir = "/work";
constexpr std::string_view kHardenedMemory = "4g";
constexpr std::int64_t kHardenedPids = 1024;
constexpr std::string_view kHardenedTmpSize = "1g";

// create_options are merged key by key into objects; anything else replaces what was there.
void merge_into(json::object& target, const json::object& patch) {
  for (const auto& [key, value] : patch) {
    json::value* existing = target.if_contains(key);
    if (existing && existing->is_object() && value.is_object())
      merge_into(existing->as_object(), value.as_object());
    else
      target[key] = value;
  }
}

std::string string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

bool wants_unix_socket(const std::string& network_mode) {
  return network_mode == "none" || network_mode == "host" || network_mode.starts_with("container:");
}

// The hardened profile's part of the create body, before docker_args and create_options (which
// may still loosen it: they are the caller's explicit word).
void harden(const DockerDeploymentConfig& config, json::object& b) {
  json::object& hc = host_config(b);
  hc["SecurityOpt"] = json::array{json::value("no-new-privileges")};
  hc["CapDrop"] = json::array{json::value("ALL")};
  json::array keep;
  for (const auto cap : hardened_capabilities())
    keep.emplace_back(cap);
  hc["CapAdd"] = std::move(keep);
  hc["ReadonlyRootfs"] = true;
  // exec: agents run the scripts they write; nosuid/nodev: nothing there gains privileges.
  json::object tmpfs;
  tmpfs["/tmp"] = fmt::format("rw,exec,nosuid,nodev,size={}", kHardenedTmpSize);
  tmpfs["/var/tmp"] = fmt::format("rw,exec,nosuid,nodev,size={}", kHardenedTmpSize);
  hc["Tmpfs"] = std::move(tmpfs);
  // The work dir is an anonymous volume, not a tmpfs: a new volume starts as a copy of what
  // the image holds there (a repository under test), and it is removed with the container.
  b["Volumes"] = json::object{{config.working_dir, json::object()}};
}

}  // namespace

bool is_hardened(const DockerDeploymentConfig& config) {
  return config.security_profile == "hardened";
}

DockerSettings validate(const DockerDeploymentConfig& original) {
  DockerSettings s;
  s.config = original;
  DockerDeploymentConfig& config = s.config;
  if (config.startup_timeout.count() <= 0)
    throw DeploymentConfigError("docker.startup_timeout: must be above 0");
  if (config.port && (*config.port <= 0 || *config.port > 65535))
    throw DeploymentConfigError(fmt::format("docker.port: {} is not a TCP port", *config.port));
  if (config.memory)
    (void)parse_size(*config.memory, "docker.memory");
  if (config.cpus && *config.cpus <= 0)
    throw DeploymentConfigError("docker.cpus: must be above 0");
  for (const auto& m : config.mounts) {
    if (m.find(':') == std::string::npos)
      throw DeploymentConfigError(
          fmt::format("docker.mounts: '{}': expected HOST:CONTAINER[:ro]", m));
  }
  if (config.server_transfer != "auto" && config.server_transfer != "mount" &&
      config.server_transfer != "upload")
    throw DeploymentConfigError(
        fmt::format("docker.server_transfer: expected auto, mount or upload, got '{}'",
                    config.server_transfer));
  if (config.connect != "auto" && config.connect != "port" && config.connect != "container_ip")
    throw DeploymentConfigError(fmt::format(
        "docker.connect: expected auto, port or container_ip, got '{}'", config.connect));
  if (config.container_runtime != "docker" && config.container_runtime != "podman")
    throw DeploymentConfigError(fmt::format(
        "docker.container_runtime: expected docker or podman, got '{}'", config.container_runtime));
  if (config.security_profile != "default" && config.security_profile != "hardened")
    throw DeploymentConfigError(
        fmt::format("docker.security_profile: expected default or hardened, got '{}'",
                    config.security_profile));
  const bool hardened = is_hardened(config);
  if (hardened) {
    if (config.network_mode.empty())
      config.network_mode = "none";
    if (config.working_dir.empty())
      config.working_dir = kHardenedWorkDir;
    if (!config.memory)
      config.memory = kHardenedMemory;
    if (!config.pids_limit)
      config.pids_limit = kHardenedPids;
    if (config.server_transfer == "upload")
      throw DeploymentConfigError(
          "docker.server_transfer: 'upload' cannot write into the hardened profile's read-only "
          "root; use mount (a local engine)");
  }
  // Validates docker_args (an unknown flag fails here, before anything starts) and finds the
  // network mode the container will get: create_options win over docker_args, which win over
  // the network_mode field.
  std::optional<std::string> platform;
  json::object scratch;
  if (!config.network_mode.empty())
    host_config(scratch)["NetworkMode"] = config.network_mode;
  apply_docker_args(config.docker_args, scratch, platform);
  if (platform) {
    if (config.platform && *config.platform != *platform)
      throw DeploymentConfigError(
          "docker.platform: given both as platform and as --platform in docker_args");
    config.platform = platform;
  }
  merge_into(scratch, config.create_options);
  s.network_mode = string_at(host_config(scratch), "NetworkMode");
  s.unix_socket = wants_unix_socket(s.network_mode);
  if (hardened && s.network_mode != "none")
    throw DeploymentConfigError(fmt::format(
        "docker.security_profile: the hardened profile runs without network, but the network "
        "mode is '{}' (from network_mode, docker_args or create_options)",
        s.network_mode));
  if (config.connect == "container_ip") {
    if (s.unix_socket)
      throw DeploymentConfigError(fmt::format(
          "docker.connect: container_ip needs a container network, and network mode '{}' "
          "has none of its own; use auto",
          s.network_mode));
    if (config.port)
      throw DeploymentConfigError(
          "docker.connect: container_ip publishes no port, but docker.port asks for one; "
          "use port (or auto)");
  }
  return s;
}

std::string network_name(const std::string& network_mode) {
  return network_mode.empty() || network_mode == "default" ? std::string("bridge") : network_mode;
}

bool publishes_port(ServerRoute route) {
  return route == ServerRoute::published_port || route == ServerRoute::ask_engine;
}

std::vector<NetworkRange> network_ranges(const json::object& info) {
  std::vector<NetworkRange> out;
  const json::value* ipam = info.if_contains("IPAM");
  const json::value* configs =
      ipam && ipam->is_object() ? ipam->as_object().if_contains("Config") : nullptr;
  if (!configs || !configs->is_array())
    return out;
  for (const auto& c : configs->as_array()) {
    if (c.is_object())
      out.push_back({string_at(c.as_object(), "Gateway"), string_at(c.as_object(), "Subnet")});
  }
  return out;
}

StartPlan plan_start(const DockerSettings& s, bool engine_is_local,
                     const std::string& engine_endpoint) {
  const DockerDeploymentConfig& config = s.config;
  if (s.unix_socket && !engine_is_local)
    throw DeploymentStartupError(fmt::format(
        "network mode '{}' needs the server's unix socket in a host directory, which a remote "
        "engine ({}) cannot mount; use the default network",
        s.network_mode, engine_endpoint));
  StartPlan plan;
  plan.mount_server =
      config.server_transfer == "mount" || (config.server_transfer == "auto" && engine_is_local);
  const DockerDeploymentConfig defaults;
  // A port or a host to reach it through says the caller wants the published port.
  const bool asks_for_port =
      config.port.has_value() || config.docker_internal_host != defaults.docker_internal_host;
  if (s.unix_socket)
    plan.route = ServerRoute::unix_socket;
  else if (config.connect == "container_ip")
    plan.route = ServerRoute::container_ip;
  else if (config.connect == "auto" && !asks_for_port && engine_is_local)
    plan.route = ServerRoute::ask_engine;
  else
    plan.route = ServerRoute::published_port;
  return plan;
}

std::map<std::string, std::string> container_labels(const DockerDeploymentConfig& config,
                                                    const std::string& deployment_id,
                                                    const std::map<std::string, std::string>& owner,
                                                    std::int64_t now) {
  std::map<std::string, std::string> l = config.labels;
  for (const auto& [k, v] : owner)
    l[k] = v;
  l[std::string(labels::deployment)] = deployment_id;
  if (config.max_lifetime.count() > 0)
    l[std::string(labels::expires)] = std::to_string(
        now + static_cast<std::int64_t>((config.max_lifetime + config.startup_timeout).count()) +
        60);
  return l;
}

json::object container_body(const DockerSettings& s, const BodyInputs& in) {
  const DockerDeploymentConfig& config = s.config;
  json::object b;
  b["Image"] = config.image;
  b["Entrypoint"] = json::array{json::value(kServerInContainer)};
  json::array cmd;
  if (s.unix_socket) {
    cmd.emplace_back("--unix-socket");
    cmd.emplace_back(fmt::format("{}/{}", kSocketDirInContainer, kSocketName));
  } else {
    cmd.emplace_back("--host");
    cmd.emplace_back("0.0.0.0");
    cmd.emplace_back("--port");
    cmd.emplace_back(std::to_string(kServerPort));
  }
  if (config.max_lifetime.count() > 0) {
    cmd.emplace_back("--max-lifetime");
    cmd.emplace_back(fmt::format("{}", config.max_lifetime.count()));
  }
  b["Cmd"] = std::move(cmd);
  json::array env;
  for (const auto& [k, v] : config.env)
    env.emplace_back(k + "=" + v);
  b["Env"] = std::move(env);
  if (!config.working_dir.empty())
    b["WorkingDir"] = config.working_dir;
  if (!config.user.empty())
    b["User"] = config.user;
  b["Tty"] = false;
  b["OpenStdin"] = false;
  json::object& hc = host_config(b);
  hc["Init"] = config.init;
  json::array binds;
  if (in.mount_server)
    binds.emplace_back(fmt::format("{}:{}:ro", in.server_path, kServerInContainer));
  if (s.unix_socket)
    binds.emplace_back(fmt::format("{}:{}", in.socket_dir, kSocketDirInContainer));
  for (const auto& m : config.mounts)
    binds.emplace_back(m);
  hc["Binds"] = std::move(binds);
  if (!config.network_mode.empty())
    hc["NetworkMode"] = config.network_mode;
  if (in.publish_port) {
    const std::string port_key = fmt::format("{}/tcp", kServerPort);
    b["ExposedPorts"] = json::object{{port_key, json::object()}};
    json::object binding{{"HostIp", "127.0.0.1"},
                         {"HostPort", config.port ? std::to_string(*config.port) : ""}};
    hc["PortBindings"] = json::object{{port_key, json::array{binding}}};
  }
  if (config.memory)
    hc["Memory"] = parse_size(*config.memory, "docker.memory");
  if (config.cpus)
    hc["NanoCpus"] = static_cast<std::int64_t>(*config.cpus * 1e9);
  if (config.pids_limit)
    hc["PidsLimit"] = *config.pids_limit;
  if (config.container_runtime == "podman") {
    // Podman's default nofile limit cannot be set in every environment (containers in
    // containers); an explicit one always can.
    json::object nofile{{"Name", "nofile"}, {"Soft", 20000}, {"Hard", 20000}};
    json::object nproc{{"Name", "nproc"}, {"Soft", 4096}, {"Hard", 4096}};
    hc["Ulimits"] = json::array{nofile, nproc};
  }
  if (is_hardened(config))
    harden(config, b);
  std::optional<std::string> platform;
  apply_docker_args(config.docker_args, b, platform);
  merge_into(b, config.create_options);
  // The server's token and rex's labels always win: without them the container is unusable
  // or invisible to `rex gc`.
  json::array& env_list = array_at(b, "Env");
  for (auto it = env_list.begin(); it != env_list.end();) {
    if (it->is_string() && it->as_string().starts_with("REX_AUTH_TOKEN="))
      it = env_list.erase(it);
    else
      ++it;
  }
  env_list.emplace_back("REX_AUTH_TOKEN=" + in.token);
  json::value& lv = b["Labels"];
  if (!lv.is_object())
    lv = json::object();
  for (const auto& [k, v] : in.labels)
    lv.as_object()[k] = v;
  return b;
}

std::string unix_socket_url(const std::string& socket_dir) {
  return fmt::format("http+unix://{}/{}", socket_dir, kSocketName);
}

std::string container_address(const json::object& info, const std::string& network) {
  const json::value* settings = info.if_contains("NetworkSettings");
  if (!settings || !settings->is_object())
    return {};
  auto address_of = [](const json::object& o) {
    std::string ip = string_at(o, "IPAddress");
    if (ip.empty()) {
      ip = string_at(o, "GlobalIPv6Address");
      if (!ip.empty())
        ip = "[" + ip + "]";
    }
    return ip;
  };
  const json::value* networks = settings->as_object().if_contains("Networks");
  if (networks && networks->is_object()) {
    if (const json::value* n = networks->as_object().if_contains(network); n && n->is_object()) {
      if (std::string ip = address_of(n->as_object()); !ip.empty())
        return ip;
    }
    for (const auto& entry : networks->as_object()) {
      if (!entry.value().is_object())
        continue;
      if (std::string ip = address_of(entry.value().as_object()); !ip.empty())
        return ip;
    }
  }
  return address_of(settings->as_object());
}

std::string container_ip_url(const std::string& address) {
  return fmt::format("http://{}:{}", address, kServerPort);
}

std::string published_host_port(const json::object& info) {
  std::string host_port;
  try {
    const auto& ports = info.at("NetworkSettings").at("Ports").as_object();
    const auto& bindings = ports.at(fmt::format("{}/tcp", kServerPort)).as_array();
    for (const auto& b : bindings) {
      host_port = std::string(b.at("HostPort").as_string());
      if (!host_port.empty())
        break;
    }
  } catch (const std::exception&) {
    // Missing or malformed: no port, which the caller reports.
  }
  return host_port;
}

std::string published_url(const std::string& docker_internal_host, const std::string& host_port) {
  std::string host = docker_internal_host;
  while (host.ends_with('/'))
    host.pop_back();
  return host + ":" + host_port;
}

std::optional<std::string> stopped_exit_code(const json::object& info) {
  const json::value* state = info.if_contains("State");
  if (state && state->is_object() && state->as_object().if_contains("Running") &&
      state->as_object().at("Running") == false) {
    const json::value* code = state->as_object().if_contains("ExitCode");
    return code ? json::serialize(*code) : std::string("?");
  }
  return std::nullopt;
}

std::string exited_message(const std::string& name, const std::string& image,
                           const std::string& exit_code, const std::string& logs) {
  return fmt::format(
      "container {} ({}) exited with code {} before its server answered; last log lines:\n{}", name,
      image, exit_code, logs);
}

Cleanup plan_cleanup(const DockerDeploymentConfig& config, const Resources& r) {
  Cleanup c;
  c.close_runtime = r.open_runtime;
  c.kill_container = r.engine && r.container;
  c.remove_container = c.kill_container && config.remove_container;
  c.remove_image = r.engine && config.remove_images;
  c.remove_socket_dir = r.socket_dir;
  return c;
}

std::exception_ptr startup_failure(std::exception_ptr error, const std::string& name) {
  try {
    std::rethrow_exception(error);
  } catch (const DeploymentStartupError&) {
    return std::current_exception();
  } catch (const DeploymentConfigError&) {
    return std::current_exception();
  } catch (const docker::EngineError& e) {
    return std::make_exception_ptr(DeploymentStartupError(e.what()));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(
        DeploymentStartupError(fmt::format("docker deployment {}: {}", name, e.what())));
  } catch (...) {
    return nullptr;
  }
}

}  // namespace rex::detail
