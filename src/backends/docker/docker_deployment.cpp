// DockerDeployment: image, container, injected server, readiness, teardown (see the header). The
// decisions are docker_plan.hpp's; what is here performs the engine calls in order.
#include <rex/backends/docker/docker_deployment.hpp>

#include <rex/backends/docker/docker_gc.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/timeout.hpp>
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
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

#include "backends/docker/docker_plan.hpp"
#include "core/clock.hpp"
#include "core/crash_point.hpp"
#include "core/offload.hpp"
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

}  // namespace

struct DockerDeployment::Impl {
  asio::any_io_executor executor;
  detail::DockerSettings settings;
  const DockerDeploymentConfig& config = settings.config;
  std::string id = random_hex(6);
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
  bool runtime_closed = false;
  bool started = false;
  bool stopped = false;
  std::function<void(const DeploymentEvent&)> hooks;  // the owner's emit()

  Impl(asio::any_io_executor ex, const DockerDeploymentConfig& c)
      : executor(std::move(ex)), settings(detail::validate(c)) {
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

asio::awaitable<void> DockerDeployment::Impl::start() {
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(
                                 static_cast<std::int64_t>(config.startup_timeout.count() * 1000));
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
  started = true;
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  emit(DeploymentStage::ready, fmt::format("container {} ready at {} in {:.0f} ms", name, url, ms));
}

asio::awaitable<void> DockerDeployment::Impl::create_container() {
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
asio::awaitable<void> DockerDeployment::Impl::upload_server() {
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

asio::awaitable<void> DockerDeployment::Impl::start_container() {
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

asio::awaitable<std::string> DockerDeployment::Impl::server_url() {
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
asio::awaitable<void> DockerDeployment::Impl::fail_unreachable(const json::object& info,
                                                               std::string problem) {
  std::string logs = co_await log_tail();
  if (const auto code = detail::stopped_exit_code(info))
    throw DeploymentStartupError(detail::exited_message(name, config.image, *code, logs));
  throw DeploymentStartupError(
      fmt::format("container {}: {}; last log lines:\n{}", name, problem, logs));
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
    // Unreachable (0), or an engine still recovering from a restart (409 "removal in
    // progress", 5xx): both pass, so the removal is tried again within the grace period.
    const bool transient = status == 0 || status == 409 || status >= 500;
    if (!transient || Clock::now() + delay > give_up)
      co_return;
    asio::steady_timer pause(executor, delay);
    co_await pause.async_wait(asio::use_awaitable);
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
}

asio::awaitable<void> DockerDeployment::Impl::release() {
  detail::Resources held;
  held.open_runtime = runtime && !runtime_closed;
  held.engine = engine != nullptr;
  held.container = !container.empty();
  held.socket_dir = !socket_dir.empty();
  const detail::Cleanup cleanup = detail::plan_cleanup(config, held);
  if (cleanup.close_runtime) {
    runtime_closed = true;
    // Closing the sessions is a courtesy before the kill; a hung server must not hold it up.
    auto closing = with_timeout(runtime->close(), std::chrono::seconds(3));
    auto closed = capture(std::move(closing));
    (void)co_await std::move(closed);  // a failure to close changes nothing: the kill follows
    // The runtime object stays until the deployment is destroyed: calls still in flight fail
    // on the killed container instead of resuming on a freed object. Its idle connections
    // close now, while the server answers: closed after the kill, they would send packets to
    // an address that is gone, and the kernel would mark it unreachable for the next
    // container that gets it (a connect to it then stalls for about a second).
    runtime->close_idle_connections();
  }
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
  } catch (...) {
    failure = detail::startup_failure(std::current_exception(), impl_->name);
    if (!failure)
      throw;
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

DockerHandoff DockerDeployment::release_container() {
  if (!impl_->started)
    throw DeploymentNotStartedError(impl_->stopped ? "docker deployment: stopped"
                                                   : "docker deployment: not started");
  DockerHandoff handoff{impl_->container, impl_->url, impl_->token, impl_->socket_dir};
  impl_->runtime->close_idle_connections();
  impl_->started = false;
  impl_->stopped = true;
  impl_->container.clear();
  impl_->socket_dir.clear();
  return handoff;
}

json::object DockerDeployment::create_body() const {
  return impl_->body(impl_->engine ? impl_->mount_server : true);
}

}  // namespace rex
