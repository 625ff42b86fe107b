// rex_server_bench: the real rex-server executable, driven over loopback, each figure measured
// next to its floor in the same run.
//
// The server runs as a child process (the static rex-server this build made, or --server PATH)
// on 127.0.0.1 with a port the system picks and an auth token, exactly as a deployment starts
// it; it is stopped with SIGTERM at the end and must exit 0. Rex and floor samples are taken in
// alternating blocks so that a noisy neighbour hurts both alike.
//
//   rex_server_bench [--smoke] [--json] [--strict] [--only FIGURE] [--server PATH]
//                    [--swerex-python PATH] [--no-swerex] (more: --help)
//
// Figures:
//   remote_echo       run_in_session("echo hi") through RemoteRuntime (keep-alive loopback) vs
//                     LocalRuntime in this process            target: p50 <= local p50 + 0.15 ms
//   is_alive_rps      GET /is_alive on 64 keep-alive connections driven from one thread, for a
//                     few seconds, vs the same load against a minimal asio HTTP responder in a
//                     child process (server and responder pinned to one core, the load
//                     generator to another)                   target: >= 20,000 requests/s
//   connections_1000  1,000 clients, each its own RemoteRuntime on one io_context: create a
//                     session each, read the server's RSS, 10 `echo`s each, close; vs the same
//                     work on a LocalRuntime in this process  target: no errors
//   clients_N         N clients (default 10) at once, each its own RemoteRuntime: a session,
//                     5 `echo`s, close; vs the same on a LocalRuntime     target: no errors
//   python_client_echo, python_client_is_alive
//                     SWE-ReX's own Python client (swerex.runtime.remote.RemoteRuntime, a new
//                     connection per call) against rex-server: run_in_session("echo hi") vs
//                     LocalRuntime here, is_alive() vs a bare GET /is_alive on a kept-alive
//                     connection                              reported only
//
// Session teardown (--only teardown for the three; rex-server alone, no SWE-ReX side), on
// sessions td-0.. opened through a RemoteRuntime, 32 at once, and shared by the three:
//   close_session_scaling  close_session p50 of one more session (created, not timed, then
//                     closed, 60 times) with 2,000 other sessions open, vs the same with 10
//                     open                                    target: ratio <= 1.2
//   echo_during_closes  with 2,000 sessions open, `echo` p99 in one session (one client, one
//                     echo after the other) while another client closes 100 sessions, 10 at
//                     once, vs the idle echo p99 just before  target: p99 ratio <= 2
//                     (and beside it the same without rex: `echo` in a bash on a raw pty while
//                     this process ends as many shells, as many at once: the kernel's share)
//   close_all         one POST /close (RemoteRuntime::close) of 2,000 sessions, vs this process
//                     SIGKILLing and reaping 2,000 `bash -i` process groups, each in its own
//                     pty and session (what a rex session is) target: <= 2x
// The server stays up after /close with no session left (its runtime can open new ones).
//
// SWE-ReX, same run: SWE-ReX's own server (swerex.server:main, what swerex-remote runs, from the
// environment REX_SWEREX_ENV; a child process on 127.0.0.1 like rex-server) gets the same work
// where it applies, in blocks of its own in the rotation, and the table gives its p50 and
// rex p50 / SWE-ReX p50 (is_alive_rps: rex req/s / SWE-ReX req/s):
//   remote_echo       the same RemoteRuntime (rex's client) and the same bare HTTP round trip
//                     against SWE-ReX's server: only the servers differ
//   is_alive_rps      the same load generator and connections against SWE-ReX's server, pinned
//                     to the same core
//   clients_N         the same N clients against SWE-ReX's server
//   python_client_*   the same Python client against SWE-ReX's server
// SWE-ReX answers a command in ~0.1 s, so it gets --swerex-iterations samples (default 30).
// Without the environment (or with --no-swerex) the benchmark says so and measures the rest;
// SWE-ReX's own failures are reported on the figure, not counted as rex's errors.
//
// --smoke: tiny counts (50 clients, 20 teardown sessions), a few seconds; exits 0 even when a
// target misses (errors and a bad server exit still fail). --strict: exit 1 when a figure misses
// its target.
// --json: one JSON object per figure on stdout (the table then goes to stderr).

#include <rex/protocol/actions.hpp>
#include <rex/protocol/session.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/core.h>
#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "child_server.hpp"
#include "swerex.hpp"

#ifndef REX_SERVER_PATH
#error "REX_SERVER_PATH must name the rex-server executable (set by CMake)"
#endif

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using namespace rex::bench;

constexpr std::string_view kToken = "rex-server-bench-token";

// ---------------------------------------------------------------------------------------------
// CPU pinning: the server (or the floor responder) on one core, the load generator on another,
// so that both sides of the is_alive load get a whole core each and stay there.

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0)
    return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set))
      cpus.push_back(c);
  }
  return cpus;
}

cpu_set_t cpu_set_of(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int c : cpus)
    CPU_SET(c, &set);
  return set;
}

// Every thread of the process: sched_setaffinity on a pid moves only its main thread.
void pin_process(pid_t pid, const std::vector<int>& cpus) {
  const cpu_set_t set = cpu_set_of(cpus);
  const std::string dir = fmt::format("/proc/{}/task", pid);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    throw_errno("opendir " + dir);
  while (const dirent* e = ::readdir(d)) {
    const pid_t tid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (tid > 0)
      ::sched_setaffinity(tid, sizeof(set), &set);
  }
  ::closedir(d);
}

// On-CPU and run-queue-wait time of one thread so far: shows, beside a rate, whether a side
// was busy or waiting for a core that others used.
struct ThreadTimes {
  double cpu_ms = 0;
  double wait_ms = 0;
};

ThreadTimes thread_times(const std::string& schedstat_path) {
  std::ifstream in(schedstat_path);
  double run_ns = 0;
  double wait_ns = 0;
  in >> run_ns >> wait_ns;
  return {run_ns / 1e6, wait_ns / 1e6};
}

// CPU time of a whole process: the sum over its threads (schedstat counts nanoseconds, where
// /proc/PID/stat counts 10 ms ticks, too coarse for a shell that ran ten echos).
double process_cpu_ms(pid_t pid) {
  double total = 0;
  const std::string dir = fmt::format("/proc/{}/task", pid);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.')
      total += thread_times(fmt::format("{}/{}/schedstat", dir, e->d_name)).cpu_ms;
  }
  ::closedir(d);
  return total;
}

// CPU time of the bash processes that `parent` started (the sessions' shells).
double bash_children_cpu_ms(pid_t parent) {
  double total = 0;
  const std::string dir = fmt::format("/proc/{}/task", parent);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.')
      continue;
    std::ifstream children(fmt::format("{}/{}/children", dir, e->d_name));
    pid_t child = 0;
    while (children >> child) {
      std::ifstream comm_file(fmt::format("/proc/{}/comm", child));
      std::string comm;
      if (std::getline(comm_file, comm) && comm == "bash")
        total += thread_times(fmt::format("/proc/{}/schedstat", child)).cpu_ms;
    }
  }
  ::closedir(d);
  return total;
}

// The main thread of a process (rex-server's io_context thread; the responder's only thread).
std::string main_thread_schedstat(pid_t pid) {
  return fmt::format("/proc/{}/task/{}/schedstat", pid, pid);
}

void pin_this_thread(const std::vector<int>& cpus) {
  const cpu_set_t set = cpu_set_of(cpus);
  ::sched_setaffinity(0, sizeof(set), &set);
}

// ---------------------------------------------------------------------------------------------
// Floor responder (run as `rex_server_bench --serve-floor` in a child process): raw asio, one
// thread like rex-server, a canned /is_alive answer of the same size for every request header
// that arrives. It parses nothing else: the least a server can do for this load.

constexpr std::string_view kCannedResponse =
    "HTTP/1.1 200 OK\r\n"
    "Server: floor\r\n"
    "Content-Type: application/json\r\n"
    "Content-Length: 30\r\n"
    "\r\n"
    R"({"is_alive":true,"message":""})";

class FloorConnection : public std::enable_shared_from_this<FloorConnection> {
 public:
  explicit FloorConnection(tcp::socket socket) : socket_(std::move(socket)) {}

  void read() {
    socket_.async_read_some(asio::buffer(chunk_),
                            [self = shared_from_this()](boost::system::error_code ec,
                                                        std::size_t n) { self->on_read(ec, n); });
  }

 private:
  void on_read(boost::system::error_code ec, std::size_t n) {
    if (ec)
      return;  // the client closed: this connection ends
    pending_.append(chunk_.data(), n);
    int requests = 0;
    std::size_t end;
    while ((end = pending_.find("\r\n\r\n")) != std::string::npos) {
      pending_.erase(0, end + 4);
      ++requests;
    }
    if (requests == 0) {
      read();
      return;
    }
    out_.clear();
    for (int i = 0; i < requests; ++i)
      out_.append(kCannedResponse);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](boost::system::error_code wec, std::size_t) {
                        if (!wec)
                          self->read();
                      });
  }

  tcp::socket socket_;
  std::array<char, 8192> chunk_{};
  std::string pending_;
  std::string out_;
};

void floor_accept(tcp::acceptor& acceptor) {
  acceptor.async_accept([&acceptor](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted)
      return;
    if (!ec) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<FloorConnection>(std::move(socket))->read();
    }
    floor_accept(acceptor);
  });
}

int serve_floor() {
  // Ends with the benchmark, even when that is killed.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1)
    return 1;
  asio::io_context io(1);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  acceptor.listen(asio::socket_base::max_listen_connections);
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](boost::system::error_code, int) { io.stop(); });
  floor_accept(acceptor);
  fmt::print("floor responder listening on http://127.0.0.1:{}\n",
             acceptor.local_endpoint().port());
  std::fflush(stdout);
  io.run();
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Runtime operations (the same calls through a RemoteRuntime or a LocalRuntime)

rex::Action make_echo(const std::string& session, const std::string& command) {
  rex::BashAction a;
  a.command = command;
  a.session = session;
  a.timeout = 30.0;  // agents always pass one
  a.check = "raise";
  return rex::Action{std::move(a)};
}

asio::awaitable<int> create_session(rex::Runtime& rt, std::string session, double timeout) {
  rex::CreateBashSessionRequest request;
  request.session = std::move(session);
  request.startup_timeout = timeout;
  rex::CreateBashSessionResponse response = co_await rt.create_session(std::move(request));
  co_return 1;
}

asio::awaitable<int> close_session(rex::Runtime& rt, std::string session) {
  rex::CloseBashSessionRequest request;
  request.session = std::move(session);
  rex::CloseBashSessionResponse response = co_await rt.close_session(std::move(request));
  co_return 1;
}

