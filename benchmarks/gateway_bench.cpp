// rex_gateway_bench: rex gateway (a child process, over loopback HTTP) against the floors of the
// same work done directly, measured in the same run.
//
//   rex_gateway_bench [--runs N] [--sessions N] [--image IMAGE] [--no-docker] [--smoke] [--json]
//                     [--strict] [--only create|proxy|e2b|sessions]
//
// The gateway runs with a registry of one environment of its own, `cold` (provider local,
// `spares: 0`), beside the built-in `local` (two spares). A floor sandbox is made as the local
// provider makes one (FloorSandbox): a rex-server child of this program in a directory of its
// own and a session of its own (`--unix-socket DIR/server.sock --log-level warn --max-lifetime S`,
// its token in REX_AUTH_TOKEN), started from a thread and polled the provider's way until is_alive
// answers.
//
// Figures (each gateway run alternates with a floor run, so a noisy neighbour hurts both):
//   create_local   POST /api/sessions on `local` answered 201, taking a spare (a rex-server whose
//                  notebook shell runs already: the record committed twice, the spare's
//                  sandbox.json rewritten, its deadline set with POST /lifetime), then `echo ok`
//                  in that shell (POST /api/sessions/{id}/execute, bash). Floor: a floor sandbox
//                  with its notebook shell started, as a spare is (not timed); timed, its
//                  deadline set (POST /lifetime) from one client and `echo ok` run in that shell
//                  from another, the same two requests over new connections as the gateway
//                  sends them. Target: p50 <= 1.5x.
//   create_local_cold  the same create on `cold` (no spare: the gateway starts a sandbox, then
//                  the first execute creates the notebook shell and runs `cd WORKDIR` in it
//                  before `echo ok`). Floor: a floor sandbox started, a bash session created in
//                  it and `echo ok` run there (its shell starts in the working directory, so it
//                  needs no `cd`). Target: p50 <= 1.5x.
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
//   sessions_N     N sessions (default 500) on `cold`, created 50 at a time, each running `echo
//                  ok`, all alive at once; then the gateway killed with SIGKILL and started
//                  again: the time to /readyz 200 (reconciling all N); then every session
//                  destroyed. Target: zero errors. Then the floor: N floor sandboxes, 50 at a
//                  time, each with a bash session that runs `echo ok`, all alive at once.
//                  Reported beside it:
//     sessions_N_create_and_use  the time to create and use all N, the gateway's against the
//                  floor's.
//     sessions_N_kib_per_session  the memory of a whole session: the gateway's growth with the N
//                  sessions plus every process of their sandboxes (each rex-server and all its
//                  descendants: the shell and whatever runs in it), as PSS (smaps_rollup: a page
//                  shared by k processes counts 1/k to each, so the static server's text and
//                  bash's libraries are not counted N times), divided by N; against the floor
//                  sandboxes' processes, the same way. Files and kernel memory (ptys, sockets,
//                  page tables) are not counted on either side.
//     gateway_kib_per_session  the gateway process alone: its RSS with N sessions less its RSS
//                  before, divided by N.
// Neither side counts destroying what it made. Needs the rex executable (REX_CLI_PATH) and the
// rex-server its local sandboxes run (beside it); the docker figure needs a running engine and
// the image (scripts/common.sh: rex_docker_setup) and is skipped, saying why, without one.
// --smoke: 3 runs, 10 sessions; exits 0 even when a target misses (an error still fails).
// --only: one group of figures (create_local, create_local_cold and create_docker;
// proxy_command; the e2b figures; the sessions figures).

#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/core/random.hpp>
#include <rex/gateway/provider.hpp>
#include <rex/gateway/store.hpp>
#include <rex/http/client.hpp>
#include <rex/http/url.hpp>
#include <rex/protocol/actions.hpp>
#include <rex/protocol/session.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/core.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "core/offload.hpp"
#include "core/spawn.hpp"
#include "core/unique_fd.hpp"
#include "gateway/notebook.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
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

// The gateway's registry: one environment beside the built-in ones, `cold`, on the local
// provider with no spares, so that each create on it starts a sandbox (docs/gateway.md).
fs::path write_registry(const fs::path& dir) {
  fs::create_directories(dir / "environments");
  std::ofstream out(dir / "environments" / "cold.yaml");
  out << "name: cold\n"
         "description: the local provider without spares (rex_gateway_bench)\n"
         "provider: local\n"
         "spares: 0\n";
  out.flush();
  if (!out)
    throw std::runtime_error("cannot write the registry in " + dir.string());
  return dir;
}

