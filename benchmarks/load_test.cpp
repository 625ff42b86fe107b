// rex_load: the real rex-server under sustained load, and what is left of it afterwards.
//
// Starts the static rex-server (this build's, or --server PATH) as a child process on loopback,
// opens --connections keep-alive connections from one io_context, and for --duration seconds
// each connection sends a mix of requests, checking every answer:
//   40%  GET /is_alive
//   25%  run_in_session "echo N" in one of --sessions shared sessions (the output must be N)
//   15%  execute ["echo", N] (a process per request)
//   12%  write_file then read_file of the connection's own file (the content must come back)
//    8%  create_session, run a command in it, close_session (a bash per request)
// Before the load (sessions created, every kind of request done once) and after it (every
// connection closed) it reads the server's RSS, open descriptors and children. It passes when
// no request failed, the descriptors are back to their baseline, the RSS is within
// --rss-slack-mib of its baseline, and the server has no zombie child; then SIGTERM must end
// the server with status 0.
//
//   rex_load [--connections 1000] [--duration 60] [--sessions 32] [--rss-slack-mib 8]
//            [--server PATH]
//
// Exit status 0 when every check holds, 1 otherwise.

#include <fmt/core.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "child_server.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using rex::bench::ChildServer;

#ifndef REX_SERVER_PATH
#error "REX_SERVER_PATH must name the rex-server executable (set by CMake)"
#endif

constexpr std::string_view kToken = "rex-load-token";

struct Options {
  int connections = 1000;
  int duration = 60;
  int sessions = 32;
  double rss_slack_mib = 8;
  std::string server = REX_SERVER_PATH;
};

struct ProcessState {
  double rss_mib = 0;
  std::size_t fds = 0;
  std::size_t children = 0;
  std::size_t zombies = 0;
};

ProcessState read_state(pid_t pid) {
  ProcessState s;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:"))
      s.rss_mib = std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid)))
    ++s.fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream stat(e.path() / "stat");
    std::string text;
    std::getline(stat, text);
    const auto close = text.rfind(')');
    if (close == std::string::npos || close + 4 >= text.size())
      continue;
    const char state = text[close + 2];
    const long ppid = std::strtol(text.c_str() + close + 4, nullptr, 10);
    if (ppid == pid) {
      ++s.children;
      if (state == 'Z')
        ++s.zombies;
    }
  }
  return s;
}

// --- the load ------------------------------------------------------------------------------------

enum Kind { is_alive, run_in_session, execute, file_round_trip, session_lifecycle, kinds };
constexpr std::array<const char*, kinds> kKindNames = {"is_alive", "run_in_session", "execute",
                                                       "write+read_file", "session lifecycle"};

struct Stats {
  std::array<std::vector<double>, kinds> latency_ms{};
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  std::vector<std::string> first_errors;
  int connected = 0;

  void error(std::string what) {
    ++errors;
    if (first_errors.size() < 10)
      first_errors.push_back(std::move(what));
  }
};

struct Connection {
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  explicit Connection(asio::any_io_executor ex) : stream(std::move(ex)) {}
};

// One request on the connection; the answer's body, or an exception naming what went wrong.
asio::awaitable<std::string> call(Connection& c, http::verb verb, std::string target,
                                  std::string body, Stats& stats) {
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.set("X-API-Key", kToken);
  if (verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
  }
  req.prepare_payload();
  c.stream.expires_after(120s);
  co_await http::async_write(c.stream, req, asio::use_awaitable);
  http::response<http::string_body> res;
  co_await http::async_read(c.stream, c.buffer, res, asio::use_awaitable);
  ++stats.requests;
  if (res.result_int() != 200)
    throw std::runtime_error(
        fmt::format("{} answered {}: {}", target, res.result_int(), res.body().substr(0, 300)));
  co_return std::move(res.body());
}

