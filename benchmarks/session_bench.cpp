// rex_bench: each rex figure measured next to its floor, in the same process and run.
//
// A floor is the same work done with raw system calls and nothing else: a bash in a pty that we
// open, spawn and read ourselves, or a posix_spawn with pipes. The targets are ratios of rex to
// its floor, so the figures mean the same thing on a fast or a slow machine. Rex and floor
// samples are taken in alternating blocks so that a noisy neighbour hurts both alike.
//
//   rex_bench [--smoke] [--iterations N] [--json] [--strict] [--only FIGURE]
//             [--swerex-python PATH] [--swerex-iterations N] [--no-swerex]
//
// Figures (lower is better unless noted):
//   echo           run_in_session("echo hi")               vs a raw pty round trip      <= 2x
//   create_session create_session (close timed apart)      vs spawn bash, first prompt   <= 2x
//   create_close   create_session + close_session          vs spawn, prompt, kill, reap  <= 2x
//   output_1mb     1 MB of output through run_in_session   vs the same through a raw pty <= 2x
//   execute_true   execute({"true"})                       vs posix_spawn + pipes        <= 1.5x
//   throughput     S sessions x C `echo`s on one thread    vs poll() over S raw ptys  >= 0.9x
//                  (ratio = rex commands/s / floor commands/s: higher is better)
//   sessions_N     N concurrent sessions, one `echo` each: time, success count, memory
//
// SWE-ReX, same run: beside each figure but sessions_N, the same calls on SWE-ReX's own
// LocalRuntime (swerex.runtime.local, swe-rex from the environment REX_SWEREX_ENV, driven by
// swerex_driver.py in a Python child process): its p50 and rex p50 / SWE-ReX p50 (throughput:
// rex commands/s / SWE-ReX commands/s, S' sessions x C' `echo`s gathered on its asyncio loop).
// SWE-ReX takes ~0.1-0.5 s a call, so it gets --swerex-iterations samples (default 30; 3 with
// --smoke; create_session half, output_1mb a third), spread over rex's blocks. Timed inside
// Python around each awaited call, as rex's are timed around each co_await. Without the
// environment (or with --no-swerex) the benchmark says so and measures the rest.
//
// --smoke: tiny counts, a few seconds; exits 0 even when a ratio misses (errors still fail).
// --strict: exit 1 when a figure misses its target. --json: one JSON object per figure on
// stdout (the table then goes to stderr).

#include <rex/protocol/actions.hpp>
#include <rex/protocol/commands.hpp>
#include <rex/protocol/session.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/session/shell_framing.hpp>

#include <fmt/core.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <termios.h>
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
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "swerex.hpp"

extern char** environ;

namespace {

namespace asio = boost::asio;
using namespace rex::bench;

// CPU time (user + system) this process has used, in milliseconds.
double self_cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + t.tv_usec / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// ---------------------------------------------------------------------------------------------
// Floor: a raw bash in a pty. The same bash rex starts (`--noediting --norc -i`, echo off on
// the terminal), with a fixed PS1 as the end-of-command marker; nothing else.

constexpr std::string_view kFloorPrompt = "FLOORPS1$ ";

// Our environment with the floor's prompt and rex's TERM; built once.
char** floor_environment() {
  static const auto storage = [] {
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string_view kv(*e);
      if (kv.starts_with("PS1=") || kv.starts_with("PROMPT_COMMAND=") || kv.starts_with("TERM="))
        continue;
      env.emplace_back(kv);
    }
    env.push_back("PS1=" + std::string(kFloorPrompt));
    env.emplace_back("TERM=xterm");
    return env;
  }();
  static std::vector<char*> pointers = [] {
    std::vector<char*> p;
    for (const auto& s : storage)
      p.push_back(const_cast<char*>(s.c_str()));
    p.push_back(nullptr);
    return p;
  }();
  return pointers.data();
}

class RawShell {
 public:
  // Opens a pty, turns echo off, and spawns bash on it as a session leader. Does not wait.
  RawShell() {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master_ < 0)
      throw_errno("posix_openpt");
    std::array<char, 128> name{};
    if (::grantpt(master_) != 0 || ::unlockpt(master_) != 0 ||
        ::ptsname_r(master_, name.data(), name.size()) != 0) {
      ::close(master_);
      throw_errno("grantpt/unlockpt/ptsname");
    }
    const int slave = ::open(name.data(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) {
      ::close(master_);
      throw_errno("open pty slave");
    }
    termios t{};
    ::tcgetattr(slave, &t);
    t.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOE | ECHOK | ECHONL);
    ::tcsetattr(slave, TCSANOW, &t);

