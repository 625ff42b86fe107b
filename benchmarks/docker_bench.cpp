// rex_docker_bench: container start to first successful command, DockerDeployment against the
// floor of the raw engine doing the same container work, measured in the same run.
//
//   rex_docker_bench [--runs N] [--image IMAGE] [--smoke] [--json] [--strict]
//
// Both sides time the same container, up to the same point: rex-server running in it and
// answering. Each way of reaching the server has its own floor:
//   floor_tcp      through the same Engine API client: create a container from exactly the body
//                  DockerDeployment sends (DockerDeployment::create_body(): the rex-server binary
//                  bind-mounted read-only as its entrypoint, an init process, the same network
//                  mode, labels and environment), start it, read its address back (inspect:
//                  without it no client can connect), then GET /is_alive every 1 ms until it
//                  answers 200
//   docker_tcp     DockerDeployment.start() + create_session + `echo ok` answered, with the
//                  default connect (auto: the container's own address when this machine routes
//                  to it, else a published port; floor_tcp follows what auto chose)
//   floor_port     as floor_tcp with the server's port published on 127.0.0.1 (connect: port);
//                  the host port the engine picked is read back by the same inspect
//   docker_port    DockerDeployment with connect: port, + create_session + `echo ok`
//   floor_unix     as floor_tcp in network mode none: the socket directory bind-mounted, polled
//                  over http+unix; nothing to read back
//   docker_unix    DockerDeployment in network mode none (unix socket), + create_session + echo
// What is left between a rex figure and its floor is rex's own work: the image check, connect
// auto's routability check of the network, its /is_alive poll (every 2 ms, doubling up to 50 ms,
// where the floor polls every 1 ms), and create_session + `echo ok` through RemoteRuntime.
// Neither side counts stopping or removing the container (rex's stop(), the floor's forced
// remove). Runs alternate floor and rex, mode after mode, so a noisy neighbour hurts both alike.
// Target: p50 of each rex figure <= 1.25 x p50 of its floor.
// Needs a running engine and the image (scripts/common.sh: rex_docker_setup).
// --smoke: 2 runs each, exits 0 even when a target misses (a failure to start still fails).

#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>

#include <fmt/core.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.hpp"

#ifndef REX_SERVER_PATH
#error "REX_SERVER_PATH must name the rex-server executable (set by CMake)"
#endif

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace rex::bench;

struct Options {
  int runs = 10;
  std::string image = "rex-test-nopython:latest";
  bool smoke = false;
  bool json = false;
  bool strict = false;
};

// One way of reaching the server: what DockerDeployment is given.
struct Mode {
  std::string name;     // tcp, port, unix
  std::string connect;  // DockerDeployment's connect: auto, port, container_ip
  std::string network;  // DockerDeployment's network_mode: "" or none
  // The floor's connect: what auto decides in start(), fixed, since create_body() before
  // start() cannot know it.
  std::string floor_connect;
};

rex::DockerDeploymentConfig deployment_config(const std::string& image, const Mode& mode,
                                              bool floor) {
  rex::DockerDeploymentConfig c;
  c.image = image;
  c.pull = rex::PullPolicy::never;
  c.server_path = REX_SERVER_PATH;  // the same binary for rex and floor
  c.labels = {{"rex.bench", floor ? "floor" : "deployment"}};
  c.connect = floor ? mode.floor_connect : mode.connect;
  c.network_mode = mode.network;
  return c;
}

const json::object& object_at(const json::object& o, std::string_view key) {
  return o.at(key).as_object();
}

// The value of NAME=... in the create body's Env.
std::string env_value(const json::object& body, std::string_view name) {
  for (const auto& e : body.at("Env").as_array()) {
    const std::string_view kv = e.as_string();
    if (kv.size() > name.size() && kv.starts_with(name) && kv[name.size()] == '=')
      return std::string(kv.substr(name.size() + 1));
  }
  throw std::runtime_error(fmt::format("the create body has no {}", name));
}