std::string bash_action(const std::string& session, const std::string& command) {
  json::object o{{"command", command},
                 {"session", session},
                 {"timeout", 60},
                 {"check", "silent"},
                 {"action_type", "bash"}};
  return json::serialize(o);
}

std::string output_of(const std::string& body) {
  return std::string(json::parse(body).at("output").as_string());
}

asio::awaitable<void> one_request(Connection& c, Kind kind, int id, std::uint64_t n,
                                  const Options& o, const std::string& dir, Stats& stats) {
  const std::string expect = std::to_string(n);
  switch (kind) {
    case is_alive: {
      std::string target = "/is_alive";
      const std::string body = co_await call(c, http::verb::get, target, std::string(), stats);
      if (body.find("\"is_alive\":true") == std::string::npos)
        throw std::runtime_error("is_alive answered " + body);
      break;
    }
    case run_in_session: {
      const std::string session = fmt::format("shared-{}", id % o.sessions);
      const std::string command = "echo " + expect;
      std::string payload = bash_action(session, command);
      std::string target = "/run_in_session";
      const std::string body = co_await call(c, http::verb::post, target, payload, stats);
      if (output_of(body) != expect + "\n")
        throw std::runtime_error("run_in_session answered " + body);
      break;
    }
    case execute: {
      json::object cmd{{"command", json::array{"echo", expect}}, {"timeout", 60}};
      std::string payload = json::serialize(cmd);
      std::string target = "/execute";
      const std::string body = co_await call(c, http::verb::post, target, payload, stats);
      if (json::parse(body).at("stdout").as_string() != expect + "\n")
        throw std::runtime_error("execute answered " + body);
      break;
    }
    case file_round_trip: {
      const std::string path = fmt::format("{}/conn-{}.txt", dir, id);
      json::object w{{"path", path}, {"content", "content " + expect}};
      std::string write = json::serialize(w);
      std::string write_target = "/write_file";
      co_await call(c, http::verb::post, write_target, write, stats);
      json::object r{{"path", path}};
      std::string read = json::serialize(r);
      std::string read_target = "/read_file";
      const std::string body = co_await call(c, http::verb::post, read_target, read, stats);
      if (json::parse(body).at("content").as_string() != "content " + expect)
        throw std::runtime_error("read_file answered " + body);
      break;
    }
    case session_lifecycle: {
      const std::string session = fmt::format("own-{}-{}", id, n);
      json::object create{{"session", session}, {"startup_timeout", 30}};
      std::string create_body = json::serialize(create);
      std::string create_target = "/create_session";
      co_await call(c, http::verb::post, create_target, create_body, stats);
      const std::string command = "x=" + expect + "; echo $x";
      std::string payload = bash_action(session, command);
      std::string run_target = "/run_in_session";
      const std::string body = co_await call(c, http::verb::post, run_target, payload, stats);
      json::object close{{"session", session}};
      std::string close_body = json::serialize(close);
      std::string close_target = "/close_session";
      co_await call(c, http::verb::post, close_target, close_body, stats);
      if (output_of(body) != expect + "\n")
        throw std::runtime_error("a new session answered " + body);
      break;
    }
    case kinds:
      break;
  }
}

Kind pick(std::mt19937& rng) {
  const int r = static_cast<int>(rng() % 100);
  if (r < 40)
    return is_alive;
  if (r < 65)
    return run_in_session;
  if (r < 80)
    return execute;
  if (r < 92)
    return file_round_trip;
  return session_lifecycle;
}

