// rex_terminal_bench: a person's terminal in a sandbox (a process with a pty, as `rex shell`
// attaches it), against its floors measured in the same run:
// - keystroke to echo, p50 and p99: one byte typed into a program that echoes what it reads
//   (`stty raw -echo; cat`, as a full-screen program or a line editor does) and read back.
//   Locally: through a LocalRuntime in this process, against the same program on a raw pty this
//   benchmark opens itself. Over loopback: through a RemoteRuntime to a rex-server child
//   process (keys as POST /processes/input on a kept-alive connection, output as the process
//   stream's events), against the raw pty round trip plus one bare request to the same server
//   (GET /is_alive on a kept-alive connection): the framing's own floor.
// - throughput: `cat` of a 100 MB file (no newlines, so the terminal adds nothing) through the
//   terminal, locally and over loopback, against `cat` of it on a raw pty read by this process.
//
// usage: rex_terminal_bench [--smoke] [--keys N] [--megabytes N] [--server PATH]
#include <rex/core/event.hpp>
#include <rex/http/client.hpp>
#include <rex/protocol/processes.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "child_server.hpp"

extern char** environ;

namespace {

using namespace rex;
using namespace rex::bench;
using namespace std::chrono_literals;

// Says READY once its terminal is raw: every byte after that comes back exactly once.
const std::vector<std::string> kEchoProgram = {"/bin/sh", "-c",
                                               "stty raw -echo; printf READY; exec cat"};

struct Options {
  bool smoke = false;
  int keys = 2000;
  int megabytes = 100;
  std::string server = REX_SERVER_PATH;
};

// --- the floor: a raw pty ----------------------------------------------------------------------

class RawPty {
 public:
  explicit RawPty(const std::vector<std::string>& argv) {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0)
      throw std::runtime_error("cannot open a pty");
    const char* slave = ::ptsname(master_);
    std::vector<std::string> args = {"/usr/bin/setsid", "-c"};
    args.insert(args.end(), argv.begin(), argv.end());
    std::vector<char*> c_args;
    for (auto& a : args)
      c_args.push_back(a.data());
    c_args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    for (int fd = 0; fd < 3; ++fd)
      ::posix_spawn_file_actions_addopen(&fa, fd, slave, O_RDWR, 0);
    const int rc = ::posix_spawn(&pid_, args[0].c_str(), &fa, nullptr, c_args.data(), environ);
    ::posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
      throw std::runtime_error(std::string("cannot start the floor's program: ") +
                               std::strerror(rc));
  }
  ~RawPty() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    ::close(master_);
  }
  RawPty(const RawPty&) = delete;
  RawPty& operator=(const RawPty&) = delete;

  void write_byte(char c) {
    while (::write(master_, &c, 1) != 1 && errno == EINTR) {
    }
  }
  // Reads until `want` bytes came or the terminal ended; the bytes read.
  std::size_t read_bytes(std::size_t want, std::string* into = nullptr) {
    char buffer[65536];
    std::size_t got = 0;
    while (got < want) {
      const ssize_t n = ::read(master_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;  // EIO: every program on the terminal has ended
      got += static_cast<std::size_t>(n);
      if (into != nullptr)
        into->append(buffer, static_cast<std::size_t>(n));
    }
    return got;
  }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
};

// Reads until the echo program said READY.
void settle(RawPty& pty) {
  std::string seen;
  while (seen.find("READY") == std::string::npos)
    if (pty.read_bytes(1, &seen) == 0)
      throw std::runtime_error("the floor's echo program ended: " + seen);
}

std::vector<double> raw_keystrokes(int keys) {
  RawPty pty(kEchoProgram);
  settle(pty);
  std::vector<double> samples;
  for (int i = 0; i < keys; ++i) {
    const auto t0 = Clock::now();
    pty.write_byte('x');
    std::string got;
    pty.read_bytes(1, &got);
    samples.push_back(ms_since(t0));
  }
  return samples;
}

double raw_throughput_mb_s(const std::string& file, std::size_t bytes) {
  const auto t0 = Clock::now();
  RawPty pty({"cat", file});
  const std::size_t got = pty.read_bytes(bytes);
  const double seconds = ms_since(t0) / 1000.0;
  if (got != bytes)
    throw std::runtime_error(fmt::format("the raw pty gave {} of {} bytes", got, bytes));
  return static_cast<double>(bytes) / 1e6 / seconds;
}