    // The child: setsid, then open the slave (it becomes the controlling terminal) as 0, 1, 2.
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawnattr_init(&attr);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    ::posix_spawn_file_actions_addopen(&fa, 0, name.data(), O_RDWR, 0);
    ::posix_spawn_file_actions_adddup2(&fa, 0, 1);
    ::posix_spawn_file_actions_adddup2(&fa, 0, 2);
    std::array<char*, 5> argv{const_cast<char*>("/bin/bash"), const_cast<char*>("--noediting"),
                              const_cast<char*>("--norc"), const_cast<char*>("-i"), nullptr};
    const int rc = ::posix_spawn(&pid_, "/bin/bash", &fa, &attr, argv.data(), floor_environment());
    ::posix_spawn_file_actions_destroy(&fa);
    ::posix_spawnattr_destroy(&attr);
    ::close(slave);
    if (rc != 0) {
      ::close(master_);
      throw std::system_error(rc, std::generic_category(), "posix_spawn /bin/bash");
    }
    ::fcntl(master_, F_SETFL, ::fcntl(master_, F_GETFL) | O_NONBLOCK);
  }
  ~RawShell() { kill_and_reap(); }
  RawShell(const RawShell&) = delete;
  RawShell& operator=(const RawShell&) = delete;

  int fd() const { return master_; }
  // Bytes bash printed before the last prompt.
  std::size_t last_output_size() const { return last_output_; }

  // Diagnostic, not a floor: after the first prompt, install rex's own prompt and helpers
  // (ShellFraming) so that bash does exactly the work it does under rex for each command.
  // Rex against this shows rex's own cost; this against the plain floor shows bash's.
  void use_rex_framing() {
    framing_.emplace();
    send(framing_->setup_code() + "\n");
    wait_prompt();
  }
  // What to write for a command: the command itself, or what rex writes for it (the command
  // itself too when ShellFraming lets it go directly, as a plain `echo` does).
  std::string line_for(std::string_view command) const {
    if (framing_ && !rex::ShellFraming::inspect(command).direct)
      return framing_->command_line(command);
    return std::string(command) + "\n";
  }

  void send(std::string_view line) {
    while (!line.empty()) {
      const ssize_t n = ::write(master_, line.data(), line.size());
      if (n > 0) {
        line.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EAGAIN) {
        pollfd p{master_, POLLOUT, 0};
        ::poll(&p, 1, 1000);
      } else {
        throw_errno("write to pty");
      }
    }
  }

  // Reads what is there; true when the prompt has arrived (the buffer then starts over).
  bool read_available() {
    std::array<char, 65536> chunk;
    while (true) {
      const ssize_t n = ::read(master_, chunk.data(), chunk.size());
      if (n < 0 && errno == EAGAIN)
        return false;
      if (n <= 0)
        throw std::runtime_error("floor bash exited");
      buf_.append(chunk.data(), static_cast<std::size_t>(n));
      std::optional<std::size_t> pos;
      if (framing_) {
        std::size_t resume = 0;
        if (auto m = framing_->find_prompt(buf_, scanned_, resume))
          pos = m->begin;
        else
          scanned_ = resume;
      } else {
        // Look only at the new bytes (and a marker's length before them).
        const std::size_t from =
            scanned_ >= kFloorPrompt.size() ? scanned_ - kFloorPrompt.size() : 0;
        if (const std::size_t p = buf_.find(kFloorPrompt, from); p != std::string::npos)
          pos = p;
        else
          scanned_ = buf_.size();
      }
      if (pos) {
        last_output_ = *pos;
        buf_.clear();
        scanned_ = 0;
        return true;
      }
    }
  }

  // Blocks (poll + read) until the prompt arrives.
  void wait_prompt() {
    while (true) {
      pollfd p{master_, POLLIN, 0};
      const int rc = ::poll(&p, 1, 30000);
      if (rc == 0)
        throw std::runtime_error("floor bash: no prompt within 30 s");
      if (rc < 0 && errno != EINTR)
        throw_errno("poll");
      if (rc > 0 && read_available())
        return;
    }
  }

  // One command: write the line, read until the prompt.
  void round_trip(std::string_view line) {
    send(line);
    wait_prompt();
  }

  void kill_and_reap() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::close(master_);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
      master_ = -1;
    }
  }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  std::string buf_;
  std::size_t scanned_ = 0;
  std::size_t last_output_ = 0;
  std::optional<rex::ShellFraming> framing_;
};