// `rex gateway` on 127.0.0.1 (a port of its choosing) over `storage`, with `registry`.
std::unique_ptr<ChildServer> start_gateway(const fs::path& storage, const fs::path& registry,
                                           const Options& o) {
  ChildServerOptions options;
  options.capture_stderr = true;  // its log, where the listening line is
  options.start_limit = std::chrono::seconds(60);
  return std::make_unique<ChildServer>(
      "rex gateway",
      std::vector<std::string>{REX_CLI_PATH, "gateway", "--listen", "127.0.0.1:0", "--storage",
                               storage.string(), "--registry", registry.string(), "--python-image",
                               o.image},
      options);
}

asio::awaitable<void> pause(std::chrono::microseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(d);
  co_await timer.async_wait(asio::use_awaitable);
}

// --- sandboxes made without the gateway -------------------------------------------------------

// A spare's own deadline as the local provider starts one (local_provider.cpp, kSpareLifetime).
constexpr double kSpareLifetime = 3600;
// A session's deadline as the gateway sets it by default: its max_lifetime (a day) plus its
// margin of 60 s (gateway_routes.cpp, create).
constexpr double kSessionLifetime = 86400 + 60;
// The notebook's shell, where the gateway's execute runs bash cells.
const std::string kNotebookShell(rex::gateway::kNotebookShell);

// The rex-server the gateway's local sandboxes run: it takes find_rex_server(""), from the rex
// executable, which looks at $REX_SERVER_PATH, then beside itself, then in this build.
const std::string& sandbox_server_path() {
  static const std::string path = [] {
    const char* env = std::getenv("REX_SERVER_PATH");
    if (env != nullptr && *env != '\0')
      return std::string(env);
    const fs::path beside = fs::path(REX_CLI_PATH).parent_path() / "rex-server";
    if (::access(beside.c_str(), X_OK) == 0)
      return beside.string();
    return rex::find_rex_server("");
  }();
  return path;
}

