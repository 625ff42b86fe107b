// DockerDeployment: image, container, injected server, readiness, teardown (see the header). The
// decisions are docker_plan.hpp's; what is here performs the engine calls in order.
#include <rex/backends/docker/docker_deployment.hpp>

#include <rex/backends/docker/docker_gc.hpp>
#include <rex/core/backoff.hpp>
#include <rex/core/object_fields.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/timeout.hpp>
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>

#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>

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
#include <vector>

#include "backends/docker/docker_calls.hpp"
#include "backends/docker/docker_plan.hpp"
#include "core/clock.hpp"
#include "core/crash_point.hpp"
#include "core/offload.hpp"
#include "deployment/hand_over.hpp"
#include "deployment/local_addresses.hpp"

#ifndef REX_SERVER_BUILD_PATH
#define REX_SERVER_BUILD_PATH ""
#endif

namespace rex {

namespace json = boost::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// How long stop() keeps trying to remove its container while the engine cannot be reached.
constexpr std::chrono::seconds kUnreachableEngineGrace{30};

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
    std::snprintf(h.data() + 136, 12, "%011llo",
                  static_cast<unsigned long long>(rex::detail::unix_seconds()));
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

// A socket directory a start made for a network-less container (temp/rex-sock-XXXXXX), found
// among the container's mounts.
std::string socket_dir_of(const json::object& info) {
  const auto* mounts = info.if_contains("Mounts");
  if (mounts == nullptr || !mounts->is_array())
    return {};
  const fs::path temp = fs::temp_directory_path();
  for (const auto& m : mounts->get_array()) {
    const auto* source = m.is_object() ? m.get_object().if_contains("Source") : nullptr;
    if (source == nullptr || !source->is_string())
      continue;
    const fs::path dir(std::string(source->get_string()));
    if (dir.parent_path() == temp && dir.filename().string().starts_with("rex-sock-"))
      return dir.string();
  }
  return {};
}

// An engine call that failed because the engine is out of reach (0) or still recovering from a
// restart (409 "removal in progress", 5xx): worth trying again.
bool transient_engine_failure(unsigned status) {
  return status == 0 || status == 409 || status >= 500;
}

// Runs the engine call `call` until it succeeds, a failure is final, or kUnreachableEngineGrace
// has passed. An engine that cannot be reached may be restarting (a daemon upgrade, a crash): a
// removal during the gap still removes the container once it is back.
template <class Call>
auto patiently(Call call) -> decltype(call()) {
  // 250 ms doubling to 2 s, without jitter: one caller waits for one engine.
  const Backoff backoff{std::chrono::milliseconds(250), std::chrono::seconds(2), 2.0, 0.0};
  const auto give_up = Clock::now() + kUnreachableEngineGrace;
  for (unsigned retry = 1;; ++retry) {
    const auto delay =
        std::chrono::duration_cast<Clock::duration>(backoff_delay(backoff, retry, 0));
    try {
      co_return co_await call();
    } catch (const docker::EngineError& e) {
      if (!transient_engine_failure(e.status()) || Clock::now() + delay > give_up)
        throw;
    }
    asio::steady_timer pause(co_await asio::this_coro::executor, delay);
    co_await pause.async_wait(asio::use_awaitable);
  }
}

// Removes the container `id` (killing it), patiently. A refusal is final and leaves the container
// to `rex gc`. Returns why the container is still there, or nothing when it is gone.
asio::awaitable<std::optional<std::string>> remove_patiently(docker::Engine& engine,
                                                             std::string id) {
  try {
    co_await patiently([&] { return engine.remove_container(id, true); });
  } catch (const docker::EngineError& e) {
    if (e.status() == 404)  // already gone
      co_return std::nullopt;
    co_return std::string(e.what());
  } catch (const std::exception& e) {
    co_return std::string(e.what());
  }
  co_return std::nullopt;
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
    for (const auto& range : detail::network_ranges(*info)) {
      if (range.gateway.empty() ? detail::has_local_address_in(range.subnet)
                                : detail::is_local_address(range.gateway)) {
        routable = true;
        break;
      }
    }
  }
  std::lock_guard lock(mutex);
  known[key] = routable;
  co_return routable;
}

struct ContainerStart {
  asio::any_io_executor executor;
  detail::DockerSettings settings;
  const DockerDeploymentConfig& config = settings.config;
  std::string id;  // the deployment's, in the container's name and labels
  std::string token = random_hex(16);
  std::string name;
  std::shared_ptr<docker::Engine> engine;
  std::string container;
  std::string url;
  std::string socket_dir;  // host side, network-less mode
  std::string server_host_path;
  bool mount_server = true;
  bool publish_port = true;  // else the server is reached at the container's address
  std::unique_ptr<RemoteRuntime> runtime;
  SandboxProgress report;  // told each stage of the start