// --- rex: a process with a pty through a Runtime -------------------------------------------------

// A running terminal process's output, counted as it comes.
struct Terminal {
  explicit Terminal(asio::any_io_executor ex) : arrived(ex) {}
  std::size_t bytes = 0;
  std::string text;  // kept only while `keep` is set
  bool keep = false;
  bool ended = false;
  std::exception_ptr error;
  Event arrived;
};

std::shared_ptr<Terminal> start_terminal(asio::io_context& io, Runtime& rt,
                                         std::vector<std::string> argv, std::string tag) {
  auto t = std::make_shared<Terminal>(io.get_executor());
  ProcessConfig config;
  config.argv = std::move(argv);
  config.tag = std::move(tag);
  config.pty = TerminalSize{};
  config.keepalive = 0;
  Runtime::ProcessListener listen = [t](const ProcessEvent& e) {
    if (e.kind == ProcessEvent::Kind::stdout_data) {
      t->bytes += e.data.size();
      if (t->keep)
        t->text += e.data;
      t->arrived.set();
    }
    return true;
  };
  asio::co_spawn(io, rt.start_process(std::move(config), std::move(listen)),
                 [t](std::exception_ptr e, std::optional<ProcessEnd>) {
                   t->error = e;
                   t->ended = true;
                   t->arrived.set();
                 });
  return t;
}

asio::awaitable<void> wait_bytes(std::shared_ptr<Terminal> t, std::size_t at_least) {
  while (t->bytes < at_least && !t->ended) {
    t->arrived.reset();
    co_await t->arrived.wait();
  }
  if (t->error)
    std::rethrow_exception(t->error);
}

asio::awaitable<std::vector<double>> rex_keystrokes(asio::io_context& io, Runtime& rt, int keys,
                                                    std::string tag) {
  auto t = start_terminal(io, rt, kEchoProgram, tag);
  t->keep = true;
  while (t->text.find("READY") == std::string::npos && !t->ended) {
    t->arrived.reset();
    co_await t->arrived.wait();
  }
  t->keep = false;
  std::vector<double> samples;
  for (int i = 0; i < keys; ++i) {
    const std::size_t before = t->bytes;
    const auto t0 = Clock::now();
    ProcessInput key{.pid = 0, .tag = tag, .data = "x", .close = false};
    co_await rt.send_process_input(std::move(key));
    co_await wait_bytes(t, before + 1);
    samples.push_back(ms_since(t0));
  }
  ProcessSignal kill{.pid = 0, .tag = tag, .signal = "SIGKILL"};
  co_await rt.signal_process(std::move(kill));
  while (!t->ended) {
    t->arrived.reset();
    co_await t->arrived.wait();
  }
  co_return samples;
}

asio::awaitable<double> rex_throughput_mb_s(asio::io_context& io, Runtime& rt,
                                            const std::string& file, std::size_t bytes) {
  const auto t0 = Clock::now();
  auto t = start_terminal(io, rt, {"cat", file}, "throughput");
  while (!t->ended) {
    t->arrived.reset();
    co_await t->arrived.wait();
  }
  if (t->error)
    std::rethrow_exception(t->error);
  const double seconds = ms_since(t0) / 1000.0;
  if (t->bytes != bytes)
    throw std::runtime_error(fmt::format("the terminal gave {} of {} bytes", t->bytes, bytes));
  co_return static_cast<double>(bytes) / 1e6 / seconds;
}

asio::awaitable<std::vector<double>> bare_requests(asio::io_context& io, const std::string& url,
                                                   int n) {
  http::Client client(io.get_executor(), url);
  std::vector<double> samples;
  for (int i = 0; i < n; ++i) {
    http::ClientRequest get;
    get.method = "GET";
    get.target = "/is_alive";
    get.headers.emplace_back("X-API-Key", "bench");
    const auto t0 = Clock::now();
    const auto answer = co_await client.request(std::move(get));
    samples.push_back(ms_since(t0));
    if (answer.status != 200)
      throw std::runtime_error(fmt::format("GET /is_alive answered {}", answer.status));
  }
  co_return samples;
}