// Floor of execute: posix_spawn /bin/true with stdout and stderr pipes, read both to EOF,
// waitpid. Returns the milliseconds it took.
double floor_execute_true() {
  const auto t0 = Clock::now();
  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    throw_errno("pipe2");
  if (::pipe2(err, O_CLOEXEC) != 0)
    throw_errno("pipe2");
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  ::posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::array<char*, 2> argv{const_cast<char*>("/bin/true"), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/bin/true", &fa, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0)
    throw std::system_error(rc, std::generic_category(), "posix_spawn /bin/true");
  std::array<pollfd, 2> p{pollfd{out[0], POLLIN, 0}, pollfd{err[0], POLLIN, 0}};
  std::array<char, 4096> buf;
  int open_pipes = 2;
  while (open_pipes > 0) {
    if (::poll(p.data(), p.size(), 10000) <= 0)
      throw std::runtime_error("floor execute: poll");
    for (auto& q : p) {
      if (q.fd >= 0 && q.revents != 0 && ::read(q.fd, buf.data(), buf.size()) <= 0) {
        ::close(q.fd);
        q.fd = -1;
        --open_pipes;
      }
    }
  }
  ::waitpid(pid, nullptr, 0);
  return ms_between(t0, Clock::now());
}

// Drives shells from one thread with poll(): each sends its next line as soon as its prompt
// arrives, until each has run `commands` lines. Per-command latencies go to `latencies`.
void floor_drive(std::vector<std::unique_ptr<RawShell>>& shells, int commands,
                 std::vector<double>& latencies) {
  const std::size_t n = shells.size();
  std::vector<pollfd> fds(n);
  std::vector<int> sent(n, 0);
  std::vector<Clock::time_point> started(n);
  auto send_next = [&](std::size_t i) {
    const std::string line = shells[i]->line_for("echo " + std::to_string(sent[i]));
    started[i] = Clock::now();
    shells[i]->send(line);
    ++sent[i];
  };
  for (std::size_t i = 0; i < n; ++i) {
    fds[i] = pollfd{shells[i]->fd(), POLLIN, 0};
    send_next(i);
  }
  std::size_t active = n;
  while (active > 0) {
    const int rc = ::poll(fds.data(), fds.size(), 30000);
    if (rc == 0)
      throw std::runtime_error("floor: no prompt within 30 s");
    if (rc < 0) {
      if (errno == EINTR)
        continue;
      throw_errno("poll");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      if (!shells[i]->read_available())
        continue;
      latencies.push_back(ms_between(started[i], Clock::now()));
      if (sent[i] < commands) {
        send_next(i);
      } else {
        fds[i].fd = -1;
        --active;
      }
    }
  }
}

// Waits with poll() until every shell has shown its prompt; records when each did, since t0.
void floor_wait_all_prompts(std::vector<std::unique_ptr<RawShell>>& shells, Clock::time_point t0,
                            std::vector<double>& ready_ms) {
  std::vector<pollfd> fds;
  for (const auto& s : shells)
    fds.push_back(pollfd{s->fd(), POLLIN, 0});
  std::size_t active = shells.size();
  while (active > 0) {
    const int rc = ::poll(fds.data(), fds.size(), 30000);
    if (rc == 0)
      throw std::runtime_error("floor: no prompt within 30 s");
    if (rc < 0) {
      if (errno == EINTR)
        continue;
      throw_errno("poll");
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      if (!shells[i]->read_available())
        continue;
      ready_ms.push_back(ms_between(t0, Clock::now()));
      fds[i].fd = -1;
      --active;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Rex side. Coroutines run on the one io_context; main drives it with run_one() until they are
// done, so the floors run in between with the io_context idle.

rex::Action make_action(const std::string& session, const std::string& command) {
  rex::BashAction a;
  a.command = command;
  a.session = session;
  a.timeout = 30.0;  // agents always pass one; costs rex a timer per command
  a.check = "raise";
  return rex::Action{std::move(a)};
}

rex::CreateBashSessionRequest make_create(const std::string& session, double startup_timeout) {
  rex::CreateBashSessionRequest r;
  r.session = session;
  r.startup_timeout = startup_timeout;
  return r;
}

// n commands in one session, timed one by one; checks the output size.
asio::awaitable<std::vector<double>> rex_commands(rex::LocalRuntime& rt, std::string session,
                                                  std::string command, int n,
                                                  std::size_t expected_output) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    rex::Action action = make_action(session, command);
    const auto t0 = Clock::now();
    rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
    samples.push_back(ms_between(t0, Clock::now()));
    if (obs.output.size() != expected_output) {
      throw std::runtime_error(fmt::format("rex: {} printed {} bytes, expected {}", command,
                                           obs.output.size(), expected_output));
    }
  }
  co_return samples;
}

asio::awaitable<double> rex_create(rex::LocalRuntime& rt, std::string session) {
  rex::CreateBashSessionRequest request = make_create(session, 10.0);
  const auto t0 = Clock::now();
  rex::CreateBashSessionResponse response = co_await rt.create_session(std::move(request));
  co_return ms_between(t0, Clock::now());
}

asio::awaitable<double> rex_close(rex::LocalRuntime& rt, std::string session) {
  rex::CloseBashSessionRequest request;
  request.session = session;
  const auto t0 = Clock::now();
  rex::CloseBashSessionResponse response = co_await rt.close_session(std::move(request));
  co_return ms_between(t0, Clock::now());
}

asio::awaitable<std::vector<double>> rex_execute_true(rex::LocalRuntime& rt, int n) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    rex::Command command;
    command.command = std::vector<std::string>{"true"};
    const auto t0 = Clock::now();
    rex::CommandResponse response = co_await rt.execute(std::move(command));
    samples.push_back(ms_between(t0, Clock::now()));
    if (response.exit_code != 0)
      throw std::runtime_error("rex: `true` did not exit 0");
  }
  co_return samples;
}