  ContainerStart(asio::any_io_executor ex, const DockerDeploymentConfig& c, std::string deployment)
      : executor(std::move(ex)), settings(detail::validate(c)), id(std::move(deployment)) {
    name = config.container_name.empty() ? "rex-" + id : config.container_name;
    // As a local engine would have it: auto decides in start().
    publish_port = detail::publishes_port(detail::plan_start(settings, true, "").route);
  }

  // Before start() the server's path and socket directory are placeholders.
  json::object body(bool mount) const {
    detail::BodyInputs inputs;
    inputs.server_path = server_host_path.empty() ? std::string("<rex-server>") : server_host_path;
    inputs.mount_server = mount;
    inputs.socket_dir = socket_dir.empty() ? std::string("<socket dir>") : socket_dir;
    inputs.publish_port = publish_port;
    inputs.token = token;
    inputs.labels =
        detail::container_labels(config, id, owner_labels(), rex::detail::unix_seconds());
    return detail::container_body(settings, inputs);
  }

  void emit(DeploymentStage stage, std::string message) const;
  void emit(const DeploymentEvent& event) const;

  asio::awaitable<void> ensure_image();
  asio::awaitable<void> start();
  asio::awaitable<void> create_container();
  asio::awaitable<void> upload_server();
  asio::awaitable<void> start_container();
  asio::awaitable<std::string> server_url();
  asio::awaitable<void> fail_unreachable(const json::object& info, std::string problem);
  asio::awaitable<void> wait_ready(Clock::time_point deadline);
  asio::awaitable<void> poll_alive(http::Client& poll, std::string& last);
  asio::awaitable<std::string> log_tail();
  asio::awaitable<void> release();
  asio::awaitable<void> remove_container_patiently();
};

void ContainerStart::emit(DeploymentStage stage, std::string message) const {
  DeploymentEvent e;
  e.stage = stage;
  e.message = std::move(message);
  emit(e);
}

void ContainerStart::emit(const DeploymentEvent& event) const {
  if (report)
    report(event);
}