asio::awaitable<void> client(int id, asio::ip::tcp::endpoint server, Clock::time_point start,
                             Clock::time_point end, const Options& o, const std::string& dir,
                             Stats& stats) {
  auto ex = co_await asio::this_coro::executor;
  Connection c(ex);
  std::mt19937 rng(static_cast<unsigned>(id) * 7919u + 1u);
  try {
    c.stream.expires_after(30s);
    co_await c.stream.async_connect(server, asio::use_awaitable);
    ++stats.connected;
  } catch (const std::exception& e) {
    stats.error(fmt::format("connection {}: connect: {}", id, e.what()));
    co_return;
  }
  // Everyone starts together, once every connection is open.
  asio::steady_timer wait(ex, start);
  co_await wait.async_wait(asio::use_awaitable);
  std::uint64_t n = 0;
  while (Clock::now() < end) {
    const Kind kind = pick(rng);
    const auto t0 = Clock::now();
    try {
      co_await one_request(c, kind, id, ++n, o, dir, stats);
      stats.latency_ms[kind].push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    } catch (const std::exception& e) {
      stats.error(fmt::format("connection {}: {}: {}", id, kKindNames[kind], e.what()));
      break;  // the connection's state is unknown after an error
    }
  }
  beast::error_code ignored;
  c.stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  c.stream.close();
}

