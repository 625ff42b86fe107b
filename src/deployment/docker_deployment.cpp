// DockerDeployment: image, container, injected server, readiness, teardown (see the header).
#include <rex/deployment/docker_args.hpp>
#include <rex/deployment/docker_deployment.hpp>
#include <rex/deployment/docker_gc.hpp>
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string_view>

#include "core/offload.hpp"
#include "deployment/local_addresses.hpp"
#include "json_fields.hpp"

#ifndef REX_SERVER_BUILD_PATH
#define REX_SERVER_BUILD_PATH ""
#endif

namespace rex {

namespace json = boost::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using detail::array_at;
using detail::host_config;

namespace {

// Where the server lives inside every container, and where its socket goes in network-less mode.
constexpr std::string_view kServerInContainer = "/.rex/rex-server";
constexpr std::string_view kSocketDirInContainer = "/.rex-run";
constexpr std::string_view kSocketName = "rex.sock";
constexpr int kServerPort = 8000;
// How long stop() keeps trying to remove its container while the engine cannot be reached.
constexpr std::chrono::seconds kUnreachableEngineGrace{30};
// The hardened profile's defaults for what the config leaves unset.
constexpr std::string_view kHardenedWorkDir = "/work";
constexpr std::string_view kHardenedMemory = "4g";
constexpr std::int64_t kHardenedPids = 1024;
constexpr std::string_view kHardenedTmpSize = "1g";

std::string random_hex(std::size_t bytes) {
  std::random_device rd;
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i)
    out += fmt::format("{:02x}", rd() & 0xff);
  return out;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// A tar archive of one executable at `name` (with its directory), for PUT .../archive. Plain
// ustar: the engine extracts it without any option.
void write_single_file_tar(const std::string& source, const std::string& name,
                           const std::string& tar_path) {
  std::ifstream in(source, std::ios::binary);
  if (!in)
    throw DeploymentStartupError("cannot read rex-server at '" + source + "'");
  const auto size = fs::file_size(source);
  std::ofstream out(tar_path, std::ios::binary | std::ios::trunc);
  auto header = [&](const std::string& entry, char type, std::uint64_t bytes) {
    std::array<char, 512> h{};
    std::memcpy(h.data(), entry.data(), std::min<std::size_t>(entry.size(), 99));
    std::snprintf(h.data() + 100, 8, "%07o", 0755);
    std::snprintf(h.data() + 108, 8, "%07o", 0);
    std::snprintf(h.data() + 116, 8, "%07o", 0);
    std::snprintf(h.data() + 124, 12, "%011llo", static_cast<unsigned long long>(bytes));
    std::snprintf(h.data() + 136, 12, "%011llo", static_cast<unsigned long long>(unix_now()));
    std::memset(h.data() + 148, ' ', 8);
    h[156] = type;
    std::memcpy(h.data() + 257, "ustar", 6);
    std::memcpy(h.data() + 263, "00", 2);
    unsigned sum = 0;
    for (char c : h)
      sum += static_cast<unsigned char>(c);
    std::snprintf(h.data() + 148, 8, "%06o", sum);
    h[155] = ' ';
    out.write(h.data(), h.size());
  };
  const auto slash = name.rfind('/');
  if (slash != std::string::npos)
    header(name.substr(0, slash + 1), '5', 0);
  header(name, '0', size);
  out << in.rdbuf();
  const std::array<char, 1024> zeros{};
  out.write(zeros.data(), static_cast<std::streamsize>((512 - size % 512) % 512));
  out.write(zeros.data(), 1024);
  if (!out)
    throw DeploymentStartupError("cannot write the server archive '" + tar_path + "'");
}

// Best-effort removal of a container whose deployment was destroyed without stop().
asio::awaitable<void> remove_in_background(std::shared_ptr<docker::Engine> engine,
                                           std::string container, bool remove) {
  try {
    co_await engine->kill_container(container, "KILL");
    if (remove)
      co_await engine->remove_container(container, true);
  } catch (const std::exception&) {
    // `rex gc` finds it by its labels.
  }
}

// Completes when the container stops, with its exit code. A lost watch connection never ends
// the wait: the readiness poll and the deadline still decide.
asio::awaitable<std::int64_t> watch_exit(docker::Engine& engine, std::string container) {
  try {
    co_return co_await engine.wait_container(std::move(container));
  } catch (const docker::EngineError&) {
  } catch (const http::ConnectionError&) {
  }
  asio::steady_timer forever(co_await asio::this_coro::executor, Clock::duration::max());
  co_await forever.async_wait(asio::use_awaitable);
  co_return -1;
}

// Whether this machine routes to the containers of an engine's network: it does when the
// network's gateway is one of its own addresses (a bridge of a rootful engine here), or, when
// the engine names no gateway (Docker's default bridge after some daemon starts), when one of
// its addresses lies in the network's subnet; it does not when the network lives in a VM or
// another network namespace (Docker Desktop, rootless engines). Answers are kept per engine and
// network for the life of the process; a failed lookup is not kept and counts as "no".
asio::awaitable<bool> network_is_routable(docker::Engine& engine, std::string network) {
  static std::mutex mutex;
  static std::map<std::string, bool> known;
  const std::string key = engine.endpoint() + "\n" + network;
  {
    std::lock_guard lock(mutex);
    if (auto it = known.find(key); it != known.end())
      co_return it->second;
  }
  std::optional<json::object> info;
  try {
    info = co_await engine.inspect_network(network);
  } catch (const std::exception&) {
    co_return false;
  }
  bool routable = false;
  if (info) {
    const json::value* ipam = info->if_contains("IPAM");
    const json::value* configs =
        ipam && ipam->is_object() ? ipam->as_object().if_contains("Config") : nullptr;
    if (configs && configs->is_array()) {
      for (const auto& c : configs->as_array()) {
        if (!c.is_object())
          continue;
        const std::string gateway = string_at(c.as_object(), "Gateway");
        if (gateway.empty() ? detail::has_local_address_in(string_at(c.as_object(), "Subnet"))
                            : detail::is_local_address(gateway)) {
          routable = true;
          break;
        }
      }
    }
  }
  std::lock_guard lock(mutex);
  known[key] = routable;
  co_return routable;
}

// The container's address on `network` (or on any network when that one shows none).
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

}  // namespace

std::string find_rex_server(const std::string& configured) {
  std::vector<std::string> tried;
  auto consider = [&](const std::string& path, std::string_view source) -> bool {
    if (path.empty())
      return false;
    tried.push_back(fmt::format("{} ({})", path, source));
    return is_executable_file(path);
  };
  if (!configured.empty()) {
    if (consider(configured, "server_path"))
      return configured;
    throw DeploymentStartupError(
        fmt::format("server_path '{}' is not an executable file; build rex-server or fix the path",
                    configured));
  }
  if (const char* env = std::getenv("REX_SERVER_PATH"); env && consider(env, "REX_SERVER_PATH"))
    return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string beside = (self.parent_path() / "rex-server").string();
    if (consider(beside, "beside this program"))
      return beside;
  }
  if (consider(REX_SERVER_BUILD_PATH, "build directory"))
    return REX_SERVER_BUILD_PATH;
  std::string list;
  for (const auto& t : tried)
    list += "\n  " + t;
  throw DeploymentStartupError(
      "cannot find the rex-server executable to put into the container; tried:" + list +
      "\nset server_path in the deployment config or REX_SERVER_PATH");
}

