// rex_gateway_bench: rex gateway (a child process, over loopback HTTP) against the floors of the
// same work done directly, measured in the same run.
//
//   rex_gateway_bench [--runs N] [--sessions N] [--image IMAGE] [--no-docker] [--smoke] [--json]
//                     [--strict] [--only create|proxy|e2b|sessions]
//
// Figures (each gateway run alternates with a floor run, so a noisy neighbour hurts both):
//   create_local   POST /api/sessions on the local provider answered 201 (a rex-server process
//                  started in a directory of its own, two commits to SQLite), then `echo ok` in
//                  the session's shell (POST /api/sessions/{id}/execute, bash). Floor: a
//                  LocalDeployment in this process started, a bash session created and the same
//                  `echo ok` answered. Target: p50 <= 1.5x.
//   create_docker  the same on the docker provider (image IMAGE). Floor: DockerDeployment::start
//                  with the same image, create_session and `echo ok`. Target: p50 <= 1.2x.
//   proxy_command  `echo ok` as SWE-ReX's run_in_session through the gateway's proxied protocol
//                  (POST /api/sessions/{id}/swerex/run_in_session). Floor: the same request sent
//                  to the sandbox's rex-server directly (its unix socket and token from the
//                  session's record). Target: p50 <= 1.5x.
//   proxy_bare_relay the same request through a bare byte relay (a thread of this program
//                  between a loopback TCP port and the sandbox's socket: poll, read, write, no
//                  HTTP) against the same floor: what any process in between costs here.
//                  Reported only.
//   e2b_command_T  E2B's commands.run("echo ok") as its SDKs send it (process.Process/Start: a
//                  new `bash -l -c` in the sandbox per command) against the same command through
//                  the gateway's SWE-ReX proxy (a bash session of the same sandbox), on template
//                  T (local; Python3, the docker provider, when the engine answers). Target:
//                  p50 <= 1.5x.
//   e2b_create_to_output_T  E2B's Sandbox.create to the first commands.run's output (reported).
//   sessions       N sessions (default 500) on the local provider, created 50 at a time, each
//                  running one command, all alive at once; then the gateway killed with SIGKILL
//                  and started again: the time to /readyz 200 (reconciling all N); then every
//                  session destroyed. Target: zero errors. Reported: the gateway's resident
//                  memory per live session (its RSS with N sessions less its RSS before).
// Neither side counts destroying what it made. Needs the rex executable (REX_CLI_PATH); the
// docker figure needs a running engine and the image (scripts/common.sh: rex_docker_setup) and
// is skipped, saying why, without one.
// --smoke: 3 runs, 10 sessions; exits 0 even when a target misses (an error still fails).
// --only: one group of figures (create_local and create_docker; proxy_command; the e2b figures;
// the sessions figures).

#include <rex/deployment/docker_deployment.hpp>
#include <rex/deployment/local_deployment.hpp>
#include <rex/http/client.hpp>
#include <rex/http/url.hpp>
#include <rex/protocol/actions.hpp>
#include <rex/protocol/session.hpp>

#include <fmt/core.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "child_server.hpp"

#ifndef REX_CLI_PATH
#error "REX_CLI_PATH must name the rex executable (set by CMake)"
#endif

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace rex::bench;

struct Options {
  int runs = 20;
  int sessions = 500;
  std::string image = "rex-test-bookworm:latest";
  bool docker = true;
  bool smoke = false;
  bool json = false;
  bool strict = false;
  std::string only;  // empty: every figure

  bool wants(std::string_view group) const { return only.empty() || only == group; }
};

constexpr int kCreatesInFlight = 50;