// Whose sessions answer: rex's answer exactly what the command printed ("hi\n"); SWE-ReX's
// keep line ends around it ("\r\nhi\n\r\n\r\n"), so theirs are compared without that whitespace.
enum class Answers { rex, swerex };

bool printed(std::string_view output, std::string_view line, Answers answers) {
  if (answers == Answers::rex)
    return output.size() == line.size() + 1 && output.starts_with(line) && output.back() == '\n';
  const auto first = output.find_first_not_of(" \r\n");
  if (first == std::string_view::npos)
    return line.empty();
  const auto last = output.find_last_not_of(" \r\n");
  return output.substr(first, last - first + 1) == line;
}

// n `echo hi`s in one session, timed one by one; checks each output.
asio::awaitable<std::vector<double>> echo_block(rex::Runtime& rt, std::string session, int n,
                                                Answers answers = Answers::rex) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    rex::Action action = make_echo(session, "echo hi");
    const auto t0 = Clock::now();
    rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
    samples.push_back(ms_between(t0, Clock::now()));
    if (!printed(obs.output, "hi", answers))
      throw std::runtime_error(fmt::format("echo hi answered `{}`", obs.output));
  }
  co_return samples;
}

// Per-client counts for the many-clients figure.
struct CommandTally {
  std::vector<double> latencies;
  int errors = 0;
  std::string first_error;
};

// `commands` echos one after the other; a failed one is counted and the next one still runs.
asio::awaitable<int> echo_worker(rex::Runtime& rt, std::string session, int commands,
                                 Answers answers, CommandTally* tally) {
  for (int k = 0; k < commands; ++k) {
    const std::string command = "echo " + std::to_string(k);
    rex::Action action = make_echo(session, command);
    std::exception_ptr failure;
    const auto t0 = Clock::now();
    try {
      rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
      tally->latencies.push_back(ms_between(t0, Clock::now()));
      if (!printed(obs.output, std::to_string(k), answers))
        throw std::runtime_error(fmt::format("`{}` answered `{}`", command, obs.output));
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) {
      ++tally->errors;
      if (tally->first_error.empty())
        tally->first_error = describe(failure);
    }
  }
  co_return commands;
}

// ---------------------------------------------------------------------------------------------
// Raw Beast load: keep-alive connections, each writing a request and reading its answer in turn.

struct LoadConnection {
  explicit LoadConnection(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  beast::flat_buffer buffer;
};

struct LoadTally {
  std::uint64_t ok = 0;
  std::uint64_t errors = 0;
  std::string first_error;
  std::vector<double> latencies;
};

bhttp::request<bhttp::empty_body> is_alive_request(std::uint16_t port) {
  bhttp::request<bhttp::empty_body> req(bhttp::verb::get, "/is_alive", 11);
  req.set(bhttp::field::host, fmt::format("127.0.0.1:{}", port));
  req.set("X-API-Key", kToken);
  return req;
}

asio::awaitable<int> load_connect(LoadConnection& c, tcp::endpoint endpoint) {
  co_await c.socket.async_connect(endpoint, asio::use_awaitable);
  c.socket.set_option(tcp::no_delay(true));
  co_return 1;
}

// Requests on one connection until `until` or `max_requests`, whichever comes first; every
// answer must be 200 with the is_alive body.
asio::awaitable<int> load_loop(LoadConnection& c, const bhttp::request<bhttp::empty_body>& req,
                               Clock::time_point until, int max_requests, LoadTally* tally) {
  int done = 0;
  while (done < max_requests && Clock::now() < until) {
    const auto t0 = Clock::now();
    co_await bhttp::async_write(c.socket, req, asio::use_awaitable);
    bhttp::response<bhttp::string_body> res;
    co_await bhttp::async_read(c.socket, c.buffer, res, asio::use_awaitable);
    tally->latencies.push_back(ms_between(t0, Clock::now()));
    if (res.result() == bhttp::status::ok && res.body() == R"({"is_alive":true,"message":""})") {
      ++tally->ok;
    } else {
      ++tally->errors;
      if (tally->first_error.empty())
        tally->first_error = fmt::format("status {}: {}", res.result_int(), res.body());
    }
    ++done;
  }
  co_return done;
}

// A set of keep-alive connections to one server, reused across blocks.
class LoadClient {
 public:
  LoadClient(asio::io_context& io, std::uint16_t port, int connections)
      : io_(io), request_(is_alive_request(port)) {
    const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
    for (int i = 0; i < connections; ++i)
      conns_.push_back(std::make_unique<LoadConnection>(io));
    const BatchResult r = run_all(io, connections, [&](int i) {
      return load_connect(*conns_[static_cast<std::size_t>(i)], endpoint);
    });
    if (r.failed > 0)
      throw std::runtime_error("load client: connect failed: " + r.first_error);
  }

  struct Block {
    double rate = 0;  // answered requests over the time until the last connection's last answer
    double requests = 0;
    double ms = 0;
    ThreadTimes server;     // the server's main thread, during the block
    ThreadTimes generator;  // this thread
  };

  // Drives every connection for `seconds` against the server whose main thread is `server_pid`.
  Block run(double seconds, LoadTally& tally, pid_t server_pid) {
    const std::string server_stat = main_thread_schedstat(server_pid);
    const ThreadTimes s0 = thread_times(server_stat);
    const ThreadTimes g0 = thread_times("/proc/thread-self/schedstat");
    const auto t0 = Clock::now();
    const auto until =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    const std::uint64_t before = tally.ok + tally.errors;
    const BatchResult r = run_all(io_, static_cast<int>(conns_.size()), [&](int i) {
      return load_loop(*conns_[static_cast<std::size_t>(i)], request_, until,
                       std::numeric_limits<int>::max(), &tally);
    });
    Block b;
    b.ms = ms_between(t0, Clock::now());
    const ThreadTimes s1 = thread_times(server_stat);
    const ThreadTimes g1 = thread_times("/proc/thread-self/schedstat");
    if (r.failed > 0)
      throw std::runtime_error("load client: " + r.first_error);
    b.requests = static_cast<double>(tally.ok + tally.errors - before);
    b.rate = b.requests * 1000 / b.ms;
    b.server = {s1.cpu_ms - s0.cpu_ms, s1.wait_ms - s0.wait_ms};
    b.generator = {g1.cpu_ms - g0.cpu_ms, g1.wait_ms - g0.wait_ms};
    return b;
  }

  // One connection's round trips, timed one by one (for the echo figure's HTTP baseline).
  std::vector<double> round_trips(int n) {
    LoadTally tally;
    auto& c = *conns_.front();
    for (int i = 0; i < n; ++i)
      run_on(io_, load_loop(c, request_, Clock::time_point::max(), 1, &tally));
    if (tally.errors > 0)
      throw std::runtime_error("is_alive: " + tally.first_error);
    return tally.latencies;
  }

 private:
  asio::io_context& io_;
  bhttp::request<bhttp::empty_body> request_;
  std::vector<std::unique_ptr<LoadConnection>> conns_;
};

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  bool smoke = false;
  bool json = false;
  bool strict = false;
  bool pin = true;
  std::string only;
  std::string server = REX_SERVER_PATH;
  int echo_iterations = 1000;
  int load_connections = 64;
  double load_block_seconds = 1.0;
  int load_rounds = 4;
  int clients = 1000;
  int client_commands = 10;
  bool swerex = true;
  std::string swerex_python = REX_SWEREX_PYTHON;
  int swerex_iterations = 30;          // SWE-ReX's echo samples (remote_echo, python_client)
  int swerex_clients = 10;             // clients of the clients_N figure, each side
  int swerex_client_commands = 5;      // `echo`s per client there
  int python_client_iterations = 200;  // SWE-ReX's Python client against rex-server
  // Session teardown figures
  int teardown_sessions = 2000;  // sessions open (close_session_scaling's many, and the others)
  int teardown_few = 10;         // close_session_scaling's few
  int open_concurrency = 32;     // sessions opened at once
  int close_cycles = 60;         // close_session_scaling's closes in each state
  int close_victims = 100;       // echo_during_closes: sessions closed in each round
  int close_concurrency = 10;    // closed at once
  int idle_echos = 300;          // echo_during_closes: idle samples in each round
  int min_busy_echos = 200;      // more rounds until the busy side has this many samples
  int max_close_rounds = 4;
};

// SWE-ReX in this run: its own server (a child process) and its Python client (the driver, a
// child process), each started only when a figure needs it; `why_not` says why one is missing.
struct Swerex {
  SwerexSetup setup;
  std::unique_ptr<ChildServer> server;
  std::unique_ptr<SwerexDriver> client;
  std::string why_not_server;
  std::string why_not_client;

  // SwerexPart for a figure on SWE-ReX's server: `samples` of them, or none without it.
  SwerexPart server_part(int samples) const { return SwerexPart(server ? samples : 0); }
};

// ---------------------------------------------------------------------------------------------
// Figures