// Throughput worker: `commands` echos one after the other in its own session.
asio::awaitable<int> rex_echo_worker(rex::LocalRuntime& rt, std::string session, int commands,
                                     std::vector<double>* latencies) {
  for (int k = 0; k < commands; ++k) {
    const std::string command = "echo " + std::to_string(k);
    rex::Action action = make_action(session, command);
    const auto t0 = Clock::now();
    rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
    latencies->push_back(ms_between(t0, Clock::now()));
    if (obs.output != std::to_string(k) + "\n")
      throw std::runtime_error("rex: wrong echo output");
  }
  co_return commands;
}

// Opens a session; records when it was ready, since t0.
asio::awaitable<int> rex_open_worker(rex::LocalRuntime& rt, std::string session,
                                     Clock::time_point t0, std::vector<double>* ready_ms) {
  rex::CreateBashSessionRequest request = make_create(session, 60.0);
  rex::CreateBashSessionResponse response = co_await rt.create_session(std::move(request));
  ready_ms->push_back(ms_between(t0, Clock::now()));
  co_return 1;
}

asio::awaitable<int> rex_echo_once(rex::LocalRuntime& rt, std::string session) {
  rex::Action action = make_action(session, "echo hi");
  rex::BashObservation obs = co_await rt.run_in_session(std::move(action));
  if (obs.output != "hi\n")
    throw std::runtime_error("rex: wrong echo output");
  co_return 1;
}

asio::awaitable<int> rex_close_worker(rex::LocalRuntime& rt, std::string session) {
  rex::CloseBashSessionRequest request;
  request.session = session;
  rex::CloseBashSessionResponse response = co_await rt.close_session(std::move(request));
  co_return 1;
}

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  bool smoke = false;
  bool json = false;
  bool strict = false;
  int iterations = 1000;  // echo and execute; the slower figures take a fraction of it
  int tp_sessions = 200;
  int tp_commands = 20;
  int tp_rounds = 3;
  int many_sessions = 1000;
  std::string only;  // run just this figure (its name in the table, or "sessions")
  bool swerex = true;
  std::string swerex_python = REX_SWEREX_PYTHON;
  int swerex_iterations = 30;  // echo and execute_true; create N/2, output_1mb N/3 (at least 2)
  int swerex_tp_sessions = 5;
  int swerex_tp_commands = 4;
};

// ---------------------------------------------------------------------------------------------
// Figures

// Round trips of `command` through rex and through the raw pty, in alternating blocks; SWE-ReX's
// LocalRuntime runs the same command (its driver's operation `name`) in blocks of its own.
Result bench_round_trip(asio::io_context& io, rex::LocalRuntime& rt, const std::string& name,
                        const std::string& command, std::size_t rex_output,
                        std::size_t floor_output, int iterations, int block, double target,
                        SwerexPart swerex) {
  const std::string session = "bench-" + name;
  run_on(io, rex_create(rt, session));
  RawShell shell;
  shell.wait_prompt();
  const std::string line = shell.line_for(command);
  RawShell framed;  // diagnostic: the floor with rex's framing
  framed.wait_prompt();
  framed.use_rex_framing();
  const std::string framed_line = framed.line_for(command);

  // Warm up all three, and check that the floor really sees only the output (echo is off).
  const int warmup = std::max(3, std::min(50, iterations / 10));
  run_on(io, rex_commands(rt, session, command, warmup, rex_output));
  for (int i = 0; i < warmup; ++i) {
    shell.round_trip(line);
    framed.round_trip(framed_line);
  }
  if (shell.last_output_size() != floor_output) {
    throw std::runtime_error(fmt::format("floor: {} printed {} bytes, expected {}", command,
                                         shell.last_output_size(), floor_output));
  }
  std::vector<double> swerex_samples;
  swerex.run(name, 1, swerex_samples);  // its session is created here, untimed
  swerex_samples.clear();

  std::vector<double> rex_samples;
  std::vector<double> floor_samples;
  std::vector<double> framed_samples;
  auto raw_block = [](RawShell& sh, const std::string& ln, int n, std::vector<double>& out) {
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      sh.round_trip(ln);
      out.push_back(ms_between(t0, Clock::now()));
    }
  };
  // Blocks of rex, floor, framed floor and SWE-ReX (its samples spread over the blocks), in a
  // rotating order.
  const int blocks = (iterations + block - 1) / block;
  const int sides = swerex.active() ? 4 : 3;
  for (int done = 0, b = 0; done < iterations; done += block, ++b) {
    const int n = std::min(block, iterations - done);
    for (int k = 0; k < sides; ++k) {
      switch ((b + k) % sides) {
        case 0: {
          const auto samples = run_on(io, rex_commands(rt, session, command, n, rex_output));
          rex_samples.insert(rex_samples.end(), samples.begin(), samples.end());
          break;
        }
        case 1:
          raw_block(shell, line, n, floor_samples);
          break;
        case 2:
          raw_block(framed, framed_line, n, framed_samples);
          break;
        default:
          if (const int m = spread(b, blocks, swerex.samples()); m > 0)
            swerex.run(name, m, swerex_samples);
          break;
      }
    }
  }
  run_on(io, rex_close(rt, session));

  Result r = ratio_result(name, rex_samples, floor_samples, target);
  const double framed_p50 = stats_of(framed_samples).p50;
  r.note = fmt::format("rex p50 {:.0f} us, floor p50 {:.0f} us; floor+rex framing {:.0f} us",
                       r.rex.p50 * 1000, r.floor_p50 * 1000, framed_p50 * 1000);
  swerex.report(r, swerex_samples, r.rex.p50);
  r.extra["p50_us"] = r.rex.p50 * 1000;
  r.extra["floor_p50_us"] = r.floor_p50 * 1000;
  r.extra["framed_floor_p50_ms"] = framed_p50;
  return r;
}