// A scratch directory, removed at the end (after every sandbox in it is gone).
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "rgb-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw_errno("mkdtemp");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// `rex gateway` on 127.0.0.1 (a port of its choosing) over `storage`.
std::unique_ptr<ChildServer> start_gateway(const fs::path& storage, const Options& o) {
  ChildServerOptions options;
  options.capture_stderr = true;  // its log, where the listening line is
  options.start_limit = std::chrono::seconds(60);
  return std::make_unique<ChildServer>(
      "rex gateway",
      std::vector<std::string>{REX_CLI_PATH, "gateway", "--listen", "127.0.0.1:0", "--storage",
                               storage.string(), "--python-image", o.image},
      options);
}

class Gateway {
 public:
  Gateway(asio::io_context& io, const std::string& url)
      : client_(io.get_executor(), url, config()) {}

  asio::awaitable<json::value> call(std::string method, std::string target, std::string body = {},
                                    unsigned expect = 200) {
    rex::http::ClientRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    if (!body.empty()) {
      r.headers.emplace_back("Content-Type", "application/json");
      r.body = std::move(body);
    }
    const std::string what = r.method + " " + r.target;
    auto response = co_await client_.request(std::move(r));
    if (response.status != expect)
      throw std::runtime_error(
          fmt::format("{}: HTTP {}: {}", what, response.status, response.body.substr(0, 400)));
    co_return response.body.empty() ? json::value() : json::parse(response.body);
  }

  asio::awaitable<json::object> create(std::string provider, std::string environment) {
    json::object body{{"provider", provider}, {"environment", environment}};
    auto rec = co_await call("POST", "/api/sessions", json::serialize(body), 201);
    co_return rec.as_object();
  }

  asio::awaitable<void> echo(std::string id) {
    json::object body{{"code", "echo ok"}, {"language", "bash"}};
    auto out = co_await call("POST", "/api/sessions/" + id + "/execute", json::serialize(body));
    if (out.at("stdout").as_string() != "ok\n")
      throw std::runtime_error("execute answered " + json::serialize(out));
  }

  asio::awaitable<void> destroy(std::string id) {
    (void)co_await call("DELETE", "/api/sessions/" + id);
  }

 private:
  static rex::http::ClientConfig config() {
    rex::http::ClientConfig c;
    c.max_idle_connections = 64;
    c.timeout = std::chrono::seconds(120);
    return c;
  }
  rex::http::Client client_;
};