Result bench_remote_echo(asio::io_context& io, rex::LocalRuntime& local, rex::RemoteRuntime& remote,
                         const ChildServer& server, Swerex& swerex, const Options& opt) {
  const std::string session = "bench-echo";
  run_on(io, create_session(local, session, 10.0));
  run_on(io, create_session(remote, session, 10.0));
  LoadClient http_baseline(io, server.port(), 1);

  const int iterations = opt.echo_iterations;
  const int warmup = std::max(5, std::min(50, iterations / 10));
  run_on(io, echo_block(remote, session, warmup));
  run_on(io, echo_block(local, session, warmup));
  http_baseline.round_trips(warmup);

  // SWE-ReX: the same RemoteRuntime (rex's client) against SWE-ReX's server, and the same bare
  // HTTP round trip to it; samples spread over the blocks.
  SwerexPart peer = swerex.server_part(opt.swerex_iterations);
  std::unique_ptr<rex::RemoteRuntime> peer_client;
  std::unique_ptr<LoadClient> peer_http;
  std::vector<double> peer_ms, peer_http_ms;
  peer.attempt([&] {
    rex::RemoteRuntimeConfig cfg;
    cfg.url = swerex.server->url();
    cfg.auth_token = std::string(kToken);
    peer_client = std::make_unique<rex::RemoteRuntime>(io.get_executor(), cfg);
    run_on(io, create_session(*peer_client, session, 30.0));
    peer_http = std::make_unique<LoadClient>(io, swerex.server->port(), 1);
    run_on(io, echo_block(*peer_client, session, 2, Answers::swerex));
    peer_http->round_trips(2);
  });

  // Blocks of remote, local and a bare HTTP round trip (GET /is_alive on a raw keep-alive
  // connection: what HTTP over loopback to this server costs with no session work), rotating.
  std::vector<double> remote_ms, local_ms, http_ms;
  const std::string server_stat = main_thread_schedstat(server.pid());
  double server_cpu_ms = 0;  // of the server's thread during the remote blocks
  double client_cpu_ms = 0;  // of this thread during the remote blocks
  double local_cpu_ms = 0;   // of this thread during the local blocks
  const int block = 25;
  const int blocks = (iterations + block - 1) / block;
  const int sides = peer.active() ? 4 : 3;
  for (int done = 0, b = 0; done < iterations; done += block, ++b) {
    const int n = std::min(block, iterations - done);
    for (int k = 0; k < sides; ++k) {
      std::vector<double> s;
      switch ((b + k) % sides) {
        case 0: {
          const ThreadTimes before = thread_times(server_stat);
          const ThreadTimes self_before = thread_times("/proc/thread-self/schedstat");
          s = run_on(io, echo_block(remote, session, n));
          server_cpu_ms += thread_times(server_stat).cpu_ms - before.cpu_ms;
          client_cpu_ms += thread_times("/proc/thread-self/schedstat").cpu_ms - self_before.cpu_ms;
          remote_ms.insert(remote_ms.end(), s.begin(), s.end());
          break;
        }
        case 1: {
          const ThreadTimes self_before = thread_times("/proc/thread-self/schedstat");
          s = run_on(io, echo_block(local, session, n));
          local_cpu_ms += thread_times("/proc/thread-self/schedstat").cpu_ms - self_before.cpu_ms;
          local_ms.insert(local_ms.end(), s.begin(), s.end());
          break;
        }
        case 2:
          s = http_baseline.round_trips(n);
          http_ms.insert(http_ms.end(), s.begin(), s.end());
          break;
        default:
          if (const int m = spread(b, blocks, peer.samples()); m > 0) {
            peer.attempt([&] {
              s = run_on(io, echo_block(*peer_client, session, m, Answers::swerex));
              peer_ms.insert(peer_ms.end(), s.begin(), s.end());
              s = peer_http->round_trips(m);
              peer_http_ms.insert(peer_http_ms.end(), s.begin(), s.end());
            });
          }
          break;
      }
    }
  }
  run_on(io, close_session(local, session));
  run_on(io, close_session(remote, session));
  peer.attempt([&] { run_on(io, close_session(*peer_client, session)); });

  Result r;
  r.name = "remote_echo";
  r.rex = stats_of(remote_ms);
  const Stats floor = stats_of(local_ms);
  const Stats http = stats_of(http_ms);
  r.floor_p50 = floor.p50;
  r.ratio = floor.p50 > 0 ? r.rex.p50 / floor.p50 : 0;
  const double diff = r.rex.p50 - floor.p50;
  r.target = 0.15;
  r.target_text = "+<=0.15ms";
  r.verdict = diff <= 0.15 ? Verdict::pass : Verdict::miss;
  const auto per_command = [](double ms, const std::vector<double>& samples) {
    return ms * 1000 / static_cast<double>(std::max<std::size_t>(samples.size(), 1));
  };
  r.note = fmt::format(
      "remote - local p50 = {:+.3f} ms; bare HTTP round trip (GET /is_alive) p50 {:.3f} ms; CPU "
      "per command: RemoteRuntime {:.0f} us + rex-server {:.0f} us, LocalRuntime {:.0f} us "
      "(bash not counted); connections opened {}",
      diff, http.p50, per_command(client_cpu_ms, remote_ms), per_command(server_cpu_ms, remote_ms),
      per_command(local_cpu_ms, local_ms), remote.client().connections_opened());
  r.extra["diff_ms"] = diff;
  r.extra["target_diff_ms"] = 0.15;
  r.extra["samples"] = remote_ms.size();
  r.extra["floor_p99_ms"] = floor.p99;
  r.extra["http_round_trip_p50_ms"] = http.p50;
  r.extra["http_round_trip_p99_ms"] = http.p99;
  r.extra["connections_opened"] = remote.client().connections_opened();
  r.extra["client_cpu_us_per_command"] = per_command(client_cpu_ms, remote_ms);
  r.extra["server_cpu_us_per_command"] = per_command(server_cpu_ms, remote_ms);
  r.extra["floor_cpu_us_per_command"] = per_command(local_cpu_ms, local_ms);
  if (peer.report(r, peer_ms, r.rex.p50)) {
    const Stats peer_http_stats = stats_of(peer_http_ms);
    r.note += fmt::format(
        " (rex's RemoteRuntime against SWE-ReX's server); its bare HTTP round "
        "trip p50 {:.3f} ms",
        peer_http_stats.p50);
    r.extra["swerex_http_round_trip_p50_ms"] = peer_http_stats.p50;
    r.extra["swerex_http_round_trip_p99_ms"] = peer_http_stats.p99;
  }
  return r;
}

// SWE-ReX: the same load against SWE-ReX's server, pinned like the others, a block of its own in
// each round.
Result bench_is_alive_rps(asio::io_context& io, ChildServer& server, ChildServer& floor,
                          Swerex& swerex, const Options& opt) {
  // Pinned: server and responder on the last allowed core, this thread on the first.
  const std::vector<int> cpus = allowed_cpus();
  const bool pin = opt.pin && cpus.size() >= 2;
  SwerexPart peer = swerex.server_part(1);
  if (pin) {
    const std::vector<int> server_cpu{cpus.back()};
    const std::vector<int> client_cpu{cpus.front()};
    pin_process(server.pid(), server_cpu);
    pin_process(floor.pid(), server_cpu);
    peer.attempt([&] { pin_process(swerex.server->pid(), server_cpu); });
    pin_this_thread(client_cpu);
  }
  LoadClient rex_load(io, server.port(), opt.load_connections);
  LoadClient floor_load(io, floor.port(), opt.load_connections);
  LoadTally rex_tally, floor_tally, peer_tally;
  LoadTally warm;
  const double warmup = std::min(0.3, opt.load_block_seconds);
  rex_load.run(warmup, warm, server.pid());
  floor_load.run(warmup, warm, floor.pid());
  if (warm.errors > 0)
    throw std::runtime_error("is_alive warm-up: " + warm.first_error);
  std::unique_ptr<LoadClient> peer_load;
  peer.attempt([&] {
    peer_load = std::make_unique<LoadClient>(io, swerex.server->port(), opt.load_connections);
    LoadTally peer_warm;
    peer_load->run(warmup, peer_warm, swerex.server->pid());
    if (peer_warm.errors > 0)
      throw std::runtime_error("is_alive warm-up: " + peer_warm.first_error);
  });

  // Per side, per block: the rate, and per request the CPU time of the server's thread and of
  // the load generator, and the share of the block each spent waiting for a core.
  struct Side {
    std::vector<double> rate, server_cpu_us, generator_cpu_us, server_wait_pct, generator_wait_pct;
    void add(const LoadClient::Block& b) {
      rate.push_back(b.rate);
      server_cpu_us.push_back(b.server.cpu_ms * 1000 / b.requests);
      generator_cpu_us.push_back(b.generator.cpu_ms * 1000 / b.requests);
      server_wait_pct.push_back(100 * b.server.wait_ms / b.ms);
      generator_wait_pct.push_back(100 * b.generator.wait_ms / b.ms);
    }
  };
  Side rex_side, floor_side, peer_side;
  const int sides = peer.active() ? 3 : 2;
  for (int round = 0; round < opt.load_rounds; ++round) {
    for (int k = 0; k < sides; ++k) {
      switch ((round + k) % sides) {
        case 0:
          rex_side.add(rex_load.run(opt.load_block_seconds, rex_tally, server.pid()));
          break;
        case 1:
          floor_side.add(floor_load.run(opt.load_block_seconds, floor_tally, floor.pid()));
          break;
        default:
          peer.attempt([&] {
            peer_side.add(peer_load->run(opt.load_block_seconds, peer_tally, swerex.server->pid()));
            if (peer_tally.errors > 0)
              throw std::runtime_error(fmt::format("is_alive: {} errors ({})", peer_tally.errors,
                                                   peer_tally.first_error));
          });
          break;
      }
    }
  }
  if (pin) {
    pin_process(server.pid(), cpus);
    pin_process(floor.pid(), cpus);
    peer.attempt([&] { pin_process(swerex.server->pid(), cpus); });
    pin_this_thread(cpus);
  }
  if (rex_tally.errors > 0 || floor_tally.errors > 0) {
    throw std::runtime_error(fmt::format(
        "is_alive: {} errors from rex-server ({}), {} from the floor ({})", rex_tally.errors,
        rex_tally.first_error, floor_tally.errors, floor_tally.first_error));
  }

  const double rex_rate = median(rex_side.rate);
  const double floor_rate = median(floor_side.rate);
  Result r;
  r.name = "is_alive_rps";
  r.rex = stats_of(rex_tally.latencies);  // per request, under the full load
  r.floor_p50 = stats_of(floor_tally.latencies).p50;
  r.ratio = floor_rate > 0 ? rex_rate / floor_rate : 0;
  r.target = 20000;
  r.target_text = ">=20000/s";
  r.verdict = rex_rate >= 20000 ? Verdict::pass : Verdict::miss;
  r.note = fmt::format(
      "{} connections: rex {:.0f} req/s, floor {:.0f} req/s (ratio higher is better){}; CPU per "
      "request: rex-server {:.1f} us, floor responder {:.1f} us, load generator {:.1f} us (rex) / "
      "{:.1f} us (floor); waiting for a core: rex-server {:.0f}%, floor {:.0f}%, generator "
      "{:.0f}% of the time",
      opt.load_connections, rex_rate, floor_rate,
      pin ? "; servers pinned to one core, generator to another" : "; not pinned",
      median(rex_side.server_cpu_us), median(floor_side.server_cpu_us),
      median(rex_side.generator_cpu_us), median(floor_side.generator_cpu_us),
      median(rex_side.server_wait_pct), median(floor_side.server_wait_pct),
      median(rex_side.generator_wait_pct));
  r.extra["server_cpu_us_per_request"] = median(rex_side.server_cpu_us);
  r.extra["floor_cpu_us_per_request"] = median(floor_side.server_cpu_us);
  r.extra["generator_cpu_us_per_request"] = median(rex_side.generator_cpu_us);
  r.extra["floor_generator_cpu_us_per_request"] = median(floor_side.generator_cpu_us);
  r.extra["server_wait_pct"] = median(rex_side.server_wait_pct);
  r.extra["floor_wait_pct"] = median(floor_side.server_wait_pct);
  r.extra["generator_wait_pct"] = median(rex_side.generator_wait_pct);
  r.extra["requests_per_s"] = rex_rate;
  r.extra["floor_requests_per_s"] = floor_rate;
  r.extra["target_requests_per_s"] = 20000;
  r.extra["connections"] = opt.load_connections;
  r.extra["requests"] = rex_tally.ok;
  r.extra["floor_requests"] = floor_tally.ok;
  r.extra["pinned"] = pin;
  r.extra["higher_is_better"] = true;
  if (SwerexFigure* f = peer.report(r, peer_tally.latencies, r.rex.p50)) {
    const double peer_rate = median(peer_side.rate);
    f->ratio = peer_rate > 0 ? rex_rate / peer_rate : 0;  // rates: higher is better
    r.note += fmt::format(
        " per request under the load; SWE-ReX's server {:.0f} req/s, {:.1f} us "
        "of its CPU per request",
        peer_rate, median(peer_side.server_cpu_us));
    r.extra["swerex_requests_per_s"] = peer_rate;
    r.extra["swerex_cpu_us_per_request"] = median(peer_side.server_cpu_us);
  }
  return r;
}