struct DockerDeployment::Impl {
  asio::any_io_executor executor;
  DockerDeploymentConfig config;
  std::string id = random_hex(6);
  std::string token = random_hex(16);
  std::string name;
  std::string network_mode;
  bool unix_socket = false;
  std::shared_ptr<docker::Engine> engine;
  std::string container;
  std::string url;
  std::string socket_dir;  // host side, network-less mode
  std::string server_host_path;
  bool mount_server = true;
  bool publish_port = true;  // else the server is reached at the container's address
  std::unique_ptr<RemoteRuntime> runtime;
  bool runtime_closed = false;
  bool started = false;
  bool stopped = false;
  std::function<void(const DeploymentEvent&)> hooks;  // the owner's emit()

  Impl(asio::any_io_executor ex, DockerDeploymentConfig c)
      : executor(std::move(ex)), config(std::move(c)) {
    name = config.container_name.empty() ? "rex-" + id : config.container_name;
    if (config.startup_timeout <= 0)
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
      throw DeploymentConfigError(
          fmt::format("docker.container_runtime: expected docker or podman, got '{}'",
                      config.container_runtime));
    if (config.security_profile != "default" && config.security_profile != "hardened")
      throw DeploymentConfigError(
          fmt::format("docker.security_profile: expected default or hardened, got '{}'",
                      config.security_profile));
    if (hardened()) {
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
    network_mode = string_at(host_config(scratch), "NetworkMode");
    unix_socket = wants_unix_socket(network_mode);
    if (hardened() && network_mode != "none")
      throw DeploymentConfigError(fmt::format(
          "docker.security_profile: the hardened profile runs without network, but the network "
          "mode is '{}' (from network_mode, docker_args or create_options)",
          network_mode));
    if (config.connect == "container_ip") {
      if (unix_socket)
        throw DeploymentConfigError(fmt::format(
            "docker.connect: container_ip needs a container network, and network mode '{}' "
            "has none of its own; use auto",
            network_mode));
      if (config.port)
        throw DeploymentConfigError(
            "docker.connect: container_ip publishes no port, but docker.port asks for one; "
            "use port (or auto)");
    }
    publish_port = !unix_socket && config.connect != "container_ip";
  }

  // Decides, before the container is made, whether its server's port is published.
  asio::awaitable<void> choose_connection() {
    if (unix_socket || config.connect != "auto") {
      co_return;
    }
    const DockerDeploymentConfig defaults;
    const bool asks_for_port =
        config.port.has_value() || config.docker_internal_host != defaults.docker_internal_host;
    if (asks_for_port || !engine->is_local())
      co_return;
    publish_port = !(co_await network_is_routable(*engine, network_name()));
  }

  // The network the container joins. Docker's default is "bridge"; Podman's compatible API
  // answers to that name too.
  std::string network_name() const {
    return network_mode.empty() || network_mode == "default" ? std::string("bridge") : network_mode;
  }

  bool hardened() const { return config.security_profile == "hardened"; }

  // The hardened profile's part of the create body, before docker_args and create_options (which
  // may still loosen it: they are the caller's explicit word).
  void harden(json::object& b) const {
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

  void emit(DeploymentStage stage, std::string message) const;
  void emit(const DeploymentEvent& event) const;

  std::map<std::string, std::string> container_labels() const {
    std::map<std::string, std::string> l = config.labels;
    for (auto& [k, v] : owner_labels())
      l[k] = v;
    l[std::string(labels::deployment)] = id;
    if (config.max_lifetime > 0)
      l[std::string(labels::expires)] = std::to_string(
          unix_now() + static_cast<std::int64_t>(config.max_lifetime + config.startup_timeout) +
          60);
    return l;
  }

  json::object body(const std::string& server_path, bool mount, const std::string& sock_dir) const {
    json::object b;
    b["Image"] = config.image;
    b["Entrypoint"] = json::array{json::value(kServerInContainer)};
    json::array cmd;
    if (unix_socket) {
      cmd.emplace_back("--unix-socket");
      cmd.emplace_back(fmt::format("{}/{}", kSocketDirInContainer, kSocketName));
    } else {
      cmd.emplace_back("--host");
      cmd.emplace_back("0.0.0.0");
      cmd.emplace_back("--port");
      cmd.emplace_back(std::to_string(kServerPort));
    }
    if (config.max_lifetime > 0) {
      cmd.emplace_back("--max-lifetime");
      cmd.emplace_back(fmt::format("{}", config.max_lifetime));
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
    if (mount)
      binds.emplace_back(fmt::format("{}:{}:ro", server_path, kServerInContainer));
    if (unix_socket)
      binds.emplace_back(fmt::format("{}:{}", sock_dir, kSocketDirInContainer));
    for (const auto& m : config.mounts)
      binds.emplace_back(m);
    hc["Binds"] = std::move(binds);
    if (!config.network_mode.empty())
      hc["NetworkMode"] = config.network_mode;
    if (publish_port) {
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
    if (hardened())
      harden(b);
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
    env_list.emplace_back("REX_AUTH_TOKEN=" + token);
    json::value& lv = b["Labels"];
    if (!lv.is_object())
      lv = json::object();
    for (const auto& [k, v] : container_labels())
      lv.as_object()[k] = v;
    return b;
  }

  // A container that already stopped has no address and no ports: say that it stopped.
  void throw_if_exited(const json::object& info, const std::string& logs) const {
    const json::value* state = info.if_contains("State");
    if (state && state->is_object() && state->as_object().if_contains("Running") &&
        state->as_object().at("Running") == false) {
      const json::value* code = state->as_object().if_contains("ExitCode");
      throw DeploymentStartupError(fmt::format(
          "container {} ({}) exited with code {} before its server answered; last log lines:\n{}",
          name, config.image, code ? json::serialize(*code) : std::string("?"), logs));
    }
  }

  asio::awaitable<void> ensure_image();
  asio::awaitable<void> start();
  asio::awaitable<void> wait_ready(Clock::time_point deadline);
  asio::awaitable<void> poll_alive(http::Client& poll, std::string& last);
  asio::awaitable<std::string> log_tail();
  asio::awaitable<void> release();
  asio::awaitable<void> remove_container_patiently();
};

void DockerDeployment::Impl::emit(DeploymentStage stage, std::string message) const {
  DeploymentEvent e;
  e.stage = stage;
  e.message = std::move(message);
  emit(e);
}

void DockerDeployment::Impl::emit(const DeploymentEvent& event) const {
  if (hooks)
    hooks(event);
}

asio::awaitable<void> DockerDeployment::Impl::ensure_image() {
  const std::string& image = config.image;
  bool present = false;
  if (config.pull != PullPolicy::always) {
    auto found = co_await engine->inspect_image(image);
    present = found.has_value();
    if (!present && config.pull == PullPolicy::never)
      throw DeploymentStartupError(
          fmt::format("image '{}' is not present at {} and pull is 'never': build or load it first "
                      "(docker build / docker import / docker load), or set pull to 'missing'",
                      image, engine->endpoint()));
  }
  if (present)
    co_return;
  emit(DeploymentStage::pulling, fmt::format("pulling {}", image));
  auto on_progress = [this, &image](const docker::PullProgress& p) {
    DeploymentEvent e;
    e.stage = DeploymentStage::pulling;
    e.bytes_done = p.bytes_done;
    e.bytes_total = p.bytes_total;
    e.percent = p.percent;
    e.message = p.percent >= 0 ? fmt::format("pulling {}: {} {:.0f}%", image, p.status, p.percent)
                               : fmt::format("pulling {}: {}", image, p.status);
    emit(e);
  };
  try {
    co_await engine->pull_image(image, config.platform.value_or(""), std::move(on_progress));
  } catch (const docker::EngineError& e) {
    throw DeploymentStartupError(fmt::format("cannot pull image '{}' (pull policy '{}'): {}", image,
                                             to_string(config.pull), e.what()));
  }
}

asio::awaitable<std::string> DockerDeployment::Impl::log_tail() {
  if (container.empty() || !engine)
    co_return std::string();
  try {
    co_return co_await engine->container_logs(container, 30);
  } catch (const std::exception& e) {
    co_return fmt::format("(its logs could not be read: {})", e.what());
  }
}

asio::awaitable<void> DockerDeployment::Impl::poll_alive(http::Client& poll, std::string& last) {
  auto delay = std::chrono::milliseconds(2);
  asio::steady_timer pause(executor);
  for (;;) {
    http::ClientRequest request;
    request.target = "/is_alive";
    request.headers.emplace_back("X-API-Key", token);
    try {
      auto response = co_await poll.request(std::move(request));
      if (response.status == 200)
        co_return;
      last = fmt::format("HTTP {}: {}", response.status, response.body);
    } catch (const std::exception& e) {
      last = e.what();
    }
    pause.expires_after(delay);
    co_await pause.async_wait(asio::use_awaitable);
    delay = std::min(delay * 2, std::chrono::milliseconds(50));
  }
}

asio::awaitable<void> DockerDeployment::Impl::wait_ready(Clock::time_point deadline) {
  using namespace asio::experimental::awaitable_operators;
  // A client of its own without retries: while the server starts, every refused connection
  // should be noticed at once and the next poll follow quickly.
  http::ClientConfig poll_config;
  poll_config.retry.max_retries = 0;
  poll_config.timeout = std::chrono::seconds(2);
  http::Client poll(executor, url, poll_config);
  std::string last = "no answer yet";
  asio::steady_timer timeout(executor, deadline);
  auto alive = poll_alive(poll, last);
  auto exited = watch_exit(*engine, container);
  auto expired = timeout.async_wait(asio::use_awaitable);
  const auto winner = co_await (std::move(alive) || std::move(exited) || std::move(expired));
  if (winner.index() == 0)
    co_return;
  std::string logs = co_await log_tail();
  if (winner.index() == 1)
    throw DeploymentStartupError(fmt::format(
        "container {} ({}) exited with code {} before its server answered; last log lines:\n{}",
        name, config.image, std::get<1>(winner), logs));
  throw DeploymentStartupError(fmt::format(
      "container {} ({}): its server did not answer within startup_timeout {} s (last check: "
      "{}); last log lines:\n{}",
      name, config.image, config.startup_timeout, last, logs));
}

asio::awaitable<void> DockerDeployment::Impl::start() {
  const auto t0 = Clock::now();
  const auto deadline =
      t0 + std::chrono::milliseconds(static_cast<std::int64_t>(config.startup_timeout * 1000));
  docker::EngineConfig engine_config =
      docker::engine_config_from_environment(config.container_runtime);
  if (!config.engine.empty())
    engine_config.host = config.engine;
  engine = std::make_shared<docker::Engine>(executor, engine_config);

  server_host_path = find_rex_server(config.server_path);
  mount_server =
      config.server_transfer == "mount" || (config.server_transfer == "auto" && engine->is_local());
  if (unix_socket && !engine->is_local())
    throw DeploymentStartupError(fmt::format(
        "network mode '{}' needs the server's unix socket in a host directory, which a remote "
        "engine ({}) cannot mount; use the default network",
        network_mode, engine->endpoint()));

  co_await ensure_image();
  co_await choose_connection();

  if (unix_socket) {
    std::string pattern = (fs::temp_directory_path() / "rex-sock-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw DeploymentStartupError(
          fmt::format("cannot create a socket directory: {}", std::strerror(errno)));
    socket_dir = pattern;
    // A container user other than root must be able to create the socket.
    if (!config.user.empty())
      ::chmod(socket_dir.c_str(), 0777);
  }

  emit(DeploymentStage::creating, fmt::format("creating container {} from {}", name, config.image));
  json::object create = body(server_host_path, mount_server, socket_dir);
  try {
    container =
        co_await engine->create_container(std::move(create), name, config.platform.value_or(""));
  } catch (const docker::EngineError& e) {
    throw DeploymentStartupError(
        fmt::format("cannot create container {} from {}: {}", name, config.image, e.what()));
  }

  if (!mount_server) {
    asio::thread_pool files(1);
    const std::string tar = (fs::temp_directory_path() / ("rex-server-" + id + ".tar")).string();
    const std::string source = server_host_path;
    auto build = [source, tar] {
      write_single_file_tar(source, std::string(kServerInContainer.substr(1)), tar);
    };
    auto caller = executor;
    co_await detail::offload(files, caller, std::move(build));
    std::exception_ptr failure;
    try {
      co_await engine->put_archive(container, "/", tar);
    } catch (...) {
      failure = std::current_exception();
    }
    std::error_code ec;
    fs::remove(tar, ec);
    files.join();
    if (failure)
      std::rethrow_exception(failure);
  }

  emit(DeploymentStage::starting, fmt::format("starting container {}", name));
  std::string start_error;
  try {
    co_await engine->start_container(container);
  } catch (const docker::EngineError& e) {
    start_error = e.what();
  }
  if (!start_error.empty()) {
    std::string logs = co_await log_tail();
    throw DeploymentStartupError(fmt::format("cannot start container {} ({}): {}{}{}", name,
                                             config.image, start_error,
                                             logs.empty() ? "" : "; last log lines:\n", logs));
  }

  if (unix_socket) {
    url = fmt::format("http+unix://{}/{}", socket_dir, kSocketName);
  } else if (!publish_port) {
    auto info = co_await engine->inspect_container(container);
    const std::string address = container_address(info, network_name());
    if (address.empty()) {
      std::string logs = co_await log_tail();
      throw_if_exited(info, logs);
      throw DeploymentStartupError(fmt::format(
          "container {}: the engine gave it no address to reach its server at (network mode "
          "'{}'); set connect to port; last log lines:\n{}",
          name, network_mode.empty() ? "default" : network_mode, logs));
    }
    url = fmt::format("http://{}:{}", address, kServerPort);
  } else {
    auto info = co_await engine->inspect_container(container);
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
    }
    if (host_port.empty()) {
      std::string logs = co_await log_tail();
      throw_if_exited(info, logs);
      throw DeploymentStartupError(fmt::format(
          "container {}: the engine published no host port for the server (network mode '{}'); "
          "last log lines:\n{}",
          name, network_mode.empty() ? "default" : network_mode, logs));
    }
    std::string host = config.docker_internal_host;
    while (host.ends_with('/'))
      host.pop_back();
    url = host + ":" + host_port;
  }

  emit(DeploymentStage::waiting, fmt::format("waiting for the server at {}", url));
  co_await wait_ready(deadline);

  RemoteRuntimeConfig rc;
  rc.url = url;
  rc.auth_token = token;
  runtime = std::make_unique<RemoteRuntime>(executor, std::move(rc));
  started = true;
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  emit(DeploymentStage::ready, fmt::format("container {} ready at {} in {:.0f} ms", name, url, ms));
}

// An engine that cannot be reached may be restarting (a daemon upgrade, a crash): the removal is
// retried for a while, so a stop during the gap still removes the container. A refusal is final
// and leaves the container to `rex gc`.
asio::awaitable<void> DockerDeployment::Impl::remove_container_patiently() {
  const auto give_up = Clock::now() + kUnreachableEngineGrace;
  auto delay = std::chrono::milliseconds(250);
  while (true) {
    unsigned status = 1;
    try {
      co_await engine->remove_container(container, true);
      container.clear();
      co_return;
    } catch (const docker::EngineError& e) {
      status = e.status();
    } catch (const std::exception&) {
    }
    if (status == 404) {  // already gone
      container.clear();
      co_return;
    }
    if (status != 0 || Clock::now() + delay > give_up)
      co_return;
    asio::steady_timer pause(executor, delay);
    co_await pause.async_wait(asio::use_awaitable);
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
}

asio::awaitable<void> DockerDeployment::Impl::release() {
  if (runtime && !runtime_closed) {
    runtime_closed = true;
    // Closing the sessions is a courtesy before the kill; a hung server must not hold it up.
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer limit(executor, std::chrono::seconds(3));
    try {
      auto closing = runtime->close();
      auto expired = limit.async_wait(asio::use_awaitable);
      co_await (std::move(closing) || std::move(expired));
    } catch (const std::exception&) {
    }
    // The runtime object stays until the deployment is destroyed: calls still in flight fail
    // on the killed container instead of resuming on a freed object. Its idle connections
    // close now, while the server answers: closed after the kill, they would send packets to
    // an address that is gone, and the kernel would mark it unreachable for the next
    // container that gets it (a connect to it then stalls for about a second).
    runtime->close_idle_connections();
  }
  if (engine && !container.empty()) {
    try {
      co_await engine->kill_container(container, "KILL");
    } catch (const std::exception&) {
    }
    if (config.remove_container)
      co_await remove_container_patiently();
  }
  if (engine && config.remove_images) {
    try {
      co_await engine->remove_image(config.image, false);
    } catch (const std::exception&) {
      // Still used by another container.
    }
  }
  if (!socket_dir.empty()) {
    std::error_code ec;
    fs::remove_all(socket_dir, ec);
    socket_dir.clear();
  }
}

DockerDeployment::DockerDeployment(asio::any_io_executor executor, DockerDeploymentConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(config))) {
  impl_->hooks = [this](const DeploymentEvent& e) { emit(e); };
}

DockerDeployment::~DockerDeployment() {
  if (impl_->engine && !impl_->container.empty() && !impl_->stopped) {
    asio::co_spawn(
        impl_->executor,
        remove_in_background(impl_->engine, impl_->container, impl_->config.remove_container),
        asio::detached);
  }
  if (!impl_->socket_dir.empty()) {
    std::error_code ec;
    fs::remove_all(impl_->socket_dir, ec);
  }
}

asio::awaitable<void> DockerDeployment::start() {
  if (impl_->stopped)
    throw DeploymentStartupError("docker deployment: cannot start again after stop()");
  if (impl_->started)
    co_return;
  std::exception_ptr failure;
  try {
    co_await impl_->start();
  } catch (const DeploymentStartupError&) {
    failure = std::current_exception();
  } catch (const DeploymentConfigError&) {
    failure = std::current_exception();
  } catch (const docker::EngineError& e) {
    failure = std::make_exception_ptr(DeploymentStartupError(e.what()));
  } catch (const std::exception& e) {
    failure = std::make_exception_ptr(
        DeploymentStartupError(fmt::format("docker deployment {}: {}", impl_->name, e.what())));
  }
  if (failure) {
    co_await impl_->release();
    impl_->engine.reset();
    std::rethrow_exception(failure);
  }
}

asio::awaitable<void> DockerDeployment::stop() {
  if (impl_->stopped)
    co_return;
  impl_->stopped = true;
  if (!impl_->engine)
    co_return;
  impl_->emit(DeploymentStage::stopping, fmt::format("stopping container {}", impl_->name));
  impl_->started = false;
  co_await impl_->release();
  impl_->emit(DeploymentStage::stopped, fmt::format("container {} stopped", impl_->name));
}

Runtime& DockerDeployment::runtime() {
  if (!impl_->started)
    throw DeploymentNotStartedError(impl_->stopped ? "docker deployment: stopped"
                                                   : "docker deployment: not started");
  return *impl_->runtime;
}

bool DockerDeployment::started() const noexcept {
  return impl_->started;
}
const DockerDeploymentConfig& DockerDeployment::config() const noexcept {
  return impl_->config;
}
const std::string& DockerDeployment::deployment_id() const noexcept {
  return impl_->id;
}
const std::string& DockerDeployment::container_id() const noexcept {
  return impl_->container;
}
const std::string& DockerDeployment::url() const noexcept {
  return impl_->url;
}
docker::Engine* DockerDeployment::engine() noexcept {
  return impl_->engine.get();
}

json::object DockerDeployment::create_body() const {
  std::string server =
      impl_->server_host_path.empty() ? std::string("<rex-server>") : impl_->server_host_path;
  std::string sock = impl_->socket_dir.empty() ? std::string("<socket dir>") : impl_->socket_dir;
  return impl_->body(server, impl_->engine ? impl_->mount_server : true, sock);
}

}  // namespace rex