// create_session and close_session, timed apart, vs spawn-to-first-prompt and kill+reap.
// SWE-ReX: its own create_session then close_session, timed apart, now and then in between.
std::vector<Result> bench_create(asio::io_context& io, rex::LocalRuntime& rt, int iterations,
                                 SwerexPart swerex) {
  std::vector<double> rex_create_ms, rex_total_ms, floor_create_ms, floor_total_ms;
  std::vector<double> swerex_create_ms, swerex_total_ms;
  auto swerex_once = [&](bool record) {
    swerex.attempt([&] {
      const boost::json::object answer = swerex.driver().call({{"op", "create_close"}, {"n", 1}});
      const auto create = SwerexDriver::samples_of(answer);
      const auto close = SwerexDriver::samples_of(answer, "close_ms");
      if (record) {
        swerex_create_ms.push_back(create.at(0));
        swerex_total_ms.push_back(create.at(0) + close.at(0));
      }
    });
  };
  auto floor_once = [&](bool record) {
    const auto t0 = Clock::now();
    auto shell = std::make_unique<RawShell>();
    shell->wait_prompt();
    const auto t1 = Clock::now();
    shell.reset();  // SIGKILL, close, waitpid
    if (record) {
      floor_create_ms.push_back(ms_between(t0, t1));
      floor_total_ms.push_back(ms_between(t0, Clock::now()));
    }
  };
  auto rex_once = [&](bool record) {
    const double create = run_on(io, rex_create(rt, "bench-create"));
    const double close = run_on(io, rex_close(rt, "bench-create"));
    if (record) {
      rex_create_ms.push_back(create);
      rex_total_ms.push_back(create + close);
    }
  };
  for (int i = 0; i < 5; ++i) {
    rex_once(false);
    floor_once(false);
  }
  swerex_once(false);
  for (int i = 0; i < iterations; ++i) {
    if (i % 2 == 0) {
      rex_once(true);
      floor_once(true);
    } else {
      floor_once(true);
      rex_once(true);
    }
    if (spread(i, iterations, swerex.samples()) > 0)
      swerex_once(true);
  }
  Result create = ratio_result("create_session", rex_create_ms, floor_create_ms, 2.0);
  create.note = "close excluded";
  Result total = ratio_result("create_close", rex_total_ms, floor_total_ms, 2.0);
  total.note = fmt::format("close alone: rex p50 {:.2f} ms",
                           stats_of(rex_total_ms).p50 - stats_of(rex_create_ms).p50);
  swerex.report(create, swerex_create_ms, create.rex.p50);
  swerex.report(total, swerex_total_ms, total.rex.p50);
  return {create, total};
}

Result bench_execute(asio::io_context& io, rex::LocalRuntime& rt, int iterations,
                     SwerexPart swerex) {
  const int block = 25;
  run_on(io, rex_execute_true(rt, 20));
  for (int i = 0; i < 20; ++i)
    floor_execute_true();
  std::vector<double> swerex_samples;
  swerex.run("execute_true", 3, swerex_samples);  // warm-up
  swerex_samples.clear();
  std::vector<double> rex_samples;
  std::vector<double> floor_samples;
  const int blocks = (iterations + block - 1) / block;
  for (int done = 0, b = 0; done < iterations; done += block, ++b) {
    const int n = std::min(block, iterations - done);
    auto floor_block = [&] {
      for (int i = 0; i < n; ++i)
        floor_samples.push_back(floor_execute_true());
    };
    if (b % 2 == 1)
      floor_block();
    const auto samples = run_on(io, rex_execute_true(rt, n));
    rex_samples.insert(rex_samples.end(), samples.begin(), samples.end());
    if (b % 2 == 0)
      floor_block();
    if (const int m = spread(b, blocks, swerex.samples()); m > 0)
      swerex.run("execute_true", m, swerex_samples);
  }
  Result r = ratio_result("execute_true", rex_samples, floor_samples, 1.5);
  r.note =
      fmt::format("rex p50 {:.0f} us, floor p50 {:.0f} us", r.rex.p50 * 1000, r.floor_p50 * 1000);
  swerex.report(r, swerex_samples, r.rex.p50);
  return r;
}