// What one run of the many-clients work measured, on either side.
struct ManyRun {
  BatchResult created, echoed, closed;
  CommandTally tally;
  double create_ms = 0, echo_ms = 0, close_ms = 0, total_ms = 0;
  // CPU time spent during the echo phase, in milliseconds.
  double self_cpu_ms = 0;    // this process: the clients (or the LocalRuntime floor)
  double server_cpu_ms = 0;  // rex-server (0 on the floor)
  double bash_cpu_ms = 0;    // the sessions' shells
};

// `runtimes[i % size]` serves client i: one runtime per client on the remote side, one shared
// runtime on the local side.
// `shell_parent` is the process whose bash children are the sessions; `server` (or -1) a
// server process whose CPU time counts too.
ManyRun run_many(asio::io_context& io, const std::vector<rex::Runtime*>& runtimes, int n,
                 int commands, Answers answers, const std::function<void()>& after_create,
                 Clock::time_point t0, pid_t shell_parent, pid_t server) {
  ManyRun m;
  auto rt = [&](int i) -> rex::Runtime& {
    return *runtimes[static_cast<std::size_t>(i) % runtimes.size()];
  };
  auto name = [](int i) { return "client-" + std::to_string(i); };
  const auto c0 = Clock::now();
  m.created = run_all(io, n, [&](int i) { return create_session(rt(i), name(i), 120.0); });
  const auto c1 = Clock::now();
  after_create();
  const double self0 = process_cpu_ms(::getpid());
  const double server0 = server > 0 ? process_cpu_ms(server) : 0;
  const double bash0 = bash_children_cpu_ms(shell_parent);
  const auto e0 = Clock::now();
  m.echoed = run_all(
      io, n, [&](int i) { return echo_worker(rt(i), name(i), commands, answers, &m.tally); });
  const auto e1 = Clock::now();
  m.self_cpu_ms = process_cpu_ms(::getpid()) - self0;
  m.server_cpu_ms = server > 0 ? process_cpu_ms(server) - server0 : 0;
  m.bash_cpu_ms = bash_children_cpu_ms(shell_parent) - bash0;
  m.closed = run_all(io, n, [&](int i) { return close_session(rt(i), name(i)); });
  const auto e2 = Clock::now();
  m.create_ms = ms_between(c0, c1);
  m.echo_ms = ms_between(e0, e1);
  m.close_ms = ms_between(e1, e2);
  m.total_ms = ms_between(t0, e2);
  return m;
}

int errors_of(const ManyRun& m) {
  return m.created.failed + m.echoed.failed + m.tally.errors + m.closed.failed;
}

std::string first_error_of(const ManyRun& m) {
  for (const std::string* e : {&m.created.first_error, &m.echoed.first_error, &m.tally.first_error,
                               &m.closed.first_error}) {
    if (!e->empty())
      return *e;
  }
  return {};
}

Result bench_connections(asio::io_context& io, rex::LocalRuntime& local, const ChildServer& server,
                         const Options& opt, int& errors) {
  const int n = opt.clients;
  const long rss_idle = vm_rss_kib(server.pid());
  long rss_sessions = -1;

  // rex: a RemoteRuntime per client, each with its own connection, all on this io_context.
  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<rex::RemoteRuntime>> clients;
  std::vector<rex::Runtime*> remote_ptrs;
  rex::RemoteRuntimeConfig cfg;
  cfg.url = server.url();
  cfg.auth_token = std::string(kToken);
  for (int i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<rex::RemoteRuntime>(io.get_executor(), cfg));
    remote_ptrs.push_back(clients.back().get());
  }
  // Each RemoteRuntime keeps a thread for file work, used or not.
  const long client_threads = status_field(::getpid(), "Threads:");
  const ManyRun rex_run = run_many(
      io, remote_ptrs, n, opt.client_commands, Answers::rex,
      [&] { rss_sessions = vm_rss_kib(server.pid()); }, t0, server.pid(), server.pid());
  std::uint64_t connections = 0;
  for (const auto& c : clients)
    connections += c->client().connections_opened();
  clients.clear();
  const long rss_after = vm_rss_kib(server.pid());

  // Floor: the same sessions and commands on a LocalRuntime in this process.
  const std::vector<rex::Runtime*> local_ptrs{&local};
  const ManyRun floor_run = run_many(
      io, local_ptrs, n, opt.client_commands, Answers::rex, [] {}, Clock::now(), ::getpid(), -1);

  const int rex_errors = errors_of(rex_run);
  const int floor_errors = errors_of(floor_run);
  errors += rex_errors + floor_errors;
  const Stats floor_cmd = stats_of(floor_run.tally.latencies);
  const double kib_per_session =
      rss_sessions > 0 && rss_idle > 0 ? static_cast<double>(rss_sessions - rss_idle) / n : 0;

  Result r;
  r.name = fmt::format("connections_{}", n);
  r.rex = stats_of(rex_run.tally.latencies);
  r.floor_p50 = floor_cmd.p50;
  r.ratio = floor_cmd.p50 > 0 ? r.rex.p50 / floor_cmd.p50 : 0;
  r.target = 0;
  r.target_text = "0 errors";
  r.verdict = rex_errors == 0 ? Verdict::pass : Verdict::miss;
  const double commands = static_cast<double>(n) * opt.client_commands;
  auto us_per_command = [&](double ms) { return ms * 1000 / commands; };
  r.note = fmt::format(
      "errors {}; server RSS {:.1f} MiB with {} sessions ({:.1f} KiB/session over idle {:.1f} "
      "MiB); wall {:.2f} s (create {:.2f}, {}x{} echo {:.2f}, close {:.2f}), floor {:.2f} s "
      "(create {:.2f}, echo {:.2f}, close {:.2f}); connections opened {}, client threads {}; "
      "CPU per command: clients {:.0f} us, rex-server {:.0f} us, bash {:.0f} us; floor: "
      "LocalRuntime {:.0f} us, bash {:.0f} us",
      rex_errors, rss_sessions / 1024.0, n, kib_per_session, rss_idle / 1024.0,
      rex_run.total_ms / 1000, rex_run.create_ms / 1000, n, opt.client_commands,
      rex_run.echo_ms / 1000, rex_run.close_ms / 1000, floor_run.total_ms / 1000,
      floor_run.create_ms / 1000, floor_run.echo_ms / 1000, floor_run.close_ms / 1000, connections,
      client_threads, us_per_command(rex_run.self_cpu_ms), us_per_command(rex_run.server_cpu_ms),
      us_per_command(rex_run.bash_cpu_ms), us_per_command(floor_run.self_cpu_ms),
      us_per_command(floor_run.bash_cpu_ms));
  if (rex_errors > 0)
    r.note += "; first error: " + first_error_of(rex_run);
  if (floor_errors > 0)
    r.note += "; floor error: " + first_error_of(floor_run);
  r.extra["clients"] = n;
  r.extra["commands_per_client"] = opt.client_commands;
  r.extra["errors"] = rex_errors;
  r.extra["floor_errors"] = floor_errors;
  r.extra["commands_answered"] = rex_run.tally.latencies.size();
  r.extra["connections_opened"] = connections;
  r.extra["server_rss_idle_kib"] = rss_idle;
  r.extra["server_rss_sessions_kib"] = rss_sessions;
  r.extra["server_rss_after_close_kib"] = rss_after;
  r.extra["server_rss_per_session_kib"] = kib_per_session;
  r.extra["wall_ms"] = rex_run.total_ms;
  r.extra["create_ms"] = rex_run.create_ms;
  r.extra["echo_ms"] = rex_run.echo_ms;
  r.extra["close_ms"] = rex_run.close_ms;
  r.extra["floor_p99_ms"] = floor_cmd.p99;
  r.extra["floor_wall_ms"] = floor_run.total_ms;
  r.extra["floor_create_ms"] = floor_run.create_ms;
  r.extra["floor_echo_ms"] = floor_run.echo_ms;
  r.extra["floor_close_ms"] = floor_run.close_ms;
  r.extra["client_process_threads"] = client_threads;
  r.extra["client_cpu_us_per_command"] = us_per_command(rex_run.self_cpu_ms);
  r.extra["server_cpu_us_per_command"] = us_per_command(rex_run.server_cpu_ms);
  r.extra["bash_cpu_us_per_command"] = us_per_command(rex_run.bash_cpu_ms);
  r.extra["floor_cpu_us_per_command"] = us_per_command(floor_run.self_cpu_ms);
  r.extra["floor_bash_cpu_us_per_command"] = us_per_command(floor_run.bash_cpu_ms);
  return r;
}