asio::awaitable<void> ContainerStart::ensure_image() {
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

asio::awaitable<std::string> ContainerStart::log_tail() {
  if (container.empty() || !engine)
    co_return std::string();
  try {
    co_return co_await engine->container_logs(container, 30);
  } catch (const std::exception& e) {
    co_return fmt::format("(its logs could not be read: {})", e.what());
  }
}

asio::awaitable<void> ContainerStart::poll_alive(http::Client& poll, std::string& last) {
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

asio::awaitable<void> ContainerStart::wait_ready(Clock::time_point deadline) {
  // A client of its own without retries: while the server starts, every refused connection
  // should be noticed at once and the next poll follow quickly.
  http::ClientConfig poll_config;
  poll_config.retry.max_retries = 0;
  poll_config.timeout = std::chrono::seconds(2);
  http::Client poll(executor, url, poll_config);
  std::string last = "no answer yet";
  auto alive = poll_alive(poll, last);
  auto exited = watch_exit(*engine, container);
  auto race = first_of(std::move(alive), std::move(exited));
  auto bounded = with_timeout(std::move(race), deadline - Clock::now());
  const auto winner = co_await std::move(bounded);
  if (winner && winner->index() == 0)
    co_return;
  std::string logs = co_await log_tail();
  if (winner)
    throw DeploymentStartupError(
        detail::exited_message(name, config.image, std::to_string(std::get<1>(*winner)), logs));
  throw DeploymentStartupError(fmt::format(
      "container {} ({}): its server did not answer within startup_timeout {} s (last check: "
      "{}); last log lines:\n{}",
      name, config.image, config.startup_timeout.count(), last, logs));
}

asio::awaitable<void> ContainerStart::start() {
  const auto deadline =
      Clock::now() +
      std::chrono::milliseconds(static_cast<std::int64_t>(config.startup_timeout.count() * 1000));
  docker::EngineConfig engine_config =
      docker::engine_config_from_environment(config.container_runtime);
  if (!config.engine.empty())
    engine_config.host = config.engine;
  engine = std::make_shared<docker::Engine>(executor, engine_config);

  server_host_path = find_rex_server(config.server_path);
  const detail::StartPlan plan =
      detail::plan_start(settings, engine->is_local(), engine->endpoint());
  mount_server = plan.mount_server;

  co_await ensure_image();
  publish_port = detail::publishes_port(plan.route);
  if (plan.route == detail::ServerRoute::ask_engine) {
    const std::string network = detail::network_name(settings.network_mode);
    publish_port = !(co_await network_is_routable(*engine, network));
  }

  if (settings.unix_socket) {
    std::string pattern = (fs::temp_directory_path() / "rex-sock-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw DeploymentStartupError(
          fmt::format("cannot create a socket directory: {}", std::strerror(errno)));
    socket_dir = pattern;
    // A container user other than root must be able to create the socket.
    if (!config.user.empty())
      ::chmod(socket_dir.c_str(), 0777);
  }

  co_await create_container();
  rex::detail::crash_point("docker.container_created");
  if (!mount_server)
    co_await upload_server();
  co_await start_container();
  rex::detail::crash_point("docker.container_started");
  url = co_await server_url();

  emit(DeploymentStage::waiting, fmt::format("waiting for the server at {}", url));
  co_await wait_ready(deadline);

  RemoteRuntimeConfig rc;
  rc.url = url;
  rc.auth_token = token;
  runtime = std::make_unique<RemoteRuntime>(executor, std::move(rc));
}

asio::awaitable<void> ContainerStart::create_container() {
  emit(DeploymentStage::creating, fmt::format("creating container {} from {}", name, config.image));
  json::object create = body(mount_server);
  try {
    container =
        co_await engine->create_container(std::move(create), name, config.platform.value_or(""));
  } catch (const docker::EngineError& e) {
    throw DeploymentStartupError(
        fmt::format("cannot create container {} from {}: {}", name, config.image, e.what()));
  }
}

// An engine on another machine cannot bind-mount the server: it goes into the created container
// as a tar archive, built on a thread of its own.
asio::awaitable<void> ContainerStart::upload_server() {
  asio::thread_pool files(1);
  const std::string tar = (fs::temp_directory_path() / ("rex-server-" + id + ".tar")).string();
  const std::string source = server_host_path;
  auto build = [source, tar] {
    write_single_file_tar(source, std::string(detail::kServerInContainer.substr(1)), tar);
  };
  auto caller = executor;
  co_await detail::offload(files, caller, std::move(build));
  auto put = capture(engine->put_archive(container, "/", tar));
  const Outcome<void> put_done = co_await std::move(put);
  std::error_code ec;
  fs::remove(tar, ec);
  files.join();
  put_done.value();  // rethrows the engine's error, now that the tar is gone
}

asio::awaitable<void> ContainerStart::start_container() {
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
}

asio::awaitable<std::string> ContainerStart::server_url() {
  if (settings.unix_socket)
    co_return detail::unix_socket_url(socket_dir);
  const json::object info = co_await engine->inspect_container(container);
  const std::string mode = settings.network_mode.empty() ? "default" : settings.network_mode;
  if (!publish_port) {
    const std::string address =
        detail::container_address(info, detail::network_name(settings.network_mode));
    if (!address.empty())
      co_return detail::container_ip_url(address);
    std::string problem = fmt::format(
        "the engine gave it no address to reach its server at (network mode '{}'); set connect "
        "to port",
        mode);
    co_await fail_unreachable(info, std::move(problem));
  }
  const std::string host_port = detail::published_host_port(info);
  if (host_port.empty()) {
    std::string problem =
        fmt::format("the engine published no host port for the server (network mode '{}')", mode);
    co_await fail_unreachable(info, std::move(problem));
  }
  co_return detail::published_url(config.docker_internal_host, host_port);
}

// Throws: that the container exited when it did (it then has no address and no ports), else
// `problem`; with its last log lines either way.
asio::awaitable<void> ContainerStart::fail_unreachable(const json::object& info,
                                                       std::string problem) {
  std::string logs = co_await log_tail();
  if (const auto code = detail::stopped_exit_code(info))
    throw DeploymentStartupError(detail::exited_message(name, config.image, *code, logs));
  throw DeploymentStartupError(
      fmt::format("container {}: {}; last log lines:\n{}", name, problem, logs));
}

asio::awaitable<void> ContainerStart::remove_container_patiently() {
  auto removing = remove_patiently(*engine, container);
  if (!co_await std::move(removing))
    container.clear();
}

// What a failed start made: the container, the socket directory.
asio::awaitable<void> ContainerStart::release() {
  runtime.reset();
  detail::Resources held;
  held.engine = engine != nullptr;
  held.container = !container.empty();
  held.socket_dir = !socket_dir.empty();
  const detail::Cleanup cleanup = detail::plan_cleanup(config, held);
  if (cleanup.kill_container) {
    try {
      co_await engine->kill_container(container, "KILL");
    } catch (const std::exception&) {
    }
  }
  if (cleanup.remove_container)
    co_await remove_container_patiently();
  if (cleanup.remove_image) {
    try {
      co_await engine->remove_image(config.image, false);
    } catch (const std::exception&) {
      // Still used by another container.
    }
  }
  if (cleanup.remove_socket_dir) {
    std::error_code ec;
    fs::remove_all(socket_dir, ec);
    socket_dir.clear();
  }
}

}  // namespace

json::object docker_create_body(const DockerDeploymentConfig& config, std::string deployment_id) {
  const ContainerStart s(asio::system_executor(), config, std::move(deployment_id));
  return s.body(true);
}

asio::awaitable<StartedSandbox> create_docker_container(asio::any_io_executor executor,
                                                        DockerDeploymentConfig config,
                                                        std::string deployment_id,
                                                        SandboxProgress progress) {
  auto s = std::make_shared<ContainerStart>(std::move(executor), config,
                                            deployment_id.empty() ? random_hex(6) : deployment_id);
  s->report = std::move(progress);
  std::exception_ptr failure;
  try {
    auto starting = s->start();
    co_await std::move(starting);
    StartedSandbox started;
    started.id = s->container;
    started.url = s->url;
    started.token = s->token;
    started.own_filesystem = true;
    // Where sessions work: the settings' place, else the image's.
    auto finding = detail::working_dir_of(*s->runtime, s->config.working_dir, "/");
    started.working_dir = co_await std::move(finding);
    // Its idle connections close now: see SandboxDeployment::stop().
    s->runtime->close_idle_connections();
    co_return started;
  } catch (...) {
    failure = detail::startup_failure(std::current_exception(), s->name);
    if (!failure)
      throw;
  }
  auto releasing = s->release();
  co_await std::move(releasing);
  std::rethrow_exception(failure);
}

asio::awaitable<void> remove_docker_container(docker::Engine& engine, std::string id,
                                              const DockerDeploymentConfig& settings) {
  // The socket directory a network-less container's server listens in, found among its mounts.
  std::string socket_dir;
  std::string image;
  bool gone = false;
  try {
    const json::object info = co_await patiently([&] { return engine.inspect_container(id); });
    socket_dir = socket_dir_of(info);
    image = field_text(info, {"Config", "Image"});
    if (!field_text(info, {"Config", "Labels", "rex.checkpoint"}).empty())
      image.clear();  // a checkpoint's image: it goes when its checkpoint is removed
  } catch (const docker::EngineError& e) {
    if (e.status() != 404)
      throw;
    gone = true;
  }
  if (!gone) {
    try {
      co_await engine.kill_container(id, "KILL");
    } catch (const std::exception&) {
      // Stopped already, or the removal below says why not.
    }
    if (settings.remove_container) {
      auto removing = remove_patiently(engine, id);
      if (const std::optional<std::string> failure = co_await std::move(removing))
        throw DeploymentStartupError(*failure);
    }
    if (settings.remove_images && !image.empty()) {
      try {
        co_await engine.remove_image(image, false);
      } catch (const std::exception&) {
        // Still used by another container.
      }
    }
  }
  if (!socket_dir.empty()) {
    std::error_code ec;
    fs::remove_all(socket_dir, ec);
  }
}

DockerDeployment::DockerDeployment(asio::any_io_executor executor, DockerDeploymentConfig config)
    : DockerDeployment(std::move(executor), std::move(config), random_hex(6)) {}

namespace {

// The settings of the deployment `id`: checked, its container named after it unless named.
DockerDeploymentConfig named(DockerDeploymentConfig config, const std::string& id) {
  (void)detail::validate(config);  // DeploymentConfigError here, before anything starts
  if (config.container_name.empty())
    config.container_name = "rex-" + id;
  return config;
}

SandboxRequest request_of(const DockerDeploymentConfig& config, std::string id) {
  SandboxRequest r;
  r.image = config.image;
  r.deployment_id = std::move(id);
  r.purpose = "the " + config.container_runtime + " deployment";
  return r;
}

}  // namespace

DockerDeployment::DockerDeployment(asio::any_io_executor executor, DockerDeploymentConfig config,
                                   std::string id)
    : SandboxDeployment(executor, open_docker_backend(executor, named(config, id)),
                        request_of(config, id)),
      config_(named(std::move(config), id)) {}

json::object DockerDeployment::create_body() const {
  return docker_create_body(config_, deployment_id());
}

}  // namespace rex