// S sessions x C commands, all at once on this one thread, vs poll() over S raw ptys.
// SWE-ReX: its LocalRuntime with S' sessions x C' `echo`s, gathered on its asyncio loop, a round
// of its own in the rotation.
Result bench_throughput(asio::io_context& io, rex::LocalRuntime& rt, const Options& opt,
                        SwerexPart swerex) {
  const int s = opt.tp_sessions;
  const int c = opt.tp_commands;
  std::vector<std::string> names;
  for (int i = 0; i < s; ++i)
    names.push_back("bench-tp-" + std::to_string(i));
  for (const auto& name : names)
    run_on(io, rex_create(rt, name));
  std::vector<std::unique_ptr<RawShell>> shells;
  std::vector<std::unique_ptr<RawShell>> framed;  // diagnostic: floor shells with rex's framing
  for (int i = 0; i < s; ++i) {
    shells.push_back(std::make_unique<RawShell>());
    framed.push_back(std::make_unique<RawShell>());
  }
  for (int i = 0; i < s; ++i) {
    shells[static_cast<std::size_t>(i)]->wait_prompt();
    framed[static_cast<std::size_t>(i)]->wait_prompt();
    framed[static_cast<std::size_t>(i)]->use_rex_framing();
  }

  // One round: every command of every session, timed as a whole; rounds rotate between rex,
  // the floor and the framed floor. Our own CPU time is recorded too: when bash saturates the
  // cores, rex's thread is not what limits the rate.
  struct Side {
    std::vector<double> latency, rate, cpu_us_per_cmd;
  };
  Side rex_side, floor_side, framed_side;
  const double total = static_cast<double>(s) * c;
  auto timed_round = [&](Side& side, bool record, auto body) {
    std::vector<double> lat;
    lat.reserve(static_cast<std::size_t>(total));
    const double cpu0 = self_cpu_ms();
    const auto t0 = Clock::now();
    body(lat);
    const double secs = ms_between(t0, Clock::now()) / 1000;
    const double cpu = self_cpu_ms() - cpu0;
    if (record) {
      side.rate.push_back(total / secs);
      side.cpu_us_per_cmd.push_back(cpu * 1000 / total);
      side.latency.insert(side.latency.end(), lat.begin(), lat.end());
    }
  };
  auto rex_round = [&](bool record) {
    timed_round(rex_side, record, [&](std::vector<double>& lat) {
      const BatchResult b = run_all(io, s, [&](int i) {
        return rex_echo_worker(rt, names[static_cast<std::size_t>(i)], c, &lat);
      });
      if (b.failed > 0)
        throw std::runtime_error("rex throughput: " + b.first_error);
    });
  };
  auto floor_round = [&](bool record) {
    timed_round(floor_side, record, [&](std::vector<double>& lat) { floor_drive(shells, c, lat); });
  };
  auto framed_round = [&](bool record) {
    timed_round(framed_side, record,
                [&](std::vector<double>& lat) { floor_drive(framed, c, lat); });
  };
  std::vector<double> swerex_rate, swerex_latency;
  auto swerex_round = [&](int commands, bool record) {
    swerex.attempt([&] {
      const boost::json::object answer = swerex.driver().call(
          {{"op", "throughput"}, {"sessions", opt.swerex_tp_sessions}, {"commands", commands}});
      if (record) {
        swerex_rate.push_back(answer.at("commands_per_s").to_number<double>());
        const auto lat = SwerexDriver::samples_of(answer);
        swerex_latency.insert(swerex_latency.end(), lat.begin(), lat.end());
      }
    });
  };
  rex_round(false);  // warm-up
  floor_round(false);
  framed_round(false);
  swerex_round(1, false);  // its sessions are created here, untimed
  const int sides = swerex.active() ? 4 : 3;
  for (int round = 0; round < opt.tp_rounds; ++round) {
    for (int k = 0; k < sides; ++k) {
      switch ((round + k) % sides) {
        case 0:
          rex_round(true);
          break;
        case 1:
          floor_round(true);
          break;
        case 2:
          framed_round(true);
          break;
        default:
          swerex_round(opt.swerex_tp_commands, true);
          break;
      }
    }
  }
  shells.clear();
  framed.clear();
  for (const auto& name : names)
    run_on(io, rex_close(rt, name));

  Result r;
  r.name = "throughput";
  r.rex = stats_of(rex_side.latency);  // per-command latency under the full load
  r.floor_p50 = stats_of(floor_side.latency).p50;
  const double rex_rate = median(rex_side.rate);
  const double floor_rate = median(floor_side.rate);
  const double framed_rate = median(framed_side.rate);
  r.ratio = rex_rate / floor_rate;
  r.target = 0.9;
  r.higher_is_better = true;
  r.verdict = judge(r.ratio, 0.9, true);
  r.note = fmt::format(
      "{}x{}: rex {:.0f} cmd/s, floor {:.0f} cmd/s (higher is better); floor+rex framing {:.0f} "
      "cmd/s; own CPU/cmd rex {:.0f} us, floor {:.0f} us",
      s, c, rex_rate, floor_rate, framed_rate, median(rex_side.cpu_us_per_cmd),
      median(floor_side.cpu_us_per_cmd));
  r.extra["framed_floor_commands_per_s"] = framed_rate;
  r.extra["rex_self_cpu_us_per_command"] = median(rex_side.cpu_us_per_cmd);
  r.extra["floor_self_cpu_us_per_command"] = median(floor_side.cpu_us_per_cmd);
  r.extra["sessions"] = s;
  r.extra["commands_per_session"] = c;
  r.extra["rex_commands_per_s"] = rex_rate;
  r.extra["floor_commands_per_s"] = floor_rate;
  r.extra["higher_is_better"] = true;
  if (SwerexFigure* f = swerex.report(r, swerex_latency, r.rex.p50)) {
    const double rate = median(swerex_rate);
    f->ratio = rate > 0 ? rex_rate / rate : 0;  // rates: higher is better
    r.note += fmt::format(" per command; SWE-ReX {}x{}: {:.1f} cmd/s", opt.swerex_tp_sessions,
                          opt.swerex_tp_commands, rate);
    r.extra["swerex_commands_per_s"] = rate;
    r.extra["swerex_sessions"] = opt.swerex_tp_sessions;
    r.extra["swerex_commands_per_session"] = opt.swerex_tp_commands;
  }
  return r;
}