// N clients at once against rex-server, each its own RemoteRuntime: create a session, C `echo`s,
// close; the floor does the same on one LocalRuntime in this process, SWE-ReX's side against
// SWE-ReX's server with the same clients (rex's RemoteRuntime). Few clients, since SWE-ReX's
// server runs one command at a time.
Result bench_clients(asio::io_context& io, rex::LocalRuntime& local, const ChildServer& server,
                     Swerex& swerex, const Options& opt, int& errors) {
  const int n = opt.swerex_clients;
  const int c = opt.swerex_client_commands;
  auto remote_run = [&](const ChildServer& target, Answers answers) {
    rex::RemoteRuntimeConfig cfg;
    cfg.url = target.url();
    cfg.auth_token = std::string(kToken);
    std::vector<std::unique_ptr<rex::RemoteRuntime>> clients;
    std::vector<rex::Runtime*> ptrs;
    for (int i = 0; i < n; ++i) {
      clients.push_back(std::make_unique<rex::RemoteRuntime>(io.get_executor(), cfg));
      ptrs.push_back(clients.back().get());
    }
    return run_many(
        io, ptrs, n, c, answers, [] {}, Clock::now(), target.pid(), target.pid());
  };
  const ManyRun rex_run = remote_run(server, Answers::rex);
  const std::vector<rex::Runtime*> local_ptrs{&local};
  const ManyRun floor_run = run_many(
      io, local_ptrs, n, c, Answers::rex, [] {}, Clock::now(), ::getpid(), -1);
  SwerexPart peer = swerex.server_part(1);
  ManyRun peer_run;
  peer.attempt([&] {
    peer_run = remote_run(*swerex.server, Answers::swerex);
    if (errors_of(peer_run) > 0)
      throw std::runtime_error(
          fmt::format("{} errors; first: {}", errors_of(peer_run), first_error_of(peer_run)));
  });

  const int rex_errors = errors_of(rex_run);
  const int floor_errors = errors_of(floor_run);
  errors += rex_errors + floor_errors;
  const double commands = static_cast<double>(n) * c;
  auto rate = [&](const ManyRun& m) { return m.echo_ms > 0 ? commands * 1000 / m.echo_ms : 0; };
  Result r;
  r.name = fmt::format("clients_{}", n);
  r.rex = stats_of(rex_run.tally.latencies);
  r.floor_p50 = stats_of(floor_run.tally.latencies).p50;
  r.ratio = r.floor_p50 > 0 ? r.rex.p50 / r.floor_p50 : 0;
  r.target = 0;
  r.target_text = "0 errors";
  r.verdict = rex_errors == 0 ? Verdict::pass : Verdict::miss;
  r.note = fmt::format(
      "{} clients x {} echo, per command; rex-server {:.0f} cmd/s (create {:.0f} ms, echo {:.0f} "
      "ms, close {:.0f} ms), floor {:.0f} cmd/s; errors {}",
      n, c, rate(rex_run), rex_run.create_ms, rex_run.echo_ms, rex_run.close_ms, rate(floor_run),
      rex_errors);
  if (rex_errors > 0)
    r.note += "; first error: " + first_error_of(rex_run);
  if (floor_errors > 0)
    r.note += "; floor error: " + first_error_of(floor_run);
  r.extra["clients"] = n;
  r.extra["commands_per_client"] = c;
  r.extra["errors"] = rex_errors;
  r.extra["floor_errors"] = floor_errors;
  r.extra["commands_per_s"] = rate(rex_run);
  r.extra["floor_commands_per_s"] = rate(floor_run);
  if (peer.report(r, peer_run.tally.latencies, r.rex.p50)) {
    r.note += fmt::format(
        " per command; SWE-ReX's server {:.1f} cmd/s (create {:.0f} ms, echo "
        "{:.0f} ms, close {:.0f} ms)",
        rate(peer_run), peer_run.create_ms, peer_run.echo_ms, peer_run.close_ms);
    r.extra["swerex_commands_per_s"] = rate(peer_run);
    r.extra["swerex_create_ms"] = peer_run.create_ms;
    r.extra["swerex_echo_ms"] = peer_run.echo_ms;
    r.extra["swerex_close_ms"] = peer_run.close_ms;
  }
  return r;
}

