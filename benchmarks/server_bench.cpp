// rex_server_bench: the real rex-server executable, driven over loopback, each figure measured
// next to its floor in the same run.
//
// The server runs as a child process (the static rex-server this build made, or --server PATH)
// on 127.0.0.1 with a port the system picks and an auth token, exactly as a deployment starts
// it; it is stopped with SIGTERM at the end and must exit 0. Rex and floor samples are taken in
// alternating blocks so that a noisy neighbour hurts both alike.
//
//   rex_server_bench [--smoke] [--json] [--strict] [--only FIGURE] [--server PATH]
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
//
// --smoke: tiny counts (50 clients), a few seconds; exits 0 even when a target misses (errors
// and a bad server exit still fail). --strict: exit 1 when a figure misses its target.
// --json: one JSON object per figure on stdout (the table then goes to stderr).

#include <rex/protocol/actions.hpp>
#include <rex/protocol/session.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/core.h>
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
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "child_server.hpp"

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

// n `echo hi`s in one session, timed one by one; checks each output.
asio::awaitable<std::vector<double>> echo_block(rex::Runtime& rt, std::string session, int n) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    rex::Action action = make_echo(session, "echo hi");
    const auto t0 = Clock::now();
    rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
    samples.push_back(ms_between(t0, Clock::now()));
    if (obs.output != "hi\n")
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
                                 CommandTally* tally) {
  for (int k = 0; k < commands; ++k) {
    const std::string command = "echo " + std::to_string(k);
    const std::string expected = std::to_string(k) + "\n";
    rex::Action action = make_echo(session, command);
    std::exception_ptr failure;
    const auto t0 = Clock::now();
    try {
      rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
      tally->latencies.push_back(ms_between(t0, Clock::now()));
      if (obs.output != expected)
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
};

// ---------------------------------------------------------------------------------------------
// Figures

Result bench_remote_echo(asio::io_context& io, rex::LocalRuntime& local, rex::RemoteRuntime& remote,
                         const ChildServer& server, const Options& opt) {
  const std::string session = "bench-echo";
  run_on(io, create_session(local, session, 10.0));
  run_on(io, create_session(remote, session, 10.0));
  LoadClient http_baseline(io, server.port(), 1);

  const int iterations = opt.echo_iterations;
  const int warmup = std::max(5, std::min(50, iterations / 10));
  run_on(io, echo_block(remote, session, warmup));
  run_on(io, echo_block(local, session, warmup));
  http_baseline.round_trips(warmup);

  // Blocks of remote, local and a bare HTTP round trip (GET /is_alive on a raw keep-alive
  // connection: what HTTP over loopback to this server costs with no session work), rotating.
  std::vector<double> remote_ms, local_ms, http_ms;
  const std::string server_stat = main_thread_schedstat(server.pid());
  double server_cpu_ms = 0;  // of the server's thread during the remote blocks
  double client_cpu_ms = 0;  // of this thread during the remote blocks
  double local_cpu_ms = 0;   // of this thread during the local blocks
  const int block = 25;
  for (int done = 0, b = 0; done < iterations; done += block, ++b) {
    const int n = std::min(block, iterations - done);
    for (int k = 0; k < 3; ++k) {
      std::vector<double> s;
      switch ((b + k) % 3) {
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
        default:
          s = http_baseline.round_trips(n);
          http_ms.insert(http_ms.end(), s.begin(), s.end());
          break;
      }
    }
  }
  run_on(io, close_session(local, session));
  run_on(io, close_session(remote, session));

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
  return r;
}

Result bench_is_alive_rps(asio::io_context& io, ChildServer& server, ChildServer& floor,
                          const Options& opt) {
  // Pinned: server and responder on the last allowed core, this thread on the first.
  const std::vector<int> cpus = allowed_cpus();
  const bool pin = opt.pin && cpus.size() >= 2;
  if (pin) {
    const std::vector<int> server_cpu{cpus.back()};
    const std::vector<int> client_cpu{cpus.front()};
    pin_process(server.pid(), server_cpu);
    pin_process(floor.pid(), server_cpu);
    pin_this_thread(client_cpu);
  }
  LoadClient rex_load(io, server.port(), opt.load_connections);
  LoadClient floor_load(io, floor.port(), opt.load_connections);
  LoadTally rex_tally, floor_tally;
  LoadTally warm;
  const double warmup = std::min(0.3, opt.load_block_seconds);
  rex_load.run(warmup, warm, server.pid());
  floor_load.run(warmup, warm, floor.pid());
  if (warm.errors > 0)
    throw std::runtime_error("is_alive warm-up: " + warm.first_error);

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
  Side rex_side, floor_side;
  for (int round = 0; round < opt.load_rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      if ((round + k) % 2 == 0)
        rex_side.add(rex_load.run(opt.load_block_seconds, rex_tally, server.pid()));
      else
        floor_side.add(floor_load.run(opt.load_block_seconds, floor_tally, floor.pid()));
    }
  }
  if (pin) {
    pin_process(server.pid(), cpus);
    pin_process(floor.pid(), cpus);
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
                 int commands, const std::function<void()>& after_create, Clock::time_point t0,
                 pid_t shell_parent, pid_t server) {
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
  m.echoed = run_all(io, n, [&](int i) { return echo_worker(rt(i), name(i), commands, &m.tally); });
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
      io, remote_ptrs, n, opt.client_commands, [&] { rss_sessions = vm_rss_kib(server.pid()); }, t0,
      server.pid(), server.pid());
  std::uint64_t connections = 0;
  for (const auto& c : clients)
    connections += c->client().connections_opened();
  clients.clear();
  const long rss_after = vm_rss_kib(server.pid());

  // Floor: the same sessions and commands on a LocalRuntime in this process.
  const std::vector<rex::Runtime*> local_ptrs{&local};
  const ManyRun floor_run = run_many(
      io, local_ptrs, n, opt.client_commands, [] {}, Clock::now(), ::getpid(), -1);

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

// ---------------------------------------------------------------------------------------------
// Command line

int usage(const char* argv0, int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: {} [--smoke] [--json] [--strict] [--only FIGURE] [--server PATH]\n"
             "          [--iterations N] [--clients N] [--no-pin]\n"
             "  --smoke         tiny counts (seconds); exit 0 even when a target misses\n"
             "  --json          one JSON object per figure on stdout (table on stderr)\n"
             "  --strict        exit 1 when a figure misses its target\n"
             "  --only FIGURE   run one figure: remote_echo, is_alive_rps or connections\n"
             "  --server PATH   the rex-server to start (default: {})\n"
             "  --iterations N  remote_echo samples (default 1000)\n"
             "  --clients N     clients of the connections figure (default 1000)\n"
             "  --no-pin        do not pin the servers and the load generator to cores\n",
             argv0, REX_SERVER_PATH);
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
    } else if ((a == "--iterations" || a == "--clients") && i + 1 < argc) {
      const auto v = positive(argv[++i]);
      if (!v) {
        fmt::print(stderr, "{} needs a positive number, got `{}`\n", a, argv[i]);
        return 2;
      }
      (a == "--iterations" ? iterations : clients) = v;
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else {
      fmt::print(stderr, "unknown or incomplete argument `{}`\n", a);
      return usage(argv[0], 2);
    }
  }
  if (!opt.only.empty() && opt.only != "remote_echo" && opt.only != "is_alive_rps" &&
      opt.only != "connections") {
    fmt::print(stderr, "--only: no figure `{}` (remote_echo, is_alive_rps, connections)\n",
               opt.only);
    return 2;
  }
  if (opt.smoke) {
    opt.echo_iterations = 40;
    opt.load_connections = 16;
    opt.load_block_seconds = 0.2;
    opt.load_rounds = 1;
    opt.clients = 50;
  }
  if (iterations)
    opt.echo_iterations = *iterations;
  if (clients)
    opt.clients = *clients;
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();

  std::FILE* table = opt.json ? stderr : stdout;
  fmt::print(table, "rex_server_bench{}: {} echo samples; is_alive on {} connections; {} clients\n",
             opt.smoke ? " --smoke" : "", opt.echo_iterations, opt.load_connections, opt.clients);
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
           [&] { results.push_back(bench_remote_echo(io, local, remote, server, opt)); });
    figure("is_alive_rps", [&] { results.push_back(bench_is_alive_rps(io, server, floor, opt)); });
    figure("connections",
           [&] { results.push_back(bench_connections(io, local, server, opt, errors)); });
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