// N sessions opened concurrently, one echo in each, then closed; rex's memory per session.
Result bench_many(asio::io_context& io, rex::LocalRuntime& rt, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i)
    names.push_back("bench-many-" + std::to_string(i));
  auto name_of = [&](int i) -> const std::string& { return names[static_cast<std::size_t>(i)]; };

  const long rss_before = vm_rss_kib();
  std::vector<double> ready_ms;
  const auto t0 = Clock::now();
  const BatchResult opened =
      run_all(io, n, [&](int i) { return rex_open_worker(rt, name_of(i), t0, &ready_ms); });
  const auto t1 = Clock::now();
  const long rss_after = vm_rss_kib();
  const BatchResult echoed = run_all(io, n, [&](int i) { return rex_echo_once(rt, name_of(i)); });
  const auto t2 = Clock::now();
  const BatchResult closed =
      run_all(io, n, [&](int i) { return rex_close_worker(rt, name_of(i)); });
  const auto t3 = Clock::now();

  // Floor: spawn N raw shells, wait for every prompt with poll(), one echo in each, kill all.
  std::vector<double> floor_ready_ms;
  std::vector<double> floor_echo_ms;
  const auto f0 = Clock::now();
  std::vector<std::unique_ptr<RawShell>> shells;
  for (int i = 0; i < n; ++i)
    shells.push_back(std::make_unique<RawShell>());
  floor_wait_all_prompts(shells, f0, floor_ready_ms);
  const auto f1 = Clock::now();
  floor_drive(shells, 1, floor_echo_ms);
  const auto f2 = Clock::now();
  shells.clear();
  const auto f3 = Clock::now();

  Result r;
  r.name = "sessions_" + std::to_string(n);
  r.target_text = "all ok";
  r.rex = stats_of(ready_ms);  // time until each session was usable, from the start
  r.floor_p50 = stats_of(floor_ready_ms).p50;
  const double rex_total = ms_between(t0, t2);
  const double floor_total = ms_between(f0, f2);
  r.ratio = rex_total / floor_total;  // open + echo, informational
  const bool all_ok = opened.ok == n && echoed.ok == n && closed.ok == n;
  r.verdict = all_ok ? Verdict::pass : Verdict::miss;
  const double kib_per_session = static_cast<double>(rss_after - rss_before) / n;
  r.note = fmt::format(
      "ok {}/{}; open {:.0f} ms, echo {:.0f} ms, close {:.0f} ms; floor open {:.0f} ms, echo "
      "{:.0f} ms; rex RSS {:.1f} KiB/session",
      std::min({opened.ok, echoed.ok, closed.ok}), n, ms_between(t0, t1), ms_between(t1, t2),
      ms_between(t2, t3), ms_between(f0, f1), ms_between(f1, f2), kib_per_session);
  if (!all_ok) {
    const std::string& e = !opened.first_error.empty()   ? opened.first_error
                           : !echoed.first_error.empty() ? echoed.first_error
                                                         : closed.first_error;
    r.note += "; first error: " + e;
  }
  r.extra["sessions"] = n;
  r.extra["opened_ok"] = opened.ok;
  r.extra["echo_ok"] = echoed.ok;
  r.extra["closed_ok"] = closed.ok;
  r.extra["open_ms"] = ms_between(t0, t1);
  r.extra["echo_ms"] = ms_between(t1, t2);
  r.extra["close_ms"] = ms_between(t2, t3);
  r.extra["total_ms"] = rex_total;
  r.extra["floor_open_ms"] = ms_between(f0, f1);
  r.extra["floor_echo_ms"] = ms_between(f1, f2);
  r.extra["floor_close_ms"] = ms_between(f2, f3);
  r.extra["floor_total_ms"] = floor_total;
  r.extra["rss_before_kib"] = rss_before;
  r.extra["rss_after_open_kib"] = rss_after;
  r.extra["rss_per_session_kib"] = kib_per_session;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Command line