void row(std::string_view name, const Stats& rex_side, const Stats& floor) {
  fmt::print(
      "{:<34} p50 {:7.3f} ms  p99 {:7.3f} ms   floor p50 {:7.3f} ms  p99 {:7.3f} ms   "
      "ratio p50 {:.2f}x\n",
      name, rex_side.p50, rex_side.p99, floor.p50, floor.p99,
      floor.p50 > 0 ? rex_side.p50 / floor.p50 : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--smoke") {
      opt.smoke = true;
      opt.keys = 50;
      opt.megabytes = 4;
    } else if (a == "--keys" && i + 1 < argc) {
      opt.keys = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--megabytes" && i + 1 < argc) {
      opt.megabytes = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--server" && i + 1 < argc) {
      opt.server = argv[++i];
    } else {
      fmt::print(stderr,
                 "usage: rex_terminal_bench [--smoke] [--keys N] [--megabytes N] "
                 "[--server PATH]\n");
      return 2;
    }
  }
  try {
    asio::io_context io;
    rex::LocalRuntime local(io.get_executor());
    ChildServer server("rex-server",
                       {opt.server, "--auth-token", "bench", "--host", "127.0.0.1", "--port", "0"},
                       ChildServerOptions{.capture_stderr = true});
    RemoteRuntimeConfig rc;
    rc.url = server.url();
    rc.auth_token = "bench";
    rex::RemoteRuntime remote(io.get_executor(), rc);
    run_on(io, remote.wait_until_alive(10s));

    fmt::print("keystroke to echo ({} keys each; program: stty raw -echo; cat)\n", opt.keys);
    const Stats raw = stats_of(raw_keystrokes(opt.keys));
    const Stats in_process = stats_of(run_on(io, rex_keystrokes(io, local, opt.keys, "k-local")));
    row("local (LocalRuntime) vs raw pty", in_process, raw);
    const std::vector<double> bare = run_on(io, bare_requests(io, server.url(), opt.keys));
    const Stats over_loopback =
        stats_of(run_on(io, rex_keystrokes(io, remote, opt.keys, "k-remote")));
    const Stats bare_stats = stats_of(bare);
    const Stats framing_floor{raw.p50 + bare_stats.p50, raw.p90 + bare_stats.p90,
                              raw.p99 + bare_stats.p99, raw.max + bare_stats.max};
    row("rex-server vs raw pty + bare GET", over_loopback, framing_floor);
    row("rex-server vs raw pty", over_loopback, raw);

    const std::size_t bytes = static_cast<std::size_t>(opt.megabytes) * 1000 * 1000;
    const std::string file =
        std::filesystem::temp_directory_path() / fmt::format("rex-terminal-bench-{}", ::getpid());
    {
      std::ofstream out(file, std::ios::binary);
      std::string block(1 << 20, 'x');
      for (std::size_t i = 0; i < block.size(); ++i)
        block[i] = static_cast<char>('a' + i % 26);
      for (std::size_t left = bytes; left > 0;) {
        const std::size_t n = std::min(left, block.size());
        out.write(block.data(), static_cast<std::streamsize>(n));
        left -= n;
      }
    }
    fmt::print("\nthroughput of cat of {} MB through the terminal\n", opt.megabytes);
    const double raw_mb = raw_throughput_mb_s(file, bytes);
    const double local_mb = run_on(io, rex_throughput_mb_s(io, local, file, bytes));
    const double remote_mb = run_on(io, rex_throughput_mb_s(io, remote, file, bytes));
    std::filesystem::remove(file);
    fmt::print("{:<34} {:8.1f} MB/s   raw pty {:8.1f} MB/s   ratio {:.2f}x\n", "local", local_mb,
               raw_mb, local_mb / raw_mb);
    fmt::print("{:<34} {:8.1f} MB/s   raw pty {:8.1f} MB/s   ratio {:.2f}x\n", "rex-server",
               remote_mb, raw_mb, remote_mb / raw_mb);
    run_on(io, remote.close());
    run_on(io, local.close());
    server.stop(10s);
  } catch (const std::exception& e) {
    fmt::print(stderr, "rex_terminal_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