// Starts `args` as the local provider starts a sandbox's server (local_provider.cpp,
// start_server: the same spawn): in a session of its own, stdin /dev/null, stdout and stderr
// appended to `log`, in `cwd`, with `env` as its environment; returns once it has exec'd. Its
// pid; it is a child of this process.
pid_t spawn_in_session(std::vector<std::string> args, std::vector<std::string> env,
                       const std::string& log, const std::string& cwd) {
  const rex::detail::UniqueFd out(
      ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (out.get() < 0)
    throw std::system_error(errno, std::generic_category(), "cannot open " + log);
  rex::detail::SpawnOptions options;
  options.argv = std::move(args);
  options.env = std::move(env);
  options.cwd = cwd;
  options.stdout_fd = out.get();
  options.stderr_fd = out.get();
  options.new_session = true;
  const rex::detail::SpawnedChild child = rex::detail::spawn_process(options);
  const rex::detail::UniqueFd pidfd(child.pidfd);  // exits are seen by waitpid here
  return child.pid;
}

// A sandbox made without the gateway, as its local provider makes one (local_provider.cpp,
// start_sandbox): a directory of its own with work/ in it; rex-server started there from a
// thread (`--unix-socket DIR/server.sock --log-level warn --max-lifetime S`, in a session of its
// own, its output in DIR/server.log, REX_SANDBOX and REX_AUTH_TOKEN set); then polled as the
// provider polls (the socket's existence, then is_alive, from 0.2 ms doubling up to 5 ms) until
// it answers. What the provider does besides, for its own records (sandbox.json written twice,
// the process looked up in /proc), is not done. Ended as the provider ends one: SIGTERM, and
// SIGKILL when it is still there 10 s later; its directory is removed.
class FloorSandbox {
 public:
  explicit FloorSandbox(fs::path dir) : dir_(std::move(dir)) {}
  ~FloorSandbox() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  FloorSandbox(const FloorSandbox&) = delete;
  FloorSandbox& operator=(const FloorSandbox&) = delete;

  pid_t pid() const { return pid_; }
  std::string working_dir() const { return (dir_ / "work").string(); }

  rex::RemoteRuntimeConfig client() const {
    rex::RemoteRuntimeConfig rc;
    rc.url = rex::http::unix_socket_url(socket_);
    rc.auth_token = token_;
    return rc;
  }

  asio::awaitable<void> start(asio::thread_pool& starter, double max_lifetime) {
    std::error_code ec;
    if (!fs::create_directory(dir_, ec))
      throw std::runtime_error("cannot create " + dir_.string());
    ::chmod(dir_.c_str(), 0700);
    fs::create_directories(dir_ / "work");
    socket_ = (dir_ / "server.sock").string();
    token_ = rex::random_hex(16);
    std::vector<std::string> args{sandbox_server_path(),
                                  "--unix-socket",
                                  socket_,
                                  "--log-level",
                                  "warn",
                                  "--max-lifetime",
                                  fmt::format("{}", max_lifetime)};
    std::map<std::string, std::string> env_map = rex::detail::current_environment();
    env_map["REX_SANDBOX"] = dir_.filename().string();
    env_map["REX_AUTH_TOKEN"] = token_;
    const std::vector<std::string> env = rex::detail::environment_entries(env_map);
    const std::string log = (dir_ / "server.log").string();
    const std::string cwd = working_dir();
    auto spawn = [args, env, log, cwd] { return spawn_in_session(args, env, log, cwd); };
    pid_ = co_await rex::detail::offload(starter, co_await asio::this_coro::executor,
                                         std::move(spawn));

    rex::RemoteRuntimeConfig rc = client();
    rc.is_alive_timeout = std::chrono::seconds(1);
    rex::RemoteRuntime runtime(co_await asio::this_coro::executor, rc);
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    std::chrono::microseconds delay(200);
    while (true) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("rex-server exited at start: " + log_text());
      }
      if (fs::exists(socket_)) {
        const rex::IsAliveResponse alive = co_await runtime.is_alive();
        if (alive.is_alive)
          break;
      }
      if (Clock::now() >= give_up)
        throw std::runtime_error("rex-server did not answer within 20 s: " + log_text());
      co_await pause(delay);
      delay = std::min<std::chrono::microseconds>(delay * 2, std::chrono::milliseconds(5));
    }
  }

  // SIGTERM: the server closes its sessions and exits.
  void terminate() {
    if (pid_ > 0)
      ::kill(pid_, SIGTERM);
  }

  // After terminate(): reaps the server (SIGKILL after 10 s) and removes the directory.
  void wait_ended() {
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (pid_ > 0) {
      const pid_t r = ::waitpid(pid_, nullptr, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) {
        pid_ = -1;
        break;
      }
      if (Clock::now() > give_up) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void stop() {
    terminate();
    wait_ended();
  }

 private:
  std::string log_text() const {
    std::ifstream in(dir_ / "server.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str().substr(0, 2000);
  }

  fs::path dir_;
  std::string socket_;
  std::string token_;
  pid_t pid_ = -1;
};

// The notebook's shell created as the first bash cell creates it, without the `cd` (a server's
// shells start in its working directory, the sandbox's).
asio::awaitable<void> create_notebook_shell(rex::Runtime& runtime) {
  rex::CreateBashSessionRequest create;
  create.session = kNotebookShell;
  create.startup_timeout = 10;
  (void)co_await runtime.create_session(std::move(create));
}

// `echo ok` as the gateway's execute runs a bash cell (notebook.cpp, run_bash): in the notebook's
// shell, with the cell's default timeout of an hour, check "silent".
asio::awaitable<void> echo_in_notebook_shell(rex::Runtime& runtime) {
  rex::BashAction echo;
  echo.session = kNotebookShell;
  echo.command = "echo ok";
  echo.timeout = 3600;
  echo.check = "silent";
  const rex::BashObservation seen = co_await runtime.run_in_session(std::move(echo));
  if (seen.output != "ok" && seen.output != "ok\n")
    throw std::runtime_error("echo answered '" + seen.output + "'");
}

// --- process memory ---------------------------------------------------------------------------

// A process's proportional set size (Pss in /proc/PID/smaps_rollup), in KiB: its resident pages,
// each shared page divided by the number of processes that map it. -1 when it cannot be read.
long pss_kib(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/smaps_rollup", pid));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Pss:"))
      return std::strtol(line.c_str() + 4, nullptr, 10);
  }
  return -1;
}