int usage(const char* argv0, int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: {} [--smoke] [--iterations N] [--json] [--strict] [--only FIGURE]\n"
             "  --smoke         tiny counts (seconds); exit 0 even when a ratio misses\n"
             "  --iterations N  samples of echo and execute_true (default 1000); create_session\n"
             "                  takes N/10 and output_1mb N/20\n"
             "  --json          one JSON object per figure on stdout (table on stderr)\n"
             "  --strict        exit 1 when a figure misses its target\n"
             "  --only FIGURE   run one figure: echo, create_session, output_1mb,\n"
             "                  execute_true, throughput or sessions\n"
             "  --swerex-python PATH  the Python whose swe-rex is measured beside rex (default\n"
             "                  {})\n"
             "  --swerex-iterations N  SWE-ReX's echo and execute_true samples (default 30)\n"
             "  --no-swerex     do not measure SWE-ReX\n",
             argv0, REX_SWEREX_PYTHON);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::optional<int> iterations;
  std::optional<int> swerex_iterations;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--smoke") {
      opt.smoke = true;
    } else if (a == "--json") {
      opt.json = true;
    } else if (a == "--strict") {
      opt.strict = true;
    } else if (a == "--iterations" && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
      if (*iterations <= 0)
        return usage(argv[0], 2);
    } else if (a == "--only" && i + 1 < argc) {
      opt.only = argv[++i];
    } else if (a == "--swerex-python" && i + 1 < argc) {
      opt.swerex_python = argv[++i];
    } else if (a == "--swerex-iterations" && i + 1 < argc) {
      swerex_iterations = std::atoi(argv[++i]);
      if (*swerex_iterations <= 0)
        return usage(argv[0], 2);
    } else if (a == "--no-swerex") {
      opt.swerex = false;
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else {
      return usage(argv[0], 2);
    }
  }
  if (opt.smoke) {
    opt.iterations = 40;
    opt.tp_sessions = 20;
    opt.tp_commands = 5;
    opt.tp_rounds = 1;
    opt.many_sessions = 50;
    opt.swerex_iterations = 3;
    opt.swerex_tp_sessions = 2;
    opt.swerex_tp_commands = 2;
  }
  if (iterations)
    opt.iterations = *iterations;
  if (swerex_iterations)
    opt.swerex_iterations = *swerex_iterations;
  ::signal(SIGPIPE, SIG_IGN);  // a SWE-ReX driver that died fails its call instead
  raise_fd_limit();

  std::FILE* table = opt.json ? stderr : stdout;
  fmt::print(table, "rex_bench{}: {} iterations; throughput {}x{}; {} concurrent sessions\n",
             opt.smoke ? " --smoke" : "", opt.iterations, opt.tp_sessions, opt.tp_commands,
             opt.many_sessions);
  std::fflush(table);

  // SWE-ReX's LocalRuntime, in a Python child process started before anything else runs.
  const bool swerex_figures = opt.only != "sessions";
  SwerexSetup setup = swerex_setup(opt.swerex_python, opt.swerex && swerex_figures);
  std::unique_ptr<SwerexDriver> swerex;
  if (setup.usable()) {
    try {
      swerex = std::make_unique<SwerexDriver>(setup, "local");
      fmt::print(table, "SWE-ReX: {}, its LocalRuntime measured beside rex\n",
                 swerex->description());
    } catch (const std::exception& e) {
      setup.unavailable = e.what();
    }
  }
  if (!swerex && swerex_figures)
    fmt::print(table, "SWE-ReX: not measured: {}\n", setup.unavailable);
  std::fflush(table);
  auto swerex_part = [&](int samples) {
    return swerex ? SwerexPart(std::max(2, samples), swerex.get()) : SwerexPart();
  };

  asio::io_context io;
  auto work = asio::make_work_guard(io);
  rex::LocalRuntime rt(io.get_executor());

  std::vector<Result> results;
  int errors = 0;
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
  const int n = opt.iterations;
  const int sn = opt.swerex_iterations;
  figure("echo", [&] {
    results.push_back(
        bench_round_trip(io, rt, "echo", "echo hi", 3, 4, n, 25, 2.0, swerex_part(sn)));
  });
  figure("create_session", [&] {
    for (auto& r : bench_create(io, rt, std::max(5, n / 10), swerex_part(sn / 2)))
      results.push_back(std::move(r));
  });
  figure("output_1mb", [&] {
    results.push_back(bench_round_trip(io, rt, "output_1mb",
                                       "head -c 1000000 /dev/zero | tr '\\0' a", 1000000, 1000000,
                                       std::max(3, n / 20), 5, 2.0, swerex_part(sn / 3)));
  });
  figure("execute_true", [&] { results.push_back(bench_execute(io, rt, n, swerex_part(sn))); });
  figure("throughput", [&] { results.push_back(bench_throughput(io, rt, opt, swerex_part(1))); });
  figure("sessions", [&] { results.push_back(bench_many(io, rt, opt.many_sessions)); });
  try {
    run_on(io, rt.close());
  } catch (const std::exception& e) {
    ++errors;
    fmt::print(stderr, "closing the runtime failed: {}\n", e.what());
  }
  if (swerex)
    swerex->finish();  // closes its sessions
  for (auto& r : results) {
    if (!r.swerex && !setup.usable() && !r.name.starts_with("sessions_"))
      r.extra["swerex"] = "not measured: " + setup.unavailable;
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