// Where the floor's server is reached, read back from the container's inspect.
std::string server_url(const json::object& info, bool published) {
  const json::object& settings = object_at(info, "NetworkSettings");
  if (published) {
    for (const auto& b : settings.at("Ports").as_object().at("8000/tcp").as_array()) {
      const std::string_view port = b.as_object().at("HostPort").as_string();
      if (!port.empty())
        return fmt::format("http://127.0.0.1:{}", port);
    }
  } else {
    for (const auto& network : object_at(settings, "Networks")) {
      const std::string_view ip = network.value().as_object().at("IPAddress").as_string();
      if (!ip.empty())
        return fmt::format("http://{}:8000", ip);
    }
  }
  throw std::runtime_error("the floor container has no address to reach its server at");
}

// GET /is_alive every 1 ms until it answers 200: as soon as the server answers.
asio::awaitable<void> poll_alive(const std::string& url, const std::string& token) {
  auto ex = co_await asio::this_coro::executor;
  rex::http::ClientConfig config;
  config.retry.max_retries = 0;
  config.timeout = std::chrono::seconds(2);
  rex::http::Client client(ex, url, config);
  asio::steady_timer pause(ex);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::string last = "no answer";
  while (Clock::now() < deadline) {
    rex::http::ClientRequest request;
    request.target = "/is_alive";
    request.headers.emplace_back("X-API-Key", token);
    try {
      const auto response = co_await client.request(std::move(request));
      if (response.status == 200)
        co_return;
      last = fmt::format("HTTP {}", response.status);
    } catch (const std::exception& e) {
      last = e.what();
    }
    pause.expires_after(std::chrono::milliseconds(1));
    co_await pause.async_wait(asio::use_awaitable);
  }
  throw std::runtime_error("floor: the server did not answer within 30 s: " + last);
}