// Every live process's children, by the parent in /proc/PID/stat.
std::multimap<pid_t, pid_t> process_children() {
  std::multimap<pid_t, pid_t> children;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    if (!std::getline(in, line))
      continue;
    const auto close = line.rfind(')');  // after the command, which may hold anything
    if (close == std::string::npos || close + 2 >= line.size())
      continue;
    std::istringstream fields(line.substr(close + 2));
    char state = 0;
    long parent = 0;
    if (fields >> state >> parent)
      children.emplace(static_cast<pid_t>(parent), static_cast<pid_t>(std::stol(name)));
  }
  return children;
}

struct TreeMemory {
  long pss_kib = 0;
  int processes = 0;  // whose PSS was read
  int roots_missing = 0;
};

// The PSS of each root and all its descendants (a sandbox: its rex-server, the shells it
// started and what runs in them), summed.
TreeMemory tree_pss(const std::vector<pid_t>& roots) {
  const std::multimap<pid_t, pid_t> children = process_children();
  const std::set<pid_t> root_set(roots.begin(), roots.end());
  TreeMemory m;
  std::set<pid_t> seen;
  std::vector<pid_t> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (!seen.insert(pid).second)
      continue;
    const long kib = pss_kib(pid);
    if (kib >= 0) {
      m.pss_kib += kib;
      ++m.processes;
    } else if (root_set.contains(pid)) {
      ++m.roots_missing;
    }
    const auto [first, last] = children.equal_range(pid);
    for (auto it = first; it != last; ++it)
      todo.push_back(it->second);
  }
  return m;
}

// The pid of a local sandbox's server, from the sandbox.json in its directory; 0 when unknown.
pid_t sandbox_server_pid(const fs::path& sandbox_dir) {
  std::ifstream in(sandbox_dir / "sandbox.json");
  std::stringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  const json::value v = json::parse(text.str(), ec);
  if (ec || !v.is_object() || !v.as_object().contains("pid"))
    return 0;
  return static_cast<pid_t>(v.as_object().at("pid").to_number<long>());
}

// The pids of the servers of every local sandbox under `root` (sessions' and spares').
std::vector<pid_t> sandbox_server_pids(const fs::path& root) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (const pid_t pid = sandbox_server_pid(entry.path()); pid > 0)
      pids.push_back(pid);
  }
  return pids;
}