// Polls /readyz until it answers 200 (the gateway has reconciled its records), up to 120 s.
void wait_ready(asio::io_context& io, Gateway& gw) {
  const auto t0 = Clock::now();
  while (true) {
    std::string not_yet;
    try {
      (void)run_on(io, gw.call("GET", "/readyz"));
    } catch (const std::exception& e) {
      not_yet = e.what();
    }
    if (not_yet.empty())
      return;
    if (ms_since(t0) > 120000)
      throw std::runtime_error("the gateway was not ready within 120 s: " + not_yet);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Runs a() and b() in turns, `runs` times each after one round that warms both up: their
// times, in milliseconds.
template <class A, class B>
std::pair<std::vector<double>, std::vector<double>> alternate(asio::io_context& io, int runs, A a,
                                                              B b) {
  std::pair<std::vector<double>, std::vector<double>> out;
  for (int i = 0; i < runs + 1; ++i) {
    const double x = run_on(io, a());
    const double y = run_on(io, b());
    if (i > 0) {
      out.first.push_back(x);
      out.second.push_back(y);
    }
  }
  return out;
}

// --- create to first command ----------------------------------------------------------------

asio::awaitable<double> gateway_create(Gateway& gw, std::string provider, std::string env) {
  const auto t0 = Clock::now();
  const json::object rec = co_await gw.create(provider, env);
  const std::string id(rec.at("session_id").as_string());
  co_await gw.echo(id);
  const double ms = ms_since(t0);
  co_await gw.destroy(id);
  co_return ms;
}

asio::awaitable<void> create_and_echo(rex::Runtime& runtime) {
  rex::CreateBashSessionRequest create;
  create.session = "bench";
  (void)co_await runtime.create_session(create);
  rex::BashAction echo;
  echo.command = "echo ok";
  echo.session = "bench";
  const auto obs = co_await runtime.run_in_session(echo);
  if (obs.output != "ok" && obs.output != "ok\n")
    throw std::runtime_error("echo answered '" + obs.output + "'");
}

// A floor: the deployment started, a session created and `echo ok` answered (its stop is not
// timed).
asio::awaitable<double> start_to_first_echo(rex::Deployment& deployment) {
  const auto t0 = Clock::now();
  co_await deployment.start();
  co_await create_and_echo(deployment.runtime());
  const double ms = ms_since(t0);
  co_await deployment.stop();
  co_return ms;
}

asio::awaitable<double> local_floor(const fs::path& dir) {
  rex::LocalDeploymentConfig config;
  config.working_dir = dir.string();
  rex::LocalDeployment deployment(co_await asio::this_coro::executor, config);
  co_return co_await start_to_first_echo(deployment);
}

asio::awaitable<double> docker_floor(std::string image) {
  rex::DockerDeploymentConfig config;
  config.image = image;
  config.pull = rex::PullPolicy::never;
  config.working_dir = "/workspace";
  rex::DockerDeployment deployment(co_await asio::this_coro::executor, config);
  co_return co_await start_to_first_echo(deployment);
}

// --- the proxy --------------------------------------------------------------------------------

asio::awaitable<double> timed_post(rex::http::Client& client, std::string target,
                                   std::vector<std::pair<std::string, std::string>> headers,
                                   std::string body) {
  rex::http::ClientRequest r;
  r.method = "POST";
  r.target = std::move(target);
  r.headers = std::move(headers);
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = std::move(body);
  const auto t0 = Clock::now();
  auto response = co_await client.request(std::move(r));
  const double ms = ms_since(t0);
  if (response.status != 200 || response.body.find("\"output\":\"ok") == std::string::npos)
    throw std::runtime_error(
        fmt::format("run_in_session: HTTP {}: {}", response.status, response.body.substr(0, 300)));
  co_return ms;
}

// What any proxy in its own process costs on this machine: a bare byte relay from a loopback TCP
// port to a unix socket in a thread of its own (poll, read, write; no HTTP), for one connection.
class ByteRelay {
 public:
  explicit ByteRelay(std::string socket_path) : target_(std::move(socket_path)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("the byte relay cannot listen");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ByteRelay() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  ByteRelay(const ByteRelay&) = delete;
  ByteRelay& operator=(const ByteRelay&) = delete;

  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }

 private:
  void serve() {
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
      return;
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un u{};
    u.sun_family = AF_UNIX;
    target_.copy(u.sun_path, sizeof u.sun_path - 1);
    if (server >= 0 && ::connect(server, reinterpret_cast<sockaddr*>(&u), sizeof u) == 0) {
      std::vector<char> buf(1 << 16);
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      while (!stop_ && ::poll(fds, 2, 200) >= 0) {
        bool open = true;
        for (int i = 0; i < 2 && open; ++i) {
          if (fds[i].revents == 0)
            continue;
          const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
          open = n > 0 && ::write(fds[1 - i].fd, buf.data(), static_cast<std::size_t>(n)) == n;
        }
        if (!open)
          break;
      }
    }
    if (server >= 0)
      ::close(server);
    ::close(client);
  }

  std::string target_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::vector<Result> proxy_figures(asio::io_context& io, Gateway& gw, const std::string& gateway_url,
                                  int runs) {
  const json::object rec = run_on(io, gw.create("local", "local"));
  const std::string id(rec.at("session_id").as_string());
  // The record's url names the sandbox's socket.
  const std::string sandbox_url(rec.at("url").as_string());
  run_on(io, gw.call("POST", "/api/sessions/" + id + "/swerex/create_session",
                     R"({"session": "bench"})"));
  rex::http::Client via_gateway(io.get_executor(), gateway_url);
  rex::http::Client direct(io.get_executor(), sandbox_url);
  // The sandbox's token is the gateway's secret: read from its server's command line, found
  // by the pid in the sandbox's own file.
  const std::string token = [&] {
    const fs::path dir = fs::path(rec.at("working_dir").as_string().c_str()).parent_path();
    std::ifstream in(dir / "sandbox.json");
    std::stringstream text;
    text << in.rdbuf();
    const auto pid = json::parse(text.str()).at("pid").to_number<long>();
    std::ifstream cmdline(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
    std::vector<std::string> args;
    for (std::string arg; std::getline(cmdline, arg, '\0');)
      args.push_back(arg);
    const auto flag = std::find(args.begin(), args.end(), "--auth-token");
    if (flag == args.end() || flag + 1 == args.end())
      throw std::runtime_error("the sandbox server's command line has no --auth-token");
    return *(flag + 1);
  }();
  ByteRelay relay(rex::http::parse_url(sandbox_url).socket_path);
  rex::http::Client via_relay(io.get_executor(), relay.url());
  const std::string body = R"({"command": "echo ok", "session": "bench"})";
  std::vector<double> proxied, floor, relayed;
  for (int i = 0; i < runs + 3; ++i) {  // the first rounds warm the connections up
    const double p = run_on(
        io, timed_post(via_gateway, "/api/sessions/" + id + "/swerex/run_in_session", {}, body));
    const double d =
        run_on(io, timed_post(direct, "/run_in_session", {{"X-API-Key", token}}, body));
    const double b =
        run_on(io, timed_post(via_relay, "/run_in_session", {{"X-API-Key", token}}, body));
    if (i >= 3) {
      proxied.push_back(p);
      floor.push_back(d);
      relayed.push_back(b);
    }
  }
  run_on(io, gw.destroy(id));
  std::vector<Result> out;
  Result r = ratio_result("proxy_command", proxied, floor, 1.5);
  r.note = "run_in_session `echo ok` through the gateway vs to the sandbox's server";
  out.push_back(std::move(r));
  // Reported only: the share of the proxy's cost that any process in between pays here.
  Result bare = ratio_result("proxy_bare_relay", relayed, floor, 1.5);
  bare.target.reset();
  bare.verdict = Verdict::info;
  bare.note = "the same through a bare TCP-to-unix byte relay thread (no HTTP) vs direct";
  out.push_back(std::move(bare));
  return out;
}

// --- the E2B-compatible path -------------------------------------------------------------------

// E2B's commands.run as its SDKs send it: process.Process/Start, one enveloped JSON message.
asio::awaitable<double> e2b_run(rex::http::Client& client, std::string sandbox, std::string token,
                                std::string command) {
  const std::string message = json::serialize(json::object{
      {"process", json::object{{"cmd", "/bin/bash"}, {"args", json::array{"-l", "-c", command}}}}});
  std::string body(1, '\0');
  for (int shift = 24; shift >= 0; shift -= 8)
    body += static_cast<char>((message.size() >> shift) & 0xff);
  body += message;
  rex::http::ClientRequest r;
  r.method = "POST";
  r.target = "/process.Process/Start";
  r.headers = {{"Content-Type", "application/connect+json"},
               {"Connect-Protocol-Version", "1"},
               {"Connect-Timeout-Ms", "60000"},
               {"E2b-Sandbox-Id", std::move(sandbox)},
               {"X-Access-Token", std::move(token)}};
  r.body = std::move(body);
  const auto t0 = Clock::now();
  auto response = co_await client.request(std::move(r));
  const double ms = ms_since(t0);
  if (response.status != 200 || response.body.find("\"exitCode\":0") == std::string::npos)
    throw std::runtime_error(fmt::format("process.Process/Start: HTTP {}: {}", response.status,
                                         response.body.substr(0, 300)));
  co_return ms;
}

asio::awaitable<json::object> e2b_create(rex::http::Client& client, std::string template_id) {
  rex::http::ClientRequest r;
  r.method = "POST";
  r.target = "/v2/sandboxes";
  r.headers = {{"Content-Type", "application/json"}};
  r.body = json::serialize(json::object{{"templateID", template_id}, {"timeout", 300}});
  auto response = co_await client.request(std::move(r));
  if (response.status != 201)
    throw std::runtime_error(fmt::format("POST /v2/sandboxes: HTTP {}: {}", response.status,
                                         response.body.substr(0, 300)));
  co_return json::parse(response.body).as_object();
}

// commands.run("echo hi") through the E2B-compatible API against the same command through the
// gateway's SWE-ReX proxy (a bash session of the same sandbox); and an E2B create to the first
// command's output, with each template (provider) given.
std::vector<Result> e2b_figures(asio::io_context& io, Gateway& gw, const std::string& url, int runs,
                                const std::vector<std::string>& templates) {
  std::vector<Result> out;
  rex::http::Client client(io.get_executor(), url);
  for (const auto& t : templates) {
    const json::object sbx = run_on(io, e2b_create(client, t));
    const std::string id(sbx.at("sandboxID").as_string());
    const std::string token(sbx.at("envdAccessToken").as_string());
    run_on(io, gw.call("POST", "/api/sessions/" + id + "/swerex/create_session",
                       R"({"session": "bench"})"));
    const std::string echo = R"({"command": "echo ok", "session": "bench"})";
    std::vector<double> e2b, proxied;
    for (int i = 0; i < runs + 3; ++i) {
      const double e = run_on(io, e2b_run(client, id, token, "echo ok"));
      const double p = run_on(
          io, timed_post(client, "/api/sessions/" + id + "/swerex/run_in_session", {}, echo));
      if (i >= 3) {
        e2b.push_back(e);
        proxied.push_back(p);
      }
    }
    run_on(io, gw.destroy(id));
    Result r =
        ratio_result("e2b_command_" + (t == "base" ? std::string("local") : t), e2b, proxied, 1.5);
    r.note = "commands.run(`echo ok`): a new `bash -l` per command, vs run_in_session (proxy)";
    out.push_back(std::move(r));
  }

  for (const auto& t : templates) {
    std::vector<double> ready;
    for (int i = 0; i < std::max(3, runs / 4); ++i) {
      const auto t0 = Clock::now();
      const json::object made = run_on(io, e2b_create(client, t));
      const std::string sid(made.at("sandboxID").as_string());
      (void)run_on(
          io, e2b_run(client, sid, std::string(made.at("envdAccessToken").as_string()), "echo ok"));
      ready.push_back(ms_since(t0));
      run_on(io, gw.destroy(sid));
    }
    Result c;
    c.name = "e2b_create_to_output_" + (t == "base" ? std::string("local") : t);
    c.rex = stats_of(ready);
    c.note = fmt::format("Sandbox.create (template {}) to commands.run's output", t);
    out.push_back(std::move(c));
  }
  return out;
}

// --- many sessions ----------------------------------------------------------------------------

// Runs op(i) for every i in [0, n), at most `in_flight` at a time; the failures are counted.
template <class Op>
BatchResult run_limited(asio::io_context& io, int n, int in_flight, Op op) {
  auto next = std::make_shared<int>(0);
  auto failures = std::make_shared<BatchResult>();
  auto worker = [&io, n, next, failures, op](int) -> asio::awaitable<int> {
    (void)io;
    while (*next < n) {
      const int i = (*next)++;
      std::string error;
      try {
        co_await op(i);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (error.empty()) {
        ++failures->ok;
      } else {
        ++failures->failed;
        if (failures->first_error.empty())
          failures->first_error = error;
      }
    }
    co_return 0;
  };
  const BatchResult workers = run_all(io, std::min(n, in_flight), worker);
  if (workers.failed > 0)
    throw std::runtime_error(workers.first_error);
  return *failures;
}

std::vector<Result> sessions_figures(asio::io_context& io, const fs::path& storage,
                                     std::unique_ptr<ChildServer>& child, const Options& o) {
  std::vector<Result> out;
  const int n = o.sessions;
  const long rss_before = vm_rss_kib(child->pid());
  std::vector<std::string> ids(static_cast<std::size_t>(n));
  int errors = 0;
  std::string first_error;
  auto note_errors = [&](const BatchResult& b) {
    errors += b.failed;
    if (first_error.empty())
      first_error = b.first_error;
  };
  const auto t0 = Clock::now();
  {
    Gateway gw(io, child->url());
    note_errors(run_limited(io, n, kCreatesInFlight, [&](int i) -> asio::awaitable<void> {
      const json::object rec = co_await gw.create("local", "local");
      ids[static_cast<std::size_t>(i)] = std::string(rec.at("session_id").as_string());
      co_await gw.echo(ids[static_cast<std::size_t>(i)]);
    }));
  }
  const double create_ms = ms_since(t0);
  const long rss_with = vm_rss_kib(child->pid());

  // kill -9, then a new gateway on the same storage: time to /readyz.
  child->kill();
  const auto r0 = Clock::now();
  child = start_gateway(storage, o);
  double ready_ms = 0;
  {
    Gateway gw(io, child->url());
    wait_ready(io, gw);
    ready_ms = ms_since(r0);
    const json::value listed = run_on(io, gw.call("GET", "/api/sessions?state=ready&limit=1000"));
    const auto& items = listed.as_object().at("sessions").as_array();
    const int ready = static_cast<int>(items.size());
    const int created = n - errors;
    if (ready != created) {
      ++errors;
      if (first_error.empty())
        first_error =
            fmt::format("{} sessions ready after the restart, {} created", ready, created);
    }
    const auto d0 = Clock::now();
    note_errors(run_limited(io, n, kCreatesInFlight, [&](int i) -> asio::awaitable<void> {
      const std::string& id = ids[static_cast<std::size_t>(i)];
      if (!id.empty())
        co_await gw.destroy(id);
    }));
    const double destroy_ms = ms_since(d0);

    Result all;
    all.name = fmt::format("sessions_{}", n);
    all.rex.p50 = all.rex.p99 = errors;
    all.target_text = "0 errors";
    all.verdict = errors == 0 ? Verdict::pass : Verdict::miss;
    all.note =
        fmt::format("created and used in {:.1f} s, destroyed in {:.1f} s{}", create_ms / 1000,
                    destroy_ms / 1000, errors ? "; first error: " + first_error : "");
    all.extra["errors"] = errors;
    all.extra["create_seconds"] = create_ms / 1000;
    all.extra["destroy_seconds"] = destroy_ms / 1000;
    out.push_back(all);
  }
  Result memory;
  memory.name = "gateway_kib_per_session";
  memory.rex.p50 = memory.rex.p99 = static_cast<double>(rss_with - rss_before) / n;
  memory.note =
      fmt::format("gateway RSS {} KiB with {} sessions, {} KiB before", rss_with, n, rss_before);
  out.push_back(memory);
  Result reconcile;
  reconcile.name = fmt::format("reconcile_{}_ms", n);
  reconcile.rex.p50 = reconcile.rex.p99 = ready_ms;
  reconcile.note = fmt::format("kill -9, restart, /readyz 200 with {} sessions adopted", n);
  out.push_back(reconcile);
  return out;
}

bool engine_answers(asio::io_context& io, std::string& why) {
  struct stat st {};
  const char* host = std::getenv("DOCKER_HOST");
  if (host == nullptr && ::stat("/var/run/docker.sock", &st) != 0) {
    why = "no Docker engine here (/var/run/docker.sock is missing)";
    return false;
  }
  if (host != nullptr) {
    why = "DOCKER_HOST is set: this benchmark measures the local engine only";
    return false;
  }
  try {
    rex::http::Client probe(io.get_executor(), rex::http::unix_socket_url("/var/run/docker.sock"));
    rex::http::ClientRequest r;
    r.target = "/_ping";
    const auto response = run_on(io, probe.request(std::move(r)));
    if (response.status == 200)
      return true;
    why = fmt::format("the Docker engine answers /_ping with {}", response.status);
  } catch (const std::exception& e) {
    why = std::string("the Docker engine does not answer: ") + e.what();
  }
  return false;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--runs")
      o.runs = std::stoi(value());
    else if (a == "--sessions")
      o.sessions = std::stoi(value());
    else if (a == "--image")
      o.image = value();
    else if (a == "--no-docker")
      o.docker = false;
    else if (a == "--smoke")
      o.smoke = true;
    else if (a == "--json")
      o.json = true;
    else if (a == "--strict")
      o.strict = true;
    else if (a == "--only")
      o.only = value();
    else
      throw std::invalid_argument("unknown argument: " + a);
  }
  if (o.smoke) {
    o.runs = 3;
    o.sessions = 10;
  }
  if (o.runs < 1 || o.sessions < 1)
    throw std::invalid_argument("--runs and --sessions must be at least 1");
  if (!o.only.empty() && o.only != "create" && o.only != "proxy" && o.only != "e2b" &&
      o.only != "sessions")
    throw std::invalid_argument("--only takes create, proxy, e2b or sessions, not " + o.only);
  return o;
}

int run(const Options& o) {
  raise_fd_limit();
  asio::io_context io;
  TempDir scratch;
  const fs::path storage = scratch.path / "s";
  auto child = start_gateway(storage, o);
  std::vector<Result> results;
  {
    Gateway gw(io, child->url());
    wait_ready(io, gw);

    std::string why;
    const bool docker_measured =
        o.docker && (o.wants("create") || o.wants("e2b")) && engine_answers(io, why);
    if (o.wants("create")) {
      const fs::path floor_dir = scratch.path / "floor";
      const auto [local, local_floor_ms] = alternate(
          io, o.runs, [&] { return gateway_create(gw, "local", "local"); },
          [&] { return local_floor(floor_dir); });
      Result r = ratio_result("create_local", local, local_floor_ms, 1.5);
      r.note = "create + `echo ok` vs LocalDeployment start + create_session + echo";
      results.push_back(std::move(r));
      if (docker_measured) {
        const auto [docker, docker_floor_ms] = alternate(
            io, o.runs, [&] { return gateway_create(gw, "docker", "Python3"); },
            [&] { return docker_floor(o.image); });
        Result d = ratio_result("create_docker", docker, docker_floor_ms, 1.2);
        d.note = "create + `echo ok` vs DockerDeployment start + create_session + echo";
        results.push_back(std::move(d));
      } else {
        std::fprintf(stderr, "create_docker skipped: %s\n", o.docker ? why.c_str() : "--no-docker");
      }
    }
    if (o.wants("proxy"))
      for (auto& r : proxy_figures(io, gw, child->url(), o.runs * 10))
        results.push_back(std::move(r));
    if (o.wants("e2b")) {
      std::vector<std::string> templates{"base"};
      if (docker_measured)
        templates.push_back("Python3");
      for (auto& r : e2b_figures(io, gw, child->url(), o.runs * 5, templates))
        results.push_back(std::move(r));
    }
  }
  if (o.wants("sessions"))
    for (auto& r : sessions_figures(io, storage, child, o))
      results.push_back(std::move(r));
  if (auto problem = child->stop(std::chrono::seconds(20)))
    throw std::runtime_error(*problem);
  std::error_code ec;
  if (fs::exists(storage / "sandboxes") && !fs::is_empty(storage / "sandboxes", ec))
    throw std::runtime_error("sandboxes are left in " + (storage / "sandboxes").string());

  if (o.json)
    print_json(results);
  else
    print_table(stdout, results);
  const bool errors = std::any_of(results.begin(), results.end(), [](const Result& r) {
    return r.name.starts_with("sessions_") && r.verdict == Verdict::miss;
  });
  if (errors)
    return 1;
  return o.strict && !o.smoke && any_missed(results) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rex_gateway_bench: %s\n", e.what());
    return 2;
  }
}