// SWE-ReX's own Python client (swerex.runtime.remote.RemoteRuntime, a new connection per call),
// driven by swerex_driver.py, against rex-server and against SWE-ReX's server, in blocks rotating
// with the floors: `echo hi` (floor: LocalRuntime in this process) and is_alive (floor: a bare
// GET /is_alive on a kept-alive connection to rex-server). Its failures against rex-server are
// rex's errors: the stock client must work with rex-server.
std::vector<Result> bench_python_client(asio::io_context& io, rex::LocalRuntime& local,
                                        const ChildServer& server, Swerex& swerex,
                                        const Options& opt) {
  SwerexDriver& client = *swerex.client;
  const std::string session = "bench-py-floor";
  run_on(io, create_session(local, session, 10.0));
  LoadClient http_baseline(io, server.port(), 1);
  auto py_calls = [&](const ChildServer& target, std::string_view op, int n) {
    return client.samples(
        {{"op", op}, {"url", target.url()}, {"token", std::string(kToken)}, {"n", n}});
  };
  // Warm-up; the driver creates its sessions here.
  py_calls(server, "echo", 3);
  py_calls(server, "is_alive", 3);
  run_on(io, echo_block(local, session, 10));
  http_baseline.round_trips(10);
  SwerexPart peer = swerex.server_part(opt.swerex_iterations);
  peer.attempt([&] {
    py_calls(*swerex.server, "echo", 1);
    py_calls(*swerex.server, "is_alive", 1);
  });

  const int iterations = opt.python_client_iterations;
  const int blocks = std::max(1, std::min(10, iterations));
  std::vector<double> echo_ms, peer_echo_ms, local_ms, alive_ms, peer_alive_ms, http_ms;
  auto append = [](std::vector<double>& to, const std::vector<double>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  for (int b = 0; b < blocks; ++b) {
    const int n = spread(b, blocks, iterations);
    const int m = spread(b, blocks, peer.samples());
    for (int k = 0; k < 6; ++k) {
      switch ((b + k) % 6) {
        case 0:
          append(echo_ms, py_calls(server, "echo", n));
          break;
        case 1:
          append(local_ms, run_on(io, echo_block(local, session, n)));
          break;
        case 2:
          append(alive_ms, py_calls(server, "is_alive", n));
          break;
        case 3:
          append(http_ms, http_baseline.round_trips(n));
          break;
        case 4:
          if (m > 0)
            peer.attempt([&] { append(peer_echo_ms, py_calls(*swerex.server, "echo", m)); });
          break;
        default:
          if (m > 0)
            peer.attempt([&] { append(peer_alive_ms, py_calls(*swerex.server, "is_alive", m)); });
          break;
      }
    }
  }
  run_on(io, close_session(local, session));

  // Reported only (no target): SWE-ReX's client against rex-server, beside its floor, with the
  // same client against SWE-ReX's server when that ran.
  auto reported = [&peer](std::string name, const std::vector<double>& rex_ms,
                          const std::vector<double>& floor_ms, const std::vector<double>& peer_ms,
                          std::string note) {
    Result r = ratio_result(std::move(name), rex_ms, floor_ms, 0);
    r.target.reset();
    r.target_text = "-";
    r.verdict = Verdict::info;
    r.note = std::move(note);
    peer.report(r, peer_ms, r.rex.p50);
    if (r.swerex)
      r.note += " (the same client against SWE-ReX's server)";
    return r;
  };
  Result echo = reported("python_client_echo", echo_ms, local_ms, peer_echo_ms,
                         "SWE-ReX's Python RemoteRuntime, run_in_session(\"echo hi\") against "
                         "rex-server; floor: LocalRuntime in this process");
  Result alive = reported("python_client_is_alive", alive_ms, http_ms, peer_alive_ms,
                          "SWE-ReX's Python RemoteRuntime.is_alive() against rex-server; floor: "
                          "a bare GET /is_alive on a kept-alive connection");
  return {echo, alive};
}

// ---------------------------------------------------------------------------------------------
// Session teardown: what closing costs with many sessions open. Each figure keeps the same
// sessions (td-0, td-1, ...) open on the server through one RemoteRuntime; they are opened with
// bounded concurrency, and the figures that need the large set share it.

// Runs make(i) for i in [*next, last), one after the other; several of these share `next` to
// run at most that many at once.
asio::awaitable<int> bounded_worker(int* next, int last,
                                    const std::function<asio::awaitable<int>(int)>* make,
                                    BatchResult* tally) {
  while (*next < last) {
    const int i = (*next)++;
    std::exception_ptr failure;
    try {
      asio::awaitable<int> op = (*make)(i);
      co_await std::move(op);
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) {
      ++tally->failed;
      if (tally->first_error.empty())
        tally->first_error = describe(failure);
    } else {
      ++tally->ok;
    }
  }
  co_return 0;
}

// make(i) for i in [first, last), at most `width` at once.
BatchResult run_bounded(asio::io_context& io, int first, int last, int width,
                        const std::function<asio::awaitable<int>(int)>& make) {
  BatchResult tally;
  int next = first;
  const BatchResult workers = run_all(io, std::max(1, std::min(width, last - first)), [&](int) {
    return bounded_worker(&next, last, &make, &tally);
  });
  if (workers.failed > 0)
    throw std::runtime_error(workers.first_error);
  return tally;
}

// `echo hi`s one after the other while `*busy` holds, timed one by one.
asio::awaitable<int> echo_while(rex::Runtime& rt, std::string session, const bool* busy,
                                std::vector<double>* samples) {
  int n = 0;
  while (*busy) {
    rex::Action action = make_echo(session, "echo hi");
    const auto t0 = Clock::now();
    rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
    samples->push_back(ms_between(t0, Clock::now()));
    if (!printed(obs.output, "hi", Answers::rex))
      throw std::runtime_error(fmt::format("echo hi answered `{}`", obs.output));
    ++n;
  }
  co_return n;
}

// The system's pseudo-terminals in use (every session holds one): they run out before any other
// limit when thousands of sessions are open, here or in another process on the machine.
long read_number(const char* path) {
  std::ifstream in(path);
  long v = -1;
  in >> v;
  return v;
}

std::string pty_usage() {
  return fmt::format(
      "pseudo-terminals in use: {} (kernel.pty.max {}, of which {} are reserved "
      "for the first devpts instance)",
      read_number("/proc/sys/kernel/pty/nr"), read_number("/proc/sys/kernel/pty/max"),
      read_number("/proc/sys/kernel/pty/reserve"));
}

std::string teardown_name(int i) {
  return "td-" + std::to_string(i);
}

class TeardownSessions {
 public:
  TeardownSessions(asio::io_context& io, const ChildServer& server, int width)
      : io_(io), width_(width) {
    rex::RemoteRuntimeConfig cfg;
    cfg.url = server.url();
    cfg.auth_token = std::string(kToken);
    // Closing thousands of sessions can take minutes when each close walks every process of
    // the machine; a timeout would retry nothing and only lose the figure.
    cfg.request_timeout = std::chrono::minutes(30);
    cfg.client.max_idle_connections = static_cast<std::size_t>(width) + 16;
    rt_ = std::make_unique<rex::RemoteRuntime>(io.get_executor(), cfg);
  }

  rex::RemoteRuntime& runtime() { return *rt_; }
  int open() const { return open_; }

  // Opens td-open()..td-(n-1); returns the time it took in milliseconds.
  double open_to(int n) {
    if (n <= open_)
      return 0;
    // What stopped them once (pseudo-terminals, processes) stops them again: the later figures
    // fail at once instead of opening and closing hundreds of sessions first.
    if (!failure_.empty())
      throw std::runtime_error("not tried again: " + failure_);
    // Too few pseudo-terminals left (another process on the machine holds them): said at once,
    // rather than after opening (and closing) all the others can have.
    const long free_ptys =
        read_number("/proc/sys/kernel/pty/max") - read_number("/proc/sys/kernel/pty/nr");
    if (free_ptys >= 0 && free_ptys < n - open_) {
      failure_ = fmt::format("{} more sessions need as many pseudo-terminals, {} are free; {}",
                             n - open_, free_ptys, pty_usage());
      throw std::runtime_error(failure_);
    }
    const auto t0 = Clock::now();
    const std::function<asio::awaitable<int>(int)> make = [this](int i) {
      return create_session(*rt_, teardown_name(i), 60.0);
    };
    const BatchResult r = run_bounded(io_, open_, n, width_, make);
    const double ms = ms_since(t0);
    if (r.failed > 0) {
      // Which ones started is unknown: all are closed, so that the next figure starts clean.
      const std::string what = fmt::format("opening sessions {}..{}: {} failed, first: {}; {}",
                                           open_, n - 1, r.failed, r.first_error, pty_usage());
      failure_ = what;
      run_on(io_, rt_->close());
      open_ = 0;
      throw std::runtime_error(what);
    }
    open_ = n;
    return ms;
  }

  // The server closed them all (POST /close).
  void forget_all() { open_ = 0; }
  // The last `n` were closed.
  void forget_last(int n) { open_ -= n; }

 private:
  asio::io_context& io_;
  int width_;
  std::unique_ptr<rex::RemoteRuntime> rt_;
  int open_ = 0;
  std::string failure_;  // why opening failed, once it has
};

// close_session_scaling: one more session created and closed again, `cycles` times, with
// `others` sessions open besides it; only the close is timed.
std::vector<double> close_cycles(asio::io_context& io, rex::RemoteRuntime& rt, int cycles) {
  std::vector<double> samples;
  const std::string name = "td-cycle";
  for (int i = 0; i < cycles; ++i) {
    run_on(io, create_session(rt, name, 60.0));
    const auto t0 = Clock::now();
    run_on(io, close_session(rt, name));
    samples.push_back(ms_since(t0));
  }
  return samples;
}

Result bench_close_session_scaling(asio::io_context& io, const ChildServer& server,
                                   TeardownSessions& sessions, const Options& opt) {
  rex::RemoteRuntimeConfig cfg;
  cfg.url = server.url();
  cfg.auth_token = std::string(kToken);
  cfg.request_timeout = std::chrono::minutes(5);
  rex::RemoteRuntime rt(io.get_executor(), cfg);
  const int few = opt.teardown_few;
  const int many = opt.teardown_sessions;
  if (sessions.open() > few)
    throw std::logic_error("close_session_scaling must run before more sessions are open");
  const double open_few_ms = sessions.open_to(few);
  close_cycles(io, rt, std::max(2, opt.close_cycles / 10));  // warm-up
  const std::vector<double> few_ms = close_cycles(io, rt, opt.close_cycles);
  const double open_many_ms = sessions.open_to(many);
  const std::vector<double> many_ms = close_cycles(io, rt, opt.close_cycles);

  const Stats few_stats = stats_of(few_ms);
  Result r;
  r.name = "close_session_scaling";
  r.rex = stats_of(many_ms);
  r.floor_p50 = few_stats.p50;
  r.ratio = few_stats.p50 > 0 ? r.rex.p50 / few_stats.p50 : 0;
  r.target = 1.2;
  r.verdict = judge(r.ratio, 1.2, false);
  r.note = fmt::format(
      "close_session of one more session, with {} other sessions open: p50 {:.3f} ms, p99 "
      "{:.3f} ms; with {} open (the floor): p50 {:.3f} ms, p99 {:.3f} ms; {} closes each "
      "(create not timed); opening the {} took {:.1f} s, {} at once",
      many, r.rex.p50, r.rex.p99, few, few_stats.p50, few_stats.p99, opt.close_cycles, many,
      (open_few_ms + open_many_ms) / 1000, opt.open_concurrency);
  r.extra["samples"] = many_ms.size();
  r.extra["sessions_open"] = many;
  r.extra["floor_sessions_open"] = few;
  r.extra["floor_p99_ms"] = few_stats.p99;
  r.extra["open_ms"] = open_few_ms + open_many_ms;
  return r;
}

// The floor of close_all: `n` interactive bashes started by this process, each in a pty of its
// own as its session leader with the pty as its controlling terminal: what a rex session is.
// (A bare `sleep` in a process group would be cheaper to kill than the shells rex must end, so
// it would not be the same work.) Each has shown its prompt before the clock starts; timed:
// SIGKILL to every process group, then reaping every bash.
struct FloorTeardown {
  double kill_reap_ms = 0;
  double start_ms = 0;
};

// Interactive bashes started by this process, each in a pty of its own as its session leader
// with the pty as its controlling terminal, up and waiting for input; killed, collected and
// their terminals closed when the set goes.
class FloorShells {
 public:
  struct Shell {
    pid_t pid = -1;
    int master = -1;
    bool ready = false;
  };

  FloorShells() = default;
  FloorShells(const FloorShells&) = delete;
  FloorShells& operator=(const FloorShells&) = delete;
  ~FloorShells() { end_all(); }

  // Starts `n` more, with `env` (NAME=value entries) over this process's environment, and
  // returns once each has shown its first output (its prompt).
  void start(int n, const std::vector<std::string>& env = {}) {
    posix_spawnattr_t attr;
    ::posix_spawnattr_init(&attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    ::posix_spawnattr_setsigdefault(&attr, &all);  // this process ignores SIGPIPE
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setflags(&attr,
                               POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<std::string> args{"bash", "--noediting", "--norc", "-i"};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> entries = env;
    for (char** e = environ; *e; ++e)
      entries.emplace_back(*e);  // the first of a name wins in getenv
    std::vector<char*> envp;
    for (auto& e : entries)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::size_t first = shells_.size();
    for (int i = 0; i < n; ++i) {
      Shell s;
      s.master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (s.master < 0)
        throw_errno("posix_openpt");
      shells_.push_back(s);
      std::array<char, 64> slave{};
      if (::grantpt(s.master) != 0 || ::unlockpt(s.master) != 0 ||
          ::ptsname_r(s.master, slave.data(), slave.size()) != 0)
        throw_errno("pty");
      posix_spawn_file_actions_t fa;
      ::posix_spawn_file_actions_init(&fa);
      // setsid() runs before the file actions: opening the terminal without O_NOCTTY makes it
      // the new session's controlling terminal.
      ::posix_spawn_file_actions_addopen(&fa, 0, slave.data(), O_RDWR, 0);
      ::posix_spawn_file_actions_adddup2(&fa, 0, 1);
      ::posix_spawn_file_actions_adddup2(&fa, 0, 2);
      pid_t pid = -1;
      const int rc = ::posix_spawnp(&pid, "bash", &fa, &attr, argv.data(), envp.data());
      ::posix_spawn_file_actions_destroy(&fa);
      if (rc != 0)
        throw std::system_error(rc, std::generic_category(), "cannot start bash");
      shells_.back().pid = pid;
    }
    ::posix_spawnattr_destroy(&attr);

    const auto deadline = Clock::now() + std::chrono::seconds(120);
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    std::array<char, 4096> chunk{};
    int waiting = n;
    while (waiting > 0) {
      if (Clock::now() > deadline)
        throw std::runtime_error(fmt::format("{} of {} floor shells showed no prompt", waiting, n));
      fds.clear();
      which.clear();
      for (std::size_t k = first; k < shells_.size(); ++k) {
        if (!shells_[k].ready) {
          fds.push_back({shells_[k].master, POLLIN, 0});
          which.push_back(k);
        }
      }
      if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR)
        throw_errno("poll");
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0)
          continue;
        if (::read(fds[k].fd, chunk.data(), chunk.size()) <= 0)
          throw std::runtime_error("a floor shell ended before its prompt");
        shells_[which[k]].ready = true;
        --waiting;
      }
    }
  }

  std::vector<Shell>& shells() { return shells_; }

  // SIGKILL to each process group, then collecting each bash; the terminals stay open.
  void kill_and_reap(std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to; ++k)
      ::kill(-shells_[k].pid, SIGKILL);
    for (std::size_t k = from; k < to; ++k) {
      while (::waitpid(shells_[k].pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      shells_[k].pid = -1;
    }
  }

  void end_all() {
    for (Shell& s : shells_) {
      if (s.pid > 0) {
        ::kill(-s.pid, SIGKILL);
        ::waitpid(s.pid, nullptr, 0);
      }
      if (s.master >= 0)
        ::close(s.master);
    }
    shells_.clear();
  }

 private:
  std::vector<Shell> shells_;
};

FloorTeardown floor_kill_reap(int n) {
  FloorTeardown f;
  FloorShells shells;
  const auto t0 = Clock::now();
  shells.start(n);
  f.start_ms = ms_since(t0);
  const auto k0 = Clock::now();
  shells.kill_and_reap(0, shells.shells().size());
  f.kill_reap_ms = ms_since(k0);
  return f;
}

// The floor of echo_during_closes: `echo hi` in a bash on a raw pty, driven by this process, idle
// and while another thread of this process ends `victims` other bashes `width` at a time (SIGKILL
// to their process groups, collecting them, closing their terminals), in `rounds` rounds: what
// the kernel's own work of ending shells does to a shell's latency on this machine.
struct FloorEchoDuringKills {
  Stats idle;
  Stats busy;
  std::size_t busy_samples = 0;
};

FloorEchoDuringKills floor_echo_during_kills(int victims, int width, int idle_echos, int rounds) {
  constexpr std::string_view kPrompt = "@floor-prompt@";
  FloorShells echo_shell;
  echo_shell.start(1, {"PS1=" + std::string(kPrompt)});
  const int master = echo_shell.shells()[0].master;
  std::string seen;
  std::array<char, 4096> chunk{};
  auto echo = [&] {
    const auto t0 = Clock::now();
    constexpr std::string_view line = "echo hi\n";
    if (::write(master, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw_errno("write to the floor's echo shell");
    seen.clear();
    // The answer, then the next prompt (the typed line's echo comes first).
    while (seen.find(fmt::format("hi\r\n{}", kPrompt)) == std::string::npos) {
      pollfd pfd{master, POLLIN, 0};
      if (::poll(&pfd, 1, 10'000) <= 0)
        throw std::runtime_error("the floor's echo shell did not answer");
      const ssize_t n = ::read(master, chunk.data(), chunk.size());
      if (n <= 0)
        throw std::runtime_error("the floor's echo shell ended");
      seen.append(chunk.data(), static_cast<std::size_t>(n));
    }
    return ms_since(t0);
  };
  for (int i = 0; i < 20; ++i)
    echo();  // warm-up
  std::vector<double> idle_ms, busy_ms;
  for (int round = 0; round < rounds; ++round) {
    FloorShells doomed;
    doomed.start(victims);
    for (int i = 0; i < idle_echos; ++i)
      idle_ms.push_back(echo());
    std::atomic<bool> killing{true};
    std::thread killer([&] {
      auto& all = doomed.shells();
      for (std::size_t at = 0; at < all.size(); at += static_cast<std::size_t>(width)) {
        const std::size_t to = std::min(all.size(), at + static_cast<std::size_t>(width));
        doomed.kill_and_reap(at, to);
        for (std::size_t k = at; k < to; ++k)
          ::close(std::exchange(all[k].master, -1));
      }
      killing = false;
    });
    try {
      while (killing)
        busy_ms.push_back(echo());
    } catch (...) {
      killer.join();
      throw;
    }
    killer.join();
  }
  FloorEchoDuringKills f;
  f.idle = stats_of(idle_ms);
  f.busy = stats_of(busy_ms);
  f.busy_samples = busy_ms.size();
  return f;
}

// echo_during_closes: echo p99 in one session while another client closes sessions, against
// the idle p99 in the same state just before. Rounds repeat (reopening the closed sessions,
// not timed) until the busy side has enough samples for a p99, within a bound on rounds.
Result bench_echo_during_closes(asio::io_context& io, const ChildServer& server,
                                TeardownSessions& sessions, const Options& opt) {
  const int n = opt.teardown_sessions;
  const int victims = std::min(opt.close_victims, n - 1);  // td-0 is the echo session
  sessions.open_to(n);
  rex::RemoteRuntimeConfig cfg;
  cfg.url = server.url();
  cfg.auth_token = std::string(kToken);
  cfg.request_timeout = std::chrono::minutes(5);
  rex::RemoteRuntime echo_client(io.get_executor(), cfg);
  cfg.client.max_idle_connections = static_cast<std::size_t>(opt.close_concurrency) + 4;
  rex::RemoteRuntime closer(io.get_executor(), cfg);
  const std::string session = teardown_name(0);
  run_on(io, echo_block(echo_client, session, 20));  // warm-up: connection and session

  std::vector<double> idle_ms, busy_ms, close_wall_ms;
  double reopen_ms = 0;
  int rounds = 0;
  BatchResult closed;
  while (rounds < opt.max_close_rounds &&
         (rounds == 0 || static_cast<int>(busy_ms.size()) < opt.min_busy_echos)) {
    ++rounds;
    reopen_ms += sessions.open_to(n);
    const std::vector<double> idle = run_on(io, echo_block(echo_client, session, opt.idle_echos));
    idle_ms.insert(idle_ms.end(), idle.begin(), idle.end());

    // The closes run on their own client (their own connections), the echos on theirs; one
    // io_context drives both.
    bool closing = true;
    bool closes_done = false;
    int workers_left = std::min(opt.close_concurrency, victims);
    int next = n - victims;
    const std::function<asio::awaitable<int>(int)> make = [&closer](int i) {
      return close_session(closer, teardown_name(i));
    };
    const auto t0 = Clock::now();
    double wall = 0;
    for (int w = 0, k = workers_left; w < k; ++w) {
      asio::co_spawn(io, bounded_worker(&next, n, &make, &closed), [&](std::exception_ptr e, int) {
        if (e && closed.first_error.empty())
          closed.first_error = describe(e);
        if (--workers_left == 0) {
          wall = ms_since(t0);
          closing = false;
          closes_done = true;
        }
      });
    }
    // Ends once the last close has answered, unless an echo fails; the closes use this frame,
    // so they finish before it can go.
    std::exception_ptr echo_failure;
    try {
      run_on(io, echo_while(echo_client, session, &closing, &busy_ms));
    } catch (...) {
      echo_failure = std::current_exception();
    }
    turn_until(io, closes_done);
    if (echo_failure)
      std::rethrow_exception(echo_failure);
    if (closed.failed > 0 || !closed.first_error.empty())
      throw std::runtime_error(
          fmt::format("closing sessions: {} failed, first: {}", closed.failed, closed.first_error));
    close_wall_ms.push_back(wall);
    sessions.forget_last(victims);
  }
  reopen_ms += sessions.open_to(n);
  // The same kills without rex, beside a raw pty's echo (the sessions stay open meanwhile).
  const FloorEchoDuringKills bare =
      floor_echo_during_kills(victims, opt.close_concurrency, opt.idle_echos, rounds);
  const double bare_ratio = bare.idle.p99 > 0 ? bare.busy.p99 / bare.idle.p99 : 0;

  const Stats idle = stats_of(idle_ms);
  Result r;
  r.name = "echo_during_closes";
  r.rex = stats_of(busy_ms);
  r.floor_p50 = idle.p50;
  r.ratio = idle.p99 > 0 ? r.rex.p99 / idle.p99 : 0;
  r.target = 2;
  r.target_text = "p99 <= 2x";
  r.verdict = judge(r.ratio, 2, false);
  r.note = fmt::format(
      "ratio of the p99s, {} sessions open: `echo hi` p99 {:.3f} ms (p50 {:.3f}, max {:.3f}; {} "
      "echos) while another client closed {} sessions, {} at once (in {:.2f} s, median of {} "
      "rounds); idle just before: p99 {:.3f} ms (p50 {:.3f}; {} echos)",
      n, r.rex.p99, r.rex.p50, r.rex.max, busy_ms.size(), victims, opt.close_concurrency,
      median(close_wall_ms) / 1000, rounds, idle.p99, idle.p50, idle_ms.size());
  r.note += fmt::format(
      "; without rex (this process ends {} bash process groups {} at a time beside `echo hi` in "
      "a bash on a raw pty): p99 {:.3f} ms against {:.3f} ms idle, {:.2f}x",
      victims, opt.close_concurrency, bare.busy.p99, bare.idle.p99, bare_ratio);
  r.extra["samples"] = busy_ms.size();
  r.extra["bare_idle_p99_ms"] = bare.idle.p99;
  r.extra["bare_busy_p99_ms"] = bare.busy.p99;
  r.extra["bare_busy_samples"] = bare.busy_samples;
  r.extra["bare_p99_ratio"] = bare_ratio;
  r.extra["idle_samples"] = idle_ms.size();
  r.extra["idle_p99_ms"] = idle.p99;
  r.extra["floor_p99_ms"] = idle.p99;
  r.extra["sessions_open"] = n;
  r.extra["sessions_closed_per_round"] = victims;
  r.extra["close_concurrency"] = opt.close_concurrency;
  r.extra["rounds"] = rounds;
  r.extra["closes_wall_ms"] = median(close_wall_ms);
  r.extra["reopen_ms"] = reopen_ms;
  return r;
}

// close_all: POST /close (RemoteRuntime::close) with every session of the set open, against
// the floor above with as many shells. The floor runs after /close, so that rex's terminals
// and the floor's are never open at once (the system has a few thousand).
// The processor time `pid` has used so far, in clock ticks (/proc/PID/stat: utime + stime).
long cpu_ticks(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos)
    return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int k = 3; fields >> field; ++k) {  // field 3 is the state
    if (k == 14)
      utime = std::stol(field);
    if (k == 15) {
      stime = std::stol(field);
      break;
    }
  }
  return utime + stime;
}

// Waits (at most `bound`) until `pid` uses no processor for 100 ms: what it still does after
// answering (it removes the empty cgroups of ended sessions then) must not run beside a floor.
void wait_until_idle(pid_t pid, std::chrono::milliseconds bound) {
  const auto until = Clock::now() + bound;
  long last = cpu_ticks(pid);
  while (Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const long now = cpu_ticks(pid);
    if (now == last)
      return;
    last = now;
  }
}

Result bench_close_all(asio::io_context& io, const ChildServer& server, TeardownSessions& sessions,
                       const Options& opt) {
  const int n = opt.teardown_sessions;
  const double open_ms = sessions.open_to(n);
  const auto t0 = Clock::now();
  run_on(io, sessions.runtime().close());
  const double rex_ms = ms_since(t0);
  sessions.forget_all();
  wait_until_idle(server.pid(), std::chrono::seconds(10));
  const FloorTeardown floor = floor_kill_reap(n);

  Result r;
  r.name = "close_all";
  r.rex = {rex_ms, rex_ms, rex_ms, rex_ms};
  r.floor_p50 = floor.kill_reap_ms;
  r.ratio = floor.kill_reap_ms > 0 ? rex_ms / floor.kill_reap_ms : 0;
  r.target = 2;
  r.verdict = judge(r.ratio, 2, false);
  r.note = fmt::format(
      "one POST /close of {} sessions: {:.1f} ms ({:.3f} ms per session); floor: SIGKILL to {} "
      "bash -i process groups, each in its own pty and session, started by this process, and "
      "reaping them: {:.1f} ms ({:.3f} ms per shell); one sample each",
      n, rex_ms, rex_ms / n, n, floor.kill_reap_ms, floor.kill_reap_ms / n);
  r.extra["samples"] = 1;
  r.extra["sessions"] = n;
  r.extra["close_ms"] = rex_ms;
  r.extra["floor_kill_reap_ms"] = floor.kill_reap_ms;
  r.extra["floor_start_ms"] = floor.start_ms;
  r.extra["open_ms"] = open_ms;
  return r;
}

// The teardown figures, those of `wanted` in order, on one set of sessions; whatever is still
// open at the end is closed with POST /close.
std::vector<Result> bench_teardown(asio::io_context& io, const ChildServer& server,
                                   const Options& opt, bool scaling, bool during, bool all,
                                   int& errors) {
  std::vector<Result> results;
  TeardownSessions sessions(io, server, opt.open_concurrency);
  auto step = [&](const char* name, auto run) {
    fmt::print(stderr, "  running {}...\n", name);
    const auto t0 = Clock::now();
    try {
      results.push_back(run());
    } catch (const std::exception& e) {
      ++errors;
      fmt::print(stderr, "  {} FAILED: {}\n", name, e.what());
    }
    fmt::print(stderr, "  {}: {:.1f} s\n", name, ms_since(t0) / 1000);
  };
  if (scaling)
    step("close_session_scaling",
         [&] { return bench_close_session_scaling(io, server, sessions, opt); });
  if (during)
    step("echo_during_closes", [&] { return bench_echo_during_closes(io, server, sessions, opt); });
  if (all)
    step("close_all", [&] { return bench_close_all(io, server, sessions, opt); });
  if (sessions.open() > 0) {
    try {
      run_on(io, sessions.runtime().close());
    } catch (const std::exception& e) {
      ++errors;
      fmt::print(stderr, "  closing the teardown sessions failed: {}\n", e.what());
    }
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// Command line

int usage(const char* argv0, int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: {} [--smoke] [--json] [--strict] [--only FIGURE] [--server PATH]\n"
             "          [--iterations N] [--clients N] [--no-pin] [--swerex-python PATH]\n"
             "          [--swerex-iterations N] [--swerex-clients N] [--no-swerex]\n"
             "          [--sessions N]\n"
             "  --smoke         tiny counts (seconds); exit 0 even when a target misses\n"
             "  --json          one JSON object per figure on stdout (table on stderr)\n"
             "  --strict        exit 1 when a figure misses its target\n"
             "  --only FIGURE   run one figure: remote_echo, is_alive_rps, connections, clients,\n"
             "                  python_client, close_session_scaling, echo_during_closes,\n"
             "                  close_all, or teardown (the last three)\n"
             "  --server PATH   the rex-server to start (default: {})\n"
             "  --iterations N  remote_echo samples (default 1000)\n"
             "  --clients N     clients of the connections figure (default 1000)\n"
             "  --sessions N    sessions open in the teardown figures (default 2000)\n"
             "  --no-pin        do not pin the servers and the load generator to cores\n"
             "  --swerex-python PATH  the Python whose swe-rex (server and client) is measured\n"
             "                  beside rex (default {})\n"
             "  --swerex-iterations N  SWE-ReX's echo samples (default 30)\n"
             "  --swerex-clients N  clients of the clients figure (default 10)\n"
             "  --no-swerex     do not measure SWE-ReX\n",
             argv0, REX_SERVER_PATH, REX_SWEREX_PYTHON);
  return code;
}

std::optional<int> positive(const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0 || v > 1000000)
    return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::optional<int> iterations;
  std::optional<int> clients;
  std::optional<int> swerex_iterations;
  std::optional<int> swerex_clients;
  std::optional<int> sessions;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--serve-floor") {
      return serve_floor();
    } else if (a == "--smoke") {
      opt.smoke = true;
    } else if (a == "--json") {
      opt.json = true;
    } else if (a == "--strict") {
      opt.strict = true;
    } else if (a == "--no-pin") {
      opt.pin = false;
    } else if (a == "--only" && i + 1 < argc) {
      opt.only = argv[++i];
    } else if (a == "--server" && i + 1 < argc) {
      opt.server = argv[++i];
    } else if (a == "--swerex-python" && i + 1 < argc) {
      opt.swerex_python = argv[++i];
    } else if (a == "--no-swerex") {
      opt.swerex = false;
    } else if ((a == "--iterations" || a == "--clients" || a == "--swerex-iterations" ||
                a == "--swerex-clients" || a == "--sessions") &&
               i + 1 < argc) {
      const auto v = positive(argv[++i]);
      if (!v) {
        fmt::print(stderr, "{} needs a positive number, got `{}`\n", a, argv[i]);
        return 2;
      }
      (a == "--iterations"          ? iterations
       : a == "--clients"           ? clients
       : a == "--swerex-iterations" ? swerex_iterations
       : a == "--sessions"          ? sessions
                                    : swerex_clients) = v;
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else {
      fmt::print(stderr, "unknown or incomplete argument `{}`\n", a);
      return usage(argv[0], 2);
    }
  }
  const std::array<std::string_view, 9> figures{
      "remote_echo", "is_alive_rps",          "connections",        "clients",  "python_client",
      "teardown",    "close_session_scaling", "echo_during_closes", "close_all"};
  if (!opt.only.empty() && std::find(figures.begin(), figures.end(), opt.only) == figures.end()) {
    fmt::print(stderr, "--only: no figure `{}` ({})\n", opt.only, fmt::join(figures, ", "));
    return 2;
  }
  if (opt.smoke) {
    opt.echo_iterations = 40;
    opt.load_connections = 16;
    opt.load_block_seconds = 0.2;
    opt.load_rounds = 1;
    opt.clients = 50;
    opt.swerex_iterations = 3;
    opt.swerex_clients = 3;
    opt.swerex_client_commands = 2;
    opt.python_client_iterations = 10;
    opt.teardown_sessions = 20;
    opt.teardown_few = 5;
    opt.close_cycles = 10;
    opt.close_victims = 10;
    opt.idle_echos = 30;
    opt.min_busy_echos = 0;
    opt.max_close_rounds = 1;
  }
  if (iterations)
    opt.echo_iterations = *iterations;
  if (clients)
    opt.clients = *clients;
  if (swerex_iterations)
    opt.swerex_iterations = *swerex_iterations;
  if (swerex_clients)
    opt.swerex_clients = *swerex_clients;
  if (sessions)
    opt.teardown_sessions = std::max(*sessions, 2);
  opt.teardown_few = std::min(opt.teardown_few, opt.teardown_sessions - 1);
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();

  std::FILE* table = opt.json ? stderr : stdout;
  fmt::print(table,
             "rex_server_bench{}: {} echo samples; is_alive on {} connections; {} clients; {} "
             "teardown sessions\n",
             opt.smoke ? " --smoke" : "", opt.echo_iterations, opt.load_connections, opt.clients,
             opt.teardown_sessions);
  std::fflush(table);

  std::vector<Result> results;
  int errors = 0;
  try {
    // The floor responder is this executable in its floor mode: a child process like the
    // server, started before any thread of ours exists.
    ChildServer floor("floor responder", {"/proc/self/exe", "--serve-floor"});
    // A lifetime limit, so that a killed benchmark leaves no server behind for long.
    ChildServer server("rex-server",
                       {opt.server, "--host", "127.0.0.1", "--port", "0", "--auth-token",
                        std::string(kToken), "--max-lifetime", "1800"});

    asio::io_context io(1);
    auto work = asio::make_work_guard(io);
    rex::LocalRuntime local(io.get_executor());
    rex::RemoteRuntimeConfig cfg;
    cfg.url = server.url();
    cfg.auth_token = std::string(kToken);
    rex::RemoteRuntime remote(io.get_executor(), cfg);

    // SWE-ReX: its server for the figures that compare servers, its Python client for
    // python_client; each only when such a figure runs.
    auto runs = [&](std::string_view name) { return opt.only.empty() || opt.only == name; };
    const bool want_server = runs("remote_echo") || runs("is_alive_rps") || runs("clients");
    const bool want_client = runs("python_client");
    Swerex swerex;
    swerex.setup = swerex_setup(opt.swerex_python, opt.swerex && (want_server || want_client));
    swerex.why_not_server = swerex.why_not_client = swerex.setup.unavailable;
    if (swerex.setup.usable() && want_server) {
      try {
        swerex.server = start_swerex_server(swerex.setup, kToken);
      } catch (const std::exception& e) {
        swerex.why_not_server = fmt::format("its server did not start: {}", e.what());
      }
    }
    if (swerex.setup.usable() && want_client) {
      try {
        swerex.client = std::make_unique<SwerexDriver>(swerex.setup, "client");
      } catch (const std::exception& e) {
        swerex.why_not_client = e.what();
      }
    }
    if (swerex.server)
      fmt::print(table, "SWE-ReX's server (swerex.server, uvicorn) at {}\n", swerex.server->url());
    else if (want_server)
      fmt::print(table, "SWE-ReX's server: not measured: {}\n", swerex.why_not_server);
    if (swerex.client)
      fmt::print(table, "SWE-ReX's Python client: {}\n", swerex.client->description());
    else if (want_client)
      fmt::print(table, "SWE-ReX's Python client: not measured: {}\n", swerex.why_not_client);
    std::fflush(table);

    auto figure = [&](const char* name, auto run) {
      if (!opt.only.empty() && opt.only != name)
        return;
      fmt::print(stderr, "  running {}...\n", name);
      try {
        run();
      } catch (const std::exception& e) {
        ++errors;
        fmt::print(stderr, "  {} FAILED: {}\n", name, e.what());
      }
    };
    figure("remote_echo",
           [&] { results.push_back(bench_remote_echo(io, local, remote, server, swerex, opt)); });
    figure("is_alive_rps",
           [&] { results.push_back(bench_is_alive_rps(io, server, floor, swerex, opt)); });
    figure("connections",
           [&] { results.push_back(bench_connections(io, local, server, opt, errors)); });
    figure("clients",
           [&] { results.push_back(bench_clients(io, local, server, swerex, opt, errors)); });
    figure("python_client", [&] {
      if (!swerex.client) {
        fmt::print(stderr, "  python_client: not measured: {}\n", swerex.why_not_client);
        return;
      }
      for (auto& r : bench_python_client(io, local, server, swerex, opt))
        results.push_back(std::move(r));
    });
    // SWE-ReX's Python client closes its sessions on both servers: before they stop, and
    // before the teardown figures, which count rex-server's sessions.
    if (swerex.client)
      swerex.client->finish();
    const std::size_t compared = results.size();  // the figures that have a SWE-ReX side
    const bool teardown = opt.only.empty() || opt.only == "teardown";
    const bool scaling = teardown || opt.only == "close_session_scaling";
    const bool during = teardown || opt.only == "echo_during_closes";
    const bool close_all = teardown || opt.only == "close_all";
    if (scaling || during || close_all) {
      try {
        for (auto& r : bench_teardown(io, server, opt, scaling, during, close_all, errors))
          results.push_back(std::move(r));
      } catch (const std::exception& e) {
        ++errors;
        fmt::print(stderr, "  teardown FAILED: {}\n", e.what());
      }
    }
    for (std::size_t k = 0; k < compared; ++k) {
      Result& r = results[k];
      if (!r.swerex && !swerex.server && r.name != "connections_" + std::to_string(opt.clients))
        r.extra["swerex"] = "not measured: " + swerex.why_not_server;
    }
    try {
      run_on(io, local.close());
    } catch (const std::exception& e) {
      ++errors;
      fmt::print(stderr, "closing the local runtime failed: {}\n", e.what());
    }
    if (auto problem = server.stop(std::chrono::seconds(30))) {
      ++errors;
      fmt::print(stderr, "{}\n", *problem);
    }
    if (auto problem = floor.stop(std::chrono::seconds(10))) {
      ++errors;
      fmt::print(stderr, "{}\n", *problem);
    }
    // SWE-ReX's own exit is not rex's concern: reported, not counted.
    if (swerex.server) {
      if (auto problem = swerex.server->stop(std::chrono::seconds(30)))
        fmt::print(stderr, "{}\n", *problem);
    }
  } catch (const std::exception& e) {
    ++errors;
    fmt::print(stderr, "rex_server_bench: {}\n", e.what());
  }

  print_table(table, results);
  if (opt.json)
    print_json(results);
  const bool missed = any_missed(results);
  if (errors > 0)
    return 2;
  if (missed && opt.strict && !opt.smoke)
    return 1;
  return 0;
}