// The floor of one mode: DockerDeployment's own create body, created, started, its address read
// back and its server polled until it answers. Returns the milliseconds; removal is not timed.
asio::awaitable<double> floor_once(rex::docker::Engine& engine, std::string image, Mode mode) {
  auto ex = co_await asio::this_coro::executor;
  const rex::DockerDeployment d(ex, deployment_config(image, mode, true));
  json::object body = d.create_body();
  // Before start() the body names the server binary and the socket directory by placeholders.
  std::string socket_dir;
  if (mode.network == "none") {
    std::string pattern = (fs::temp_directory_path() / "rex-bench-sock-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    socket_dir = pattern;
  }
  json::array& binds = body.at("HostConfig").as_object().at("Binds").as_array();
  for (auto& b : binds) {
    std::string bind(b.as_string());
    if (bind.starts_with("<rex-server>"))
      bind =
          rex::find_rex_server(REX_SERVER_PATH) + bind.substr(std::string("<rex-server>").size());
    else if (bind.starts_with("<socket dir>"))
      bind = socket_dir + bind.substr(std::string("<socket dir>").size());
    b = bind;
  }
  const std::string token = env_value(body, "REX_AUTH_TOKEN");
  const bool published = body.at("HostConfig").as_object().contains("PortBindings");
  const std::string name = "rex-bench-floor-" + d.deployment_id();

  const auto t0 = Clock::now();
  const std::string id = co_await engine.create_container(std::move(body), name);
  std::exception_ptr failure;
  double ms = 0;
  try {
    co_await engine.start_container(id);
    std::string url;
    if (socket_dir.empty())
      url = server_url(co_await engine.inspect_container(id), published);
    else
      url = fmt::format("http+unix://{}/rex.sock", socket_dir);
    co_await poll_alive(url, token);
    ms = ms_since(t0);
  } catch (...) {
    failure = std::current_exception();
  }
  co_await engine.remove_container(id, true);
  if (!socket_dir.empty()) {
    std::error_code ec;
    fs::remove_all(socket_dir, ec);
  }
  if (failure)
    std::rethrow_exception(failure);
  co_return ms;
}

struct RexRun {
  double ms = 0;
  std::string url;  // where the server was reached
};

asio::awaitable<RexRun> rex_once(std::string image, Mode mode) {
  auto ex = co_await asio::this_coro::executor;
  rex::DockerDeployment d(ex, deployment_config(image, mode, false));
  const auto t0 = Clock::now();
  co_await d.start();
  rex::CreateBashSessionRequest create;
  create.startup_timeout = 30;
  co_await d.runtime().create_session(create);
  rex::BashAction echo;
  echo.command = "echo ok";
  echo.timeout = 30;
  auto obs = co_await d.runtime().run_in_session(echo);
  RexRun run{ms_since(t0), d.url()};
  co_await d.stop();
  if (obs.output != "ok\n" || obs.exit_code != 0)
    throw std::runtime_error("unexpected first command result: " + obs.output);
  co_return run;
}

int usage(const char* self, int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: {} [--runs N] [--image IMAGE] [--smoke] [--json] [--strict]\n", self);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke")
      opt.smoke = true;
    else if (a == "--json")
      opt.json = true;
    else if (a == "--strict")
      opt.strict = true;
    else if (a == "--image" && i + 1 < argc)
      opt.image = argv[++i];
    else if (a == "--runs" && i + 1 < argc)
      opt.runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--help" || a == "-h")
      return usage(argv[0], 0);
    else {
      fmt::print(stderr, "unknown or incomplete argument `{}`\n", a);
      return usage(argv[0], 2);
    }
  }
  if (opt.smoke)
    opt.runs = 2;

  asio::io_context io;
  rex::docker::Engine engine(io.get_executor());
  std::vector<Mode> modes{{"tcp", "auto", "", "container_ip"},
                          {"port", "port", "", "port"},
                          {"unix", "auto", "none", "auto"}};
  std::map<std::string, std::vector<double>> floor_ms, rex_ms;
  std::string tcp_reached;
  try {
    // One unmeasured start of each warms the engine's caches (image layers, binaries). The
    // default connect (auto) decides here whether this machine reaches the container's own
    // address; the tcp floor does what it chose.
    for (const Mode& m : modes) {
      const RexRun run = run_on(io, rex_once(opt.image, m));
      if (m.name == "tcp")
        tcp_reached = run.url;
    }
    if (tcp_reached.starts_with("http://127.0.0.1:"))
      modes[0].floor_connect = "port";
    for (const Mode& m : modes)
      run_on(io, floor_once(engine, opt.image, m));
    for (int i = 0; i < opt.runs; ++i) {
      for (const Mode& m : modes) {
        floor_ms[m.name].push_back(run_on(io, floor_once(engine, opt.image, m)));
        rex_ms[m.name].push_back(run_on(io, rex_once(opt.image, m)).ms);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rex_docker_bench: {}\n", e.what());
    return 1;
  }

  std::vector<Result> results;
  for (const Mode& m : modes) {
    Result base = ratio_result("floor_" + m.name, floor_ms[m.name], floor_ms[m.name], 1.25);
    base.target.reset();
    base.target_text = "floor";
    base.verdict = Verdict::info;
    base.note = fmt::format("p90 {:.1f} ms, max {:.1f} ms", base.rex.p90, base.rex.max);
    base.extra["image"] = opt.image;
    results.push_back(std::move(base));
    Result r = ratio_result("docker_" + m.name, rex_ms[m.name], floor_ms[m.name], 1.25);
    // Each rex run follows its floor run: the median of their differences cancels the drift of
    // a busy machine's load better than the difference of the medians.
    std::vector<double> paired;
    for (std::size_t i = 0; i < rex_ms[m.name].size(); ++i)
      paired.push_back(rex_ms[m.name][i] - floor_ms[m.name][i]);
    const double rex_extra = median(paired);
    r.note =
        fmt::format("p90 {:.1f} ms, max {:.1f} ms; rex - floor p50 {:+.1f} ms, paired {:+.1f} ms",
                    r.rex.p90, r.rex.max, r.rex.p50 - r.floor_p50, rex_extra);
    r.extra["paired_extra_ms"] = rex_extra;
    if (m.name == "tcp")
      r.note += fmt::format("; reached at {}", tcp_reached);
    r.extra["image"] = opt.image;
    results.push_back(std::move(r));
  }

  FILE* table = opt.json ? stderr : stdout;
  fmt::print(table,
             "container start to the server answering (rex: and its first command), image "
             "{}, {} runs each\n",
             opt.image, opt.runs);
  print_table(table, results);
  if (opt.json)
    print_json(results);
  return opt.strict && any_missed(results) ? 1 : 0;
}