// Reaps the sandbox servers that the killed gateway left to this process (a subreaper: see
// run()) once they have ended, waiting up to 10 s in all. A pid that is not a child of this
// process is skipped.
void reap_orphans(const std::vector<pid_t>& pids) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  for (const pid_t pid : pids) {
    while (::waitpid(pid, nullptr, WNOHANG) == 0 && Clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
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

// Before each timed run of the local figures: 20 ms for what the last run left behind (the
// gateway refilling its spares, a stopped server's shells ending) to finish, on both sides.
constexpr std::chrono::milliseconds kQuiet{20};

// A create and the first `echo ok` through the gateway (its destroy is not timed). `spares`, when
// given, counts the creates that took a spare (a spare's id starts with "w": local_provider.cpp).
asio::awaitable<double> gateway_create(Gateway& gw, std::string provider, std::string env,
                                       std::chrono::milliseconds quiet = {},
                                       int* spares = nullptr) {
  if (quiet.count() > 0)
    co_await pause(quiet);
  const auto t0 = Clock::now();
  const json::object rec = co_await gw.create(provider, env);
  const std::string id(rec.at("session_id").as_string());
  co_await gw.echo(id);
  const double ms = ms_since(t0);
  const std::string sandbox(rec.at("sandbox_id").as_string());
  if (spares != nullptr && sandbox.starts_with('w'))
    ++*spares;
  co_await gw.destroy(id);
  co_return ms;
}

// create_local's floor: the sandbox's side of a create that takes a spare, without the gateway.
// Made as a spare is, not timed: a floor sandbox (its deadline the spare's hour) and its
// notebook shell started in its working directory. Timed: its deadline set to a session's
// (POST /lifetime) from one new client, as the provider's take_spare sends it, and `echo ok` run
// in the notebook's shell from another, as the session's first execute sends it.
asio::awaitable<double> spare_floor(fs::path dir, asio::thread_pool& starter) {
  const auto ex = co_await asio::this_coro::executor;
  FloorSandbox box(std::move(dir));
  co_await box.start(starter, kSpareLifetime);
  {
    rex::RemoteRuntime setup(ex, box.client());
    // As the local provider starts a spare's (notebook.hpp).
    (void)co_await rex::gateway::start_notebook_shell(setup, box.working_dir());
  }
  co_await pause(kQuiet);
  double ms = 0;
  {
    const auto t0 = Clock::now();
    rex::RemoteRuntime provider(ex, box.client());
    co_await provider.set_max_lifetime(kSessionLifetime);
    rex::RemoteRuntime session(ex, box.client());
    co_await echo_in_notebook_shell(session);
    ms = ms_since(t0);
  }
  box.stop();
  co_return ms;
}

// create_local_cold's floor: a sandbox made and used without the gateway. Timed: a floor sandbox
// started (its deadline a session's), a bash session created in it and `echo ok` run there, from
// a client of its own, as the session's first execute sends them. Its end is not timed.
asio::awaitable<double> cold_floor(fs::path dir, asio::thread_pool& starter) {
  const auto ex = co_await asio::this_coro::executor;
  FloorSandbox box(std::move(dir));
  co_await pause(kQuiet);
  double ms = 0;
  {
    const auto t0 = Clock::now();
    co_await box.start(starter, kSessionLifetime);
    rex::RemoteRuntime session(ex, box.client());
    co_await create_notebook_shell(session);
    co_await echo_in_notebook_shell(session);
    ms = ms_since(t0);
  }
  box.stop();
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
                                  const fs::path& storage, int runs) {
  const json::object rec = run_on(io, gw.create("local", "local"));
  const std::string id(rec.at("session_id").as_string());
  // The record's url names the sandbox's socket.
  const std::string sandbox_url(rec.at("url").as_string());
  run_on(io, gw.call("POST", "/api/sessions/" + id + "/swerex/create_session",
                     R"({"session": "bench"})"));
  rex::http::Client via_gateway(io.get_executor(), gateway_url);
  rex::http::Client direct(io.get_executor(), sandbox_url);
  // The sandbox's token is the gateway's secret, kept in its session record: read from the
  // gateway's database (a second connection, as the WAL journal allows).
  const std::string token = [&] {
    const rex::gateway::Store store(storage / "sessions.db");
    const auto stored = store.session(id);
    if (!stored)
      throw std::runtime_error("the gateway's database has no session " + id);
    const auto* t = stored->record.if_contains("token");
    if (t == nullptr || !t->is_string() || t->as_string().empty())
      throw std::runtime_error("the session record of " + id + " has no token");
    return std::string(t->as_string());
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

// The floor of sessions_N: `n` floor sandboxes made 50 at a time, each with a bash session that
// runs `echo ok` from a client of its own (kept, as the gateway keeps one per session), all
// alive at once. Timed: making and using them all. Then the PSS of their processes, and their
// end (not timed).
struct FloorBatch {
  double create_ms = 0;
  TreeMemory memory;
};

FloorBatch sessions_floor(asio::io_context& io, const fs::path& root, asio::thread_pool& starter,
                          int n) {
  struct Made {
    std::unique_ptr<FloorSandbox> box;
    std::unique_ptr<rex::RemoteRuntime> client;
  };
  std::vector<Made> made(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    made[static_cast<std::size_t>(i)].box =
        std::make_unique<FloorSandbox>(root / fmt::format("n{}", i));
  const auto t0 = Clock::now();
  const BatchResult batch =
      run_limited(io, n, kCreatesInFlight, [&](int i) -> asio::awaitable<void> {
        Made& m = made[static_cast<std::size_t>(i)];
        const auto ex = co_await asio::this_coro::executor;
        co_await m.box->start(starter, kSessionLifetime);
        m.client = std::make_unique<rex::RemoteRuntime>(ex, m.box->client());
        co_await create_notebook_shell(*m.client);
        co_await echo_in_notebook_shell(*m.client);
      });
  FloorBatch out;
  out.create_ms = ms_since(t0);
  std::vector<pid_t> servers;
  for (const Made& m : made) {
    if (m.box->pid() > 0)
      servers.push_back(m.box->pid());
  }
  out.memory = tree_pss(servers);
  // All told to end at once, then each waited for, as a gateway ending many sessions would.
  for (Made& m : made)
    m.box->terminate();
  for (Made& m : made)
    m.box->wait_ended();
  made.clear();
  if (batch.failed > 0)
    throw std::runtime_error(fmt::format("the floor of sessions_{}: {} of {} failed: {}", n,
                                         batch.failed, n, batch.first_error));
  return out;
}

std::vector<Result> sessions_figures(asio::io_context& io, const fs::path& storage,
                                     const fs::path& registry, std::unique_ptr<ChildServer>& child,
                                     const fs::path& floor_root, asio::thread_pool& starter,
                                     const Options& o) {
  std::vector<Result> out;
  const int n = o.sessions;
  const long rss_before = vm_rss_kib(child->pid());
  const long pss_before = pss_kib(child->pid());
  std::vector<std::string> ids(static_cast<std::size_t>(n));
  std::vector<std::string> sandboxes(static_cast<std::size_t>(n));
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
      const json::object rec = co_await gw.create("local", "cold");
      ids[static_cast<std::size_t>(i)] = std::string(rec.at("session_id").as_string());
      sandboxes[static_cast<std::size_t>(i)] = std::string(rec.at("sandbox_id").as_string());
      co_await gw.echo(ids[static_cast<std::size_t>(i)]);
    }));
  }
  const double create_ms = ms_since(t0);
  const long rss_with = vm_rss_kib(child->pid());
  const long pss_with = pss_kib(child->pid());
  // The sandboxes' own processes: each server (its pid in the sandbox's sandbox.json) and all
  // its descendants.
  std::vector<pid_t> servers;
  for (const auto& sandbox : sandboxes) {
    if (sandbox.empty())
      continue;
    if (const pid_t pid = sandbox_server_pid(storage / "sandboxes" / sandbox); pid > 0)
      servers.push_back(pid);
  }
  const TreeMemory sandbox_memory = tree_pss(servers);
  const int created = n - errors;
  if (static_cast<int>(servers.size()) != created || sandbox_memory.roots_missing > 0) {
    ++errors;
    if (first_error.empty())
      first_error = fmt::format("{} sessions created, {} sandbox servers found, {} unreadable",
                                created, servers.size(), sandbox_memory.roots_missing);
  }

  // kill -9, then a new gateway on the same storage: time to /readyz. Its sandboxes' servers
  // (the sessions' and the spares') become this process's children then.
  const std::vector<pid_t> orphans = sandbox_server_pids(storage / "sandboxes");
  child->kill();
  const auto r0 = Clock::now();
  child = start_gateway(storage, registry, o);
  double ready_ms = 0;
  double destroy_ms = 0;
  {
    Gateway gw(io, child->url());
    wait_ready(io, gw);
    ready_ms = ms_since(r0);
    const json::value listed = run_on(io, gw.call("GET", "/api/sessions?state=ready&limit=1000"));
    const auto& items = listed.as_object().at("sessions").as_array();
    const int ready = static_cast<int>(items.size());
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
    destroy_ms = ms_since(d0);
  }
  reap_orphans(orphans);

  // The floor, once the gateway's sandboxes are gone (so that no page is shared between the
  // two sides' processes).
  const FloorBatch floor = sessions_floor(io, floor_root, starter, n);

  Result all;
  all.name = fmt::format("sessions_{}", n);
  all.rex.p50 = all.rex.p99 = errors;
  all.target_text = "0 errors";
  all.verdict = errors == 0 ? Verdict::pass : Verdict::miss;
  all.note = fmt::format("created and used in {:.2f} s (floor {:.2f} s), destroyed in {:.2f} s{}",
                         create_ms / 1000, floor.create_ms / 1000, destroy_ms / 1000,
                         errors ? "; first error: " + first_error : "");
  all.extra["errors"] = errors;
  all.extra["create_seconds"] = create_ms / 1000;
  all.extra["floor_create_seconds"] = floor.create_ms / 1000;
  all.extra["destroy_seconds"] = destroy_ms / 1000;
  out.push_back(all);

  Result create_use;
  create_use.name = fmt::format("sessions_{}_create_and_use", n);
  create_use.rex.p50 = create_use.rex.p99 = create_ms;
  create_use.floor_p50 = floor.create_ms;
  create_use.ratio = floor.create_ms > 0 ? create_ms / floor.create_ms : 0;
  create_use.note = fmt::format(
      "ms to create and use all {} (50 at a time) vs {} rex-servers + session + echo", n, n);
  out.push_back(create_use);

  // Per session: the gateway's PSS growth with them plus their sandboxes' processes.
  const double gateway_growth = static_cast<double>(pss_with - pss_before);
  const double whole = (gateway_growth + static_cast<double>(sandbox_memory.pss_kib)) / n;
  const double floor_each = static_cast<double>(floor.memory.pss_kib) / n;
  Result memory;
  memory.name = fmt::format("sessions_{}_kib_per_session", n);
  memory.rex.p50 = memory.rex.p99 = whole;
  memory.floor_p50 = floor_each;
  memory.ratio = floor_each > 0 ? whole / floor_each : 0;
  memory.note = fmt::format(
      "KiB PSS: gateway growth {:.1f} + sandboxes {:.1f} ({} processes) vs {} processes",
      gateway_growth / n, static_cast<double>(sandbox_memory.pss_kib) / n, sandbox_memory.processes,
      floor.memory.processes);
  memory.extra["gateway_pss_growth_kib"] = gateway_growth;
  memory.extra["sandboxes_pss_kib"] = sandbox_memory.pss_kib;
  memory.extra["sandbox_processes"] = sandbox_memory.processes;
  memory.extra["floor_pss_kib"] = floor.memory.pss_kib;
  memory.extra["floor_processes"] = floor.memory.processes;
  out.push_back(memory);

  Result gateway_only;
  gateway_only.name = "gateway_kib_per_session";
  gateway_only.rex.p50 = gateway_only.rex.p99 = static_cast<double>(rss_with - rss_before) / n;
  gateway_only.note =
      fmt::format("the gateway alone: RSS {} KiB with {} sessions, {} KiB before (PSS {} / {} KiB)",
                  rss_with, n, rss_before, pss_with, pss_before);
  out.push_back(gateway_only);
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
  // The sandboxes that the gateway killed in sessions_N leaves behind are adopted by this
  // process, which reaps them once the next gateway has ended them; otherwise they would stay
  // zombies under an init that does not reap (as in some containers and VMs).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  asio::io_context io;
  TempDir scratch;
  const fs::path storage = scratch.path / "s";
  const fs::path registry = write_registry(scratch.path / "registry");
  // The floors' sandboxes, each in a directory of its own under this one.
  const fs::path floor_root = scratch.path / "floor";
  fs::create_directories(floor_root);
  int floor_serial = 0;
  auto floor_dir = [&](char kind) {
    return floor_root / fmt::format("{}{}", kind, floor_serial++);
  };
  // Starts the floors' servers, as the local provider's two threads start its sandboxes'.
  asio::thread_pool starter(2);
  auto child = start_gateway(storage, registry, o);
  std::vector<Result> results;
  {
    Gateway gw(io, child->url());
    wait_ready(io, gw);

    std::string why;
    const bool docker_measured =
        o.docker && (o.wants("create") || o.wants("e2b")) && engine_answers(io, why);
    if (o.wants("create")) {
      int spares = 0;
      const auto [local, local_floor_ms] = alternate(
          io, o.runs, [&] { return gateway_create(gw, "local", "local", kQuiet, &spares); },
          [&] { return spare_floor(floor_dir('a'), starter); });
      Result r = ratio_result("create_local", local, local_floor_ms, 1.5);
      r.note = fmt::format(
          "create (a spare: {} of {}) + `echo ok` vs started server + shell: /lifetime + echo",
          spares, o.runs + 1);
      r.extra["spares_taken"] = spares;
      results.push_back(std::move(r));

      int cold_spares = 0;
      const auto [cold, cold_floor_ms] = alternate(
          io, o.runs, [&] { return gateway_create(gw, "local", "cold", kQuiet, &cold_spares); },
          [&] { return cold_floor(floor_dir('c'), starter); });
      if (cold_spares > 0)
        throw std::runtime_error("a create on the environment `cold` took a spare");
      Result c = ratio_result("create_local_cold", cold, cold_floor_ms, 1.5);
      c.note = "create (no spare) + `echo ok` vs rex-server start + create_session + echo";
      results.push_back(std::move(c));
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
      for (auto& r : proxy_figures(io, gw, child->url(), storage, o.runs * 10))
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
    for (auto& r : sessions_figures(io, storage, registry, child, floor_root, starter, o))
      results.push_back(std::move(r));
  if (auto problem = child->stop(std::chrono::seconds(20)))
    throw std::runtime_error(*problem);
  std::error_code ec;
  if (fs::exists(storage / "sandboxes") && !fs::is_empty(storage / "sandboxes", ec))
    throw std::runtime_error("sandboxes are left in " + (storage / "sandboxes").string());
  if (!fs::is_empty(floor_root, ec))
    throw std::runtime_error("floor sandboxes are left in " + floor_root.string());

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