// Sessions for run_in_session, and one request of every kind, before the baseline.
asio::awaitable<void> prepare(asio::ip::tcp::endpoint server, const Options& o,
                              const std::string& dir, Stats& stats) {
  auto ex = co_await asio::this_coro::executor;
  Connection c(ex);
  co_await c.stream.async_connect(server, asio::use_awaitable);
  for (int i = 0; i < o.sessions; ++i) {
    json::object create{{"session", fmt::format("shared-{}", i)}, {"startup_timeout", 30}};
    std::string body = json::serialize(create);
    std::string target = "/create_session";
    co_await call(c, http::verb::post, target, body, stats);
  }
  for (int k = 0; k < kinds; ++k) {
    const Kind kind = static_cast<Kind>(k);
    co_await one_request(c, kind, 0, 1, o, dir, stats);
  }
  c.stream.close();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

template <class F>
void run(asio::io_context& io, F make) {
  std::exception_ptr failure;
  asio::co_spawn(io, make(), [&](std::exception_ptr e) { failure = e; });
  io.restart();
  io.run();
  if (failure)
    std::rethrow_exception(failure);
}

int load(const Options& o) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);

  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("rex-load-{}", ::getpid())).string();
  std::filesystem::create_directories(dir);
  // At info, nothing is logged per request.
  ChildServer server("rex-server", {o.server, "--auth-token", std::string(kToken), "--host",
                                    "127.0.0.1", "--port", "0", "--max-connections",
                                    std::to_string(o.connections + 64), "--log-level", "info"});
  const asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), server.port());
  asio::io_context io;
  Stats warmup;
  run(io, [&] { return prepare(endpoint, o, dir, warmup); });
  std::this_thread::sleep_for(300ms);
  const ProcessState before = read_state(server.pid());

  Stats stats;
  const auto start = Clock::now() + 2s + std::chrono::milliseconds(o.connections * 2);
  const auto end = start + std::chrono::seconds(o.duration);
  ProcessState peak = before;
  std::thread sampler([&] {
    while (Clock::now() < end) {
      std::this_thread::sleep_for(250ms);
      const ProcessState s = read_state(server.pid());
      peak.rss_mib = std::max(peak.rss_mib, s.rss_mib);
      peak.fds = std::max(peak.fds, s.fds);
      peak.children = std::max(peak.children, s.children);
    }
  });
  for (int i = 0; i < o.connections; ++i)
    asio::co_spawn(io, client(i, endpoint, start, end, o, dir, stats), asio::detached);
  io.restart();
  io.run();
  sampler.join();

  // Settling: the server notices the closed connections and finishes the last processes.
  // The server hands cached memory back after a second without connections.
  std::this_thread::sleep_for(1500ms);
  ProcessState after;
  const auto settle = Clock::now() + 10s;
  do {
    std::this_thread::sleep_for(200ms);
    after = read_state(server.pid());
  } while (Clock::now() < settle &&
           (after.fds > before.fds || after.zombies > 0 || after.children > before.children ||
            after.rss_mib > before.rss_mib + o.rss_slack_mib));
  const std::optional<std::string> stop_problem = server.stop(20s);
  std::filesystem::remove_all(dir);

  const double seconds = o.duration;
  std::uint64_t answered = 0;
  for (const auto& v : stats.latency_ms)
    answered += v.size();
  fmt::print("rex_load: {} connections ({} connected), {} s, {} shared sessions\n", o.connections,
             stats.connected, o.duration, o.sessions);
  fmt::print("{:<20} {:>10} {:>10} {:>10} {:>10}\n", "request", "count", "p50 ms", "p99 ms",
             "max ms");
  for (int k = 0; k < kinds; ++k) {
    const auto& v = stats.latency_ms[static_cast<std::size_t>(k)];
    fmt::print("{:<20} {:>10} {:>10.2f} {:>10.2f} {:>10.2f}\n",
               kKindNames[static_cast<std::size_t>(k)], v.size(), percentile(v, 0.5),
               percentile(v, 0.99), v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  }
  fmt::print("HTTP requests {} ({:.0f}/s), operations {}, errors {}\n", stats.requests,
             static_cast<double>(stats.requests) / seconds, answered, stats.errors);
  fmt::print("{:<14} {:>10} {:>10} {:>10}\n", "server", "before", "peak", "after");
  fmt::print("{:<14} {:>10.1f} {:>10.1f} {:>10.1f}\n", "RSS MiB", before.rss_mib, peak.rss_mib,
             after.rss_mib);
  fmt::print("{:<14} {:>10} {:>10} {:>10}\n", "open fds", before.fds, peak.fds, after.fds);
  fmt::print("{:<14} {:>10} {:>10} {:>10}\n", "children", before.children, peak.children,
             after.children);
  fmt::print("zombies after: {}; server after SIGTERM: {}\n", after.zombies,
             stop_problem.value_or("exited with status 0"));

  std::vector<std::string> failed;
  if (stats.errors > 0 || stats.connected < o.connections)
    failed.push_back(fmt::format("{} errors", stats.errors));
  for (const auto& e : stats.first_errors)
    fmt::print(stderr, "  {}\n", e);
  if (after.fds > before.fds)
    failed.push_back(fmt::format("descriptors {} -> {}", before.fds, after.fds));
  if (after.rss_mib > before.rss_mib + o.rss_slack_mib)
    failed.push_back(fmt::format("RSS {:.1f} -> {:.1f} MiB", before.rss_mib, after.rss_mib));
  if (after.zombies > 0)
    failed.push_back(fmt::format("{} zombies", after.zombies));
  if (after.children > before.children)
    failed.push_back(fmt::format("children {} -> {}", before.children, after.children));
  if (stop_problem)
    failed.push_back(*stop_problem);
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed)
      list += (list.empty() ? "" : ", ") + f;
    fmt::print("FAILED: {}\n", list);
    return 1;
  }
  fmt::print("OK: no errors; descriptors, children and RSS back to their baseline\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "rex_load: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (arg == "--connections")
        o.connections = std::stoi(value());
      else if (arg == "--duration")
        o.duration = std::stoi(value());
      else if (arg == "--sessions")
        o.sessions = std::stoi(value());
      else if (arg == "--rss-slack-mib")
        o.rss_slack_mib = std::stod(value());
      else if (arg == "--server")
        o.server = value();
      else {
        std::cerr << "rex_load: unknown argument " << arg
                  << "\nusage: rex_load [--connections N] [--duration S] [--sessions K] "
                     "[--rss-slack-mib M] [--server PATH]\n";
        return 2;
      }
    } catch (const std::logic_error&) {
      std::cerr << "rex_load: " << arg << ": not a number\n";
      return 2;
    }
  }
  if (o.connections < 1 || o.duration < 1 || o.sessions < 1) {
    std::cerr << "rex_load: --connections, --duration and --sessions must be at least 1\n";
    return 2;
  }
  try {
    return load(o);
  } catch (const std::exception& e) {
    std::cerr << "rex_load: " << e.what() << '\n';
    return 1;
  }
}
