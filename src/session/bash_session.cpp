#include <rex/session/bash_session.hpp>

#include <rex/core/async_mutex.hpp>
#include <rex/core/event.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/session/output.hpp>
#include <rex/session/shell_framing.hpp>

#include "session/command_machine.hpp"
#include "session/session_processes.hpp"

#include "core/process_end.hpp"
#include "core/pty.hpp"
#include "core/spawn.hpp"
#include "core/unique_fd.hpp"

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace rex {
namespace {

using Clock = std::chrono::steady_clock;
using boost::system::error_code;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kCleanSlice = 1 << 20;  // yield to other work between 1 MiB slices
// How long a command, an interrupt or an attach waits for an attached terminal to leave.
constexpr auto kDetachGrace = std::chrono::seconds(2);

Clock::time_point deadline_after(std::optional<double> seconds) {
  if (!seconds || *seconds < 0)
    return Clock::time_point::max();
  return Clock::now() + duration_from_seconds(*seconds);
}

// SWE-ReX strips the echo of an interactive command from its output.
std::string strip_interactive_echo(std::string output, std::string_view command) {
  auto first = output.find_first_not_of(" \t\n\r\f\v");
  output.erase(0, first == std::string::npos ? output.size() : first);
  if (output.starts_with(command))
    output.erase(0, command.size());
  first = output.find_first_not_of(" \t\n\r\f\v");
  output.erase(0, first == std::string::npos ? output.size() : first);
  auto last = output.find_last_not_of(" \t\n\r\f\v");
  output.erase(last == std::string::npos ? 0 : last + 1);
  return output;
}

std::string trim(std::string s) {
  return strip_interactive_echo(std::move(s), {});
}

constexpr std::string_view kSessionTagName = "REX_SESSION";

bool ignores_sigint(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("SigIgn:")) {
      const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
      return (mask >> (SIGINT - 1)) & 1ULL;
    }
  }
  return false;
}

// What to do about a resource limit, for messages; empty for other errors.
std::string_view limit_hint(int err) {
  if (err == EMFILE || err == ENFILE)
    return "; close sessions or raise the limit on open files (ulimit -n)";
  if (err == EAGAIN)
    return "; close sessions or raise the limit on processes (ulimit -u, pids limit)";
  return {};
}

[[noreturn]] void throw_errno(const char* what) {
  const int err = errno;
  throw OSError(fmt::format("{}: [Errno {}] {}{}", what, err, std::strerror(err), limit_hint(err)),
                {{"errno", err}});
}

[[noreturn]] void throw_spawn_failure(const std::system_error& e) {
  const int err = e.code().value();
  throw OSError(fmt::format("cannot start bash: {}{}", e.what(), limit_hint(err)),
                {{"errno", err}});
}

}  // namespace

struct BashSession::Impl : std::enable_shared_from_this<Impl> {
  enum class State { not_started, idle, running, dead, closed };

  // The session's operation lock: one command (or start, or close) at a time.
  using Lock = AsyncMutex::Guard;

  using Stop = CommandMachine::Stop;
  using Action = CommandMachine::Action;

  Impl(asio::any_io_executor executor, BashSessionConfig config)
      : ex(std::move(executor)),
        cfg(std::move(config)),
        master(ex),
        pidfd(ex),
        read_timer(ex),
        exited(ex),
        detached(ex) {
    detached.set();
  }

  ~Impl() { kill_everything(); }

  bool attached() const noexcept { return !detached.is_set(); }

  asio::any_io_executor ex;
  BashSessionConfig cfg;
  ShellFraming framing;
  CommandMachine machine{framing};  // the output and the decisions of every operation
  std::string tag;  // "REX_SESSION=<marker>", in the environment of every process it starts
  detail::SessionProcesses processes;  // how the session's processes are found and ended
  const std::vector<std::string> no_expect{};
  asio::posix::stream_descriptor master;
  asio::posix::stream_descriptor pidfd;
  asio::steady_timer read_timer;
  Event exited;  // set when bash has exited and was reaped
  pid_t pid = -1;
  bool reaped = false;
  int wait_status = 0;
  State state = State::not_started;
  bool interactive = false;  // running because an interactive program holds the terminal
  // Set while no terminal is attached; a terminal lent to a person (attach) makes the session's
  // commands wait, then be refused.
  Event detached;
  std::string ended_because;  // why rex ended bash itself, when it did
  // $? as the next command should see it. Known from framed commands' prompts; after an
  // interactive program the status of its last input is unknown and counts as 0.
  int last_status = 0;
  // What the last prompt said (ShellFraming): bash's command number and its job count.
  std::uint64_t command_number = 0;
  int jobs = 0;
  // Text that may change the prompt later has run (or rc files did): the session needs the
  // PROMPT_COMMAND guard. `guarded` and `flushing`: what PROMPT_COMMAND holds (ShellFraming),
  // as of the last eval line that completed.
  bool tainted = false;
  bool guarded = false;
  bool flushing = false;
  // Bash runs PROMPT_COMMAND arrays (5.1+); without them, eval delivery does the guard's and the
  // jobs flush's work for every command that needs them.
  bool prompt_command_arrays = true;
  bool exported_functions = false;  // bash inherits functions from the environment
  termios baseline{};               // terminal modes commands start from

  // The wait timer (arm_wait_timer): whether a wait is in progress, and the timer's queued
  // wait, if any (its expiry; the callbacks of earlier ones see another generation).
  bool waiting = false;
  bool timer_queued = false;
  Clock::time_point timer_expiry{};
  std::uint64_t timer_gen = 0;

  AsyncMutex operation{ex};

  std::string command_line;  // the line of the command that runs (CommandMachine refers to it)

  std::array<char, 65536> chunk{};  // last: the members above share a few cache lines

  // ---- lifetime -----------------------------------------------------------------------------

  void on_exit() {
    reap();
    if (!reaped) {
      // A readiness report for a descriptor number that was closed and reused can arrive
      // stale; only an exit that waitpid confirms counts.
      watch_exit();
      return;
    }
    if (state != State::closed)
      state = State::dead;
    error_code ignored;
    master.cancel(ignored);
  }

  void reap() {
    if (reaped || pid <= 0)
      return;
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      reaped = true;
      wait_status = status;
      cancel_wait_timer();
      exited.set();
    }
  }

  void watch_exit() {
    pidfd.async_wait(asio::posix::descriptor_base::wait_read,
                     [w = weak_from_this()](const error_code& ec) {
                       if (auto self = w.lock(); self && !ec)
                         self->on_exit();
                     });
  }

  // Synchronous last resort (destructor, a failed start): bash's process group is killed now,
  // the rest of the session and collecting bash are left to the reaper's thread.
  void kill_everything() {
    if (pid > 0 && !reaped)
      ::kill(-pid, SIGKILL);
    processes.end_detached(remains());
    state = State::closed;
  }

  // What the session's ending finishes off the event loop: its descriptors, and bash when it
  // has not been collected. Waits on them end (with operation_aborted).
  detail::SessionProcesses::Remains remains() {
    detail::SessionProcesses::Remains r;
    if (master.is_open())
      r.fds.push_back(master.release());
    const int exit_fd = pidfd.is_open() ? pidfd.release() : -1;
    if (pid > 0 && !reaped) {
      r.child = pid;
      r.child_pidfd = exit_fd;
      reaped = true;
    } else if (exit_fd >= 0) {
      r.fds.push_back(exit_fd);
    }
    return r;
  }

  std::string death_description() const {
    if (!ended_because.empty())
      return ended_because;
    if (!reaped)
      return "bash is no longer running";
    if (WIFSIGNALED(wait_status))
      return fmt::format("bash was killed by signal {} ({})", WTERMSIG(wait_status),
                         ::strsignal(WTERMSIG(wait_status)));
    return fmt::format("bash exited with status {}", WEXITSTATUS(wait_status));
  }

  void ensure_usable() {
    if (state == State::closed)
      throw SessionDiedError("the session was closed");
    if (state == State::not_started)
      throw SessionNotInitializedError("shell not initialized");
    if (state == State::dead)
      reap();
    if (state == State::dead)
      throw SessionDiedError(death_description() + "; close the session and create a new one");
  }

  // ---- operation lock -----------------------------------------------------------------------

  // The session's turn if nobody holds it (no suspension); an empty Lock otherwise.
  Lock try_lock() { return operation.try_lock(); }

  // Waits for the session's turn until `deadline`; an empty Lock means the deadline passed.
  asio::awaitable<Lock> lock(std::optional<Clock::time_point> deadline = std::nullopt) {
    co_return co_await operation.lock(deadline);
  }

  // ---- reading ------------------------------------------------------------------------------

  // Non-blocking: reads whatever bash has already written.
  void read_available() {
    if (!master.is_open())
      return;
    error_code ec;
    while (true) {
      const std::size_t n = master.read_some(asio::buffer(chunk), ec);
      if (ec || n == 0)
        return;
      machine.append(std::string_view(chunk.data(), n));
    }
  }

  // Discards output nobody asked for (background jobs that wrote while the shell was idle).
  // Asking how much is waiting is much cheaper than a read that finds nothing (a read on a
  // terminal first waits for bytes still in transit); bytes in transit at this very moment count
  // as the next command's, as do those a job writes while it runs.
  void discard_stale_output() {
    int waiting = 0;
    if (!master.is_open() || ::ioctl(master.native_handle(), FIONREAD, &waiting) != 0 ||
        waiting > 0)
      read_available();
    machine.reset();
  }

  // One timer serves a whole wait (not one per read): when it fires the machine checks whether
  // the deadline or the idle limit has really passed; if output came since, it re-arms. It also
  // outlives the wait: a command usually takes a fraction of its timeout, and the next one's
  // deadline is later still, so the timer already queued fires early enough for it too and is
  // left queued (it then re-arms for the wait of the moment, or does nothing between commands).
  // This spares each command a cancellation and a new wait in the timer queue. Only a wait that
  // ends sooner moves it; the shell's end cancels it.
  void arm_wait_timer(Clock::time_point until) {
    waiting = true;
    if (timer_queued && timer_expiry <= until)
      return;
    set_wait_timer(until);
  }

  void set_wait_timer(Clock::time_point until) {
    timer_expiry = until;
    timer_queued = true;
    read_timer.expires_at(until);  // a wait still queued completes as cancelled, and is ignored
    read_timer.async_wait([w = weak_from_this(), gen = ++timer_gen](const error_code& ec) {
      auto self = w.lock();
      if (!self || self->timer_gen != gen)
        return;  // replaced by a later expiry, or the session is gone
      self->timer_queued = false;
      if (!ec)
        self->on_wait_timer();
    });
  }

  void on_wait_timer() {
    if (!waiting)
      return;  // between waits: the next one arms again
    if (const auto again = machine.on_timer(Clock::now())) {
      set_wait_timer(*again);
      return;
    }
    error_code ignored;
    master.cancel(ignored);
  }

  // Ends the current wait: the timer, if still queued, finds no wait when it fires.
  void disarm_wait_timer() { waiting = false; }

  // Nothing waits any more (bash is gone): a queued timer must not keep the executor busy.
  void cancel_wait_timer() {
    if (std::exchange(timer_queued, false)) {
      ++timer_gen;
      read_timer.cancel();
    }
  }

  void note_prompt(const PromptMatch& m) {
    command_number = m.command_number;
    jobs = m.jobs;
  }

  // Carries out the machine's actions until it finishes; `command` is what a syntax check
  // examines. Cancelling the read (close, a limit) or bash's end is reported to the machine.
  asio::awaitable<Stop> drive(Action a, const std::string* command = nullptr,
                              bool flush_jobs = false) {
    struct Disarm {
      Impl& impl;
      ~Disarm() { impl.disarm_wait_timer(); }
    } disarm{*this};
    std::string eval_text;
    while (true) {
      switch (a.kind) {
        case Action::Kind::finished:
          co_return machine.outcome();
        case Action::Kind::write: {
          disarm_wait_timer();
          if (const std::string_view unsent = write_now(a.bytes); !unsent.empty())
            co_await write(unsent);
          a = machine.on_written(Clock::now());
          break;
        }
        case Action::Kind::interrupt:
          disarm_wait_timer();
          co_await send_interrupt();
          a = machine.on_written(Clock::now());
          break;
        case Action::Kind::kill_job:
          disarm_wait_timer();
          kill_foreground_job();
          a = machine.on_written(Clock::now());
          break;
        case Action::Kind::check_syntax:
          // The line was dropped (Ctrl-C) and the prompt is back: the session is idle while
          // `bash -n` looks at the text; eval delivery follows.
          disarm_wait_timer();
          state = State::idle;
          last_status = a.prompt.status;
          note_prompt(a.prompt);
          co_await check_syntax(*command);
          state = State::running;
          eval_text = eval_line(*command, flush_jobs);
          a = machine.on_syntax_ok(eval_text);
          break;
        case Action::Kind::read: {
          if (a.arm)
            arm_wait_timer(a.until);
          if (machine.expired()) {
            // A limit passed while the last read completed.
            a = machine.on_expired();
          } else if (state == State::dead || state == State::closed) {
            read_available();
            a = machine.on_eof();
          } else {
            auto [ec, n] = co_await master.async_read_some(asio::buffer(chunk), use_tuple);
            if (!ec) {
              const auto now = machine.needs_clock() ? Clock::now() : Clock::time_point{};
              a = machine.on_bytes(std::string_view(chunk.data(), n), now);
            } else if (ec != asio::error::operation_aborted) {
              a = machine.on_eof();  // EIO: every holder of the terminal is gone
            } else if (machine.expired()) {
              a = machine.on_expired();
            } else if (state == State::dead || state == State::closed) {
              read_available();
              a = machine.on_eof();
            } else {
              throw boost::system::system_error(ec, "reading from bash");
            }
          }
          break;
        }
      }
    }
  }

  // Turns raw bytes into observation text, yielding between slices so other sessions and
  // connections keep running while megabytes are cleaned.
  asio::awaitable<std::string> clean(std::string_view bytes) {
    std::string out;
    while (bytes.size() > kCleanSlice) {
      std::size_t cut = bytes.rfind('\n', kCleanSlice);
      cut = (cut == std::string_view::npos || cut == 0) ? kCleanSlice : cut + 1;
      out += clean_terminal_output(bytes.substr(0, cut));
      bytes.remove_prefix(cut);
      co_await asio::post(ex, asio::use_awaitable);
    }
    out += clean_terminal_output(bytes);
    co_return out;
  }

  // The output up to `end` (bytes of raw), with a notice where a capped middle was dropped;
  // everything up to `consumed` is removed from the buffer.
  asio::awaitable<std::string> take_output(std::size_t end, std::size_t consumed) {
    std::string text;
    machine.trim_tail(end, consumed);
    if (!machine.head().empty()) {
      text = co_await clean(machine.head());
      text += fmt::format("\n[... {} bytes of output omitted ...]\n", machine.dropped());
    }
    const std::string_view body = std::string_view(machine.raw()).substr(0, end);
    text += co_await clean(body);
    machine.forget(consumed);
    co_return text;
  }

  // Output up to `end` that is cleaned in one go (the common case) needs no suspension.
  bool output_is_small(std::size_t end) const {
    return machine.head().empty() && end <= kCleanSlice;
  }

  // take_output for small output.
  std::string take_small_output(std::size_t end, std::size_t consumed) {
    std::string text = clean_terminal_output(std::string_view(machine.raw()).substr(0, end));
    machine.forget(consumed);
    return text;
  }

  asio::awaitable<std::string> take_all_output() {
    const std::size_t size = machine.raw().size();
    co_return co_await take_output(size, size);
  }

  // ---- writing ------------------------------------------------------------------------------

  // Writes what the terminal takes without waiting and returns the rest (empty when all went,
  // which is the rule: only a long command can fill the terminal's input queue). An error is
  // left to the asynchronous write, which reports it.
  std::string_view write_now(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(master.native_handle(), bytes.data(), bytes.size());
      if (n > 0)
        bytes.remove_prefix(static_cast<std::size_t>(n));
      else if (n < 0 && errno == EINTR)
        continue;
      else
        break;
    }
    return bytes;
  }

  asio::awaitable<void> write(std::string_view bytes) {
    auto [ec, n] =
        co_await asio::async_write(master, asio::buffer(bytes.data(), bytes.size()), use_tuple);
    if (ec) {
      reap();
      if (reaped || ec == asio::error::eof || ec.value() == EIO) {
        state = State::dead;
        throw SessionDiedError(death_description() + "; close the session and create a new one");
      }
      throw boost::system::system_error(ec, "writing to bash");
    }
  }

  // Programs such as python or gdb change terminal modes; a crash can leave echo on.
  void restore_terminal_modes() {
    termios now{};
    if (::tcgetattr(master.native_handle(), &now) != 0)
      return;
    const auto lmask = static_cast<tcflag_t>(ECHO | ICANON | ISIG);
    if ((now.c_lflag & lmask) != (baseline.c_lflag & lmask) ||
        (now.c_oflag & ONLCR) != (baseline.c_oflag & ONLCR)) {
      ::tcsetattr(master.native_handle(), TCSANOW, &baseline);
    }
  }

  // ---- start --------------------------------------------------------------------------------

  void spawn_shell() {
    detail::Pty pty;
    try {
      pty = detail::open_pty(cfg.columns, cfg.rows);
    } catch (const std::system_error& e) {
      const int err = e.code().value();
      throw OSError(fmt::format("{} [Errno {}]{}", e.what(), err, limit_hint(err)),
                    {{"errno", err}});
    }
    termios t{};
    ::tcgetattr(pty.slave.get(), &t);
    t.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOE | ECHOK | ECHONL);
    t.c_lflag |= ICANON | ISIG;
    t.c_iflag |= IUTF8;
    t.c_iflag &= ~static_cast<tcflag_t>(IXON);  // Ctrl-S must not freeze the session
    ::tcsetattr(pty.slave.get(), TCSANOW, &t);
    baseline = t;

    std::map<std::string, std::string> env = detail::current_environment();
    for (const auto& [k, v] : cfg.environment)
      env[k] = v;
    env["TERM"] = cfg.term;
    // Inherited by everything the session starts, setsid or not: close finds daemons by it.
    env[std::string(kSessionTagName)] = framing.marker();
    tag = fmt::format("{}={}", kSessionTagName, framing.marker());
    env.erase("PROMPT_COMMAND");
    env.erase("PS1");
    std::vector<std::string> envv;
    for (const auto& [k, v] : env) {
      envv.push_back(k + "=" + v);
      exported_functions = exported_functions || k.starts_with("BASH_FUNC_");
    }

    detail::SpawnOptions options;
    options.argv = {cfg.bash_path, "--noediting"};
    if (!cfg.load_rc_files)
      options.argv.push_back("--norc");
    options.argv.push_back("-i");
    options.env = std::move(envv);
    options.controlling_tty = pty.slave_path;
    if (!cfg.working_dir.empty())
      options.cwd = cfg.working_dir;
    options.cgroup_procs_fd = processes.prepare();
    options.cgroup_dir_fd = processes.cgroup_dir_fd();
    detail::SpawnedChild child;
    try {
      try {
        child = detail::spawn_process(options);
      } catch (const detail::CgroupJoinError& e) {
        processes.cgroup_refused(e);
        options.cgroup_procs_fd = -1;
        options.cgroup_dir_fd = -1;
        child = detail::spawn_process(options);
      }
    } catch (const std::system_error& e) {
      throw_spawn_failure(e);
    }
    processes.started(child.pid, tag);
    pid = child.pid;
    pidfd.assign(child.pidfd);
    master.assign(pty.master.release());
    master.non_blocking(true);
    watch_exit();
    state = State::running;
  }

  // Startup failed: end the shell and report what it printed.
  [[noreturn]] void fail_start(const std::string& what, double timeout) {
    read_available();
    std::string output = clean_terminal_output(machine.raw());
    cancel_wait_timer();
    kill_everything();
    boost::json::object info{{"output", output}};
    throw PexpectTimeout(fmt::format("{} (startup_timeout {} s); output so far: {}", what,
                                     python_float_repr(timeout), python_repr(output)),
                         std::move(info));
  }

  asio::awaitable<CreateBashSessionResponse> start(CreateBashSessionRequest request) {
    if (state != State::not_started)
      throw SwerexException("the session was already started");
    auto self = shared_from_this();
    Lock lock_ = try_lock();
    if (!lock_)
      lock_ = co_await lock();
    machine.set_cap(cfg.max_output_bytes ? std::optional<std::size_t>(*cfg.max_output_bytes)
                                         : std::nullopt);
    spawn_shell();
    const auto deadline = deadline_after(request.startup_timeout);
    // Startup files and inherited functions may define code that changes the prompt.
    tainted = guarded = cfg.load_rc_files || exported_functions;
    const std::string setup = framing.setup_code(guarded) + "\n";
    co_await write(setup);
    Action wait = machine.begin_wait(no_expect, deadline, Clock::now());
    Stop stop = co_await drive(wait);
    if (stop.kind != Stop::prompt) {
      fail_start(stop.kind == Stop::died ? death_description() + " while starting"
                                         : "bash did not show its prompt in time",
                 request.startup_timeout);
    }
    note_prompt(stop.match);
    prompt_command_arrays = stop.match.status == 0;
    machine.reset();  // what the rc files printed before rex's prompt was installed
    state = State::idle;

    CreateBashSessionResponse response;
    if (!request.startup_source.empty()) {
      std::string text;
      for (const auto& file : request.startup_source) {
        if (!text.empty())
          text += "; ";
        text += "source " + shell_quote(file);
      }
      const std::string line = framing.command_line(text, 0, true);
      co_await write(line);
      state = State::running;
      wait = machine.begin_wait(no_expect, deadline, Clock::now());
      stop = co_await drive(wait);
      if (stop.kind != Stop::prompt) {
        fail_start(stop.kind == Stop::died ? death_description() + " in a startup file"
                                           : "the startup files did not finish in time",
                   request.startup_timeout);
      }
      note_prompt(stop.match);
      tainted = guarded = true;
      response.output = co_await take_output(stop.match.begin, stop.match.end);
      state = State::idle;
    }
    co_return response;
  }

  // ---- commands -----------------------------------------------------------------------------

  asio::awaitable<void> check_syntax(const std::string& command) {
    detail::UniqueFd script(::memfd_create("rex-syntax-check", MFD_CLOEXEC));
    if (script.get() < 0)
      throw_errno("memfd_create");
    for (std::size_t off = 0; off < command.size();) {
      const ssize_t n = ::write(script.get(), command.data() + off, command.size() - off);
      if (n < 0)
        throw_errno("writing the syntax check script");
      off += static_cast<std::size_t>(n);
    }
    ::lseek(script.get(), 0, SEEK_SET);
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
      throw_errno("pipe2");
    detail::UniqueFd read_end(p[0]), write_end(p[1]);

    detail::SpawnOptions options;
    options.argv = {cfg.bash_path, "-O", "extglob", "-n"};
    options.stdin_fd = script.get();
    options.stdout_fd = write_end.get();
    options.stderr_fd = write_end.get();
    detail::SpawnedChild child;
    try {
      child = detail::spawn_process(options);
    } catch (const std::system_error& e) {
      throw_spawn_failure(e);
    }
    ::close(write_end.release());  // the child holds the only write end now
    asio::posix::stream_descriptor out(ex, read_end.release());
    asio::posix::stream_descriptor exited(ex, child.pidfd);
    std::string messages;
    std::array<char, 4096> buf{};
    while (true) {
      auto [ec, n] = co_await out.async_read_some(asio::buffer(buf), use_tuple);
      if (ec)
        break;
      messages.append(buf.data(), n);
    }
    co_await exited.async_wait(asio::posix::descriptor_base::wait_read, use_tuple);
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 0)
      co_return;
    const std::string stderr_text = utf8_backslashreplace(messages);
    boost::json::object info{{"bash_stdout", ""}, {"bash_stderr", stderr_text}};
    throw BashIncorrectSyntaxError(
        fmt::format("Error (exit code {}) while checking bash command \n{}\n---- Stderr ----\n{}\n"
                    "---- Stdout ----\n",
                    code, python_repr(command), stderr_text),
        std::move(info));
  }

  // A command left running (timed out, or an interactive program) may have finished since.
  void notice_finished_command() {
    if (state != State::running)
      return;
    read_available();
    if (const auto last = machine.last_prompt()) {
      note_prompt(*last);
      state = State::idle;
      interactive = false;
    }
  }

  BashObservation finish(BashObservation obs, const BashAction& action) {
    if (action.check == "ignore") {
      obs.exit_code.reset();
    } else if (action.check == "raise" && obs.exit_code.value_or(0) != 0) {
      std::string msg =
          fmt::format("Command {} failed with exit code {}. Here is the output:\n{}",
                      python_repr(action.command), *obs.exit_code, python_repr(obs.output));
      if (!action.error_msg.empty())
        msg = action.error_msg + ": " + msg;
      boost::json::object info{{"exit_code", *obs.exit_code}, {"output", obs.output}};
      throw NonZeroExitCodeError(msg, std::move(info));
    }
    return obs;
  }

  std::string eval_line(const std::string& text, bool flush_jobs) const {
    try {
      return framing.command_line(text, last_status, tainted, flush_jobs);
    } catch (const std::invalid_argument& e) {
      throw ValueError(e.what());
    }
  }

  // The output listener for one operation; removed when the operation ends in any way.
  struct Listening {
    Impl& impl;
    ~Listening() { impl.machine.set_line_sink(nullptr); }
  };

  // run() keeps to the awaits of a plain command; what needs none is done by the plain
  // functions around it, so its coroutine frame stays small enough for the allocator's
  // recycled blocks (a larger one costs a trip through malloc with every command).
  asio::awaitable<BashObservation> run(BashAction action, BashSession::OutputListener on_output) {
    auto self = shared_from_this();
    if (attached())
      co_await wait_until_detached();
    Lock lock_ = try_lock();
    if (!lock_)
      lock_ = co_await lock();
    ensure_usable();
    Listening listening{*this};
    machine.set_line_sink(std::move(on_output));
    if (!ready_for_command(action))
      co_return finish(BashObservation{"", 0}, action);
    if (ShellFraming::is_multiline(action.command))
      co_await check_syntax(action.command);
    bool flush_jobs = false;
    const Action deliver = begin_command(action, flush_jobs);
    const Stop stop = co_await drive(deliver, &action.command, flush_jobs);
    if (stop.kind == Stop::prompt) {
      const CommandEnd end = at_command_prompt(stop, flush_jobs);
      if (output_is_small(stop.match.begin))
        co_return command_observation(stop, action, end,
                                      take_small_output(stop.match.begin, stop.match.end));
      std::string output = co_await take_output(stop.match.begin, stop.match.end);
      co_return command_observation(stop, action, end, std::move(output));
    }
    if (stop.kind == Stop::expect) {
      // The command is still running and waits for input: it now holds the terminal.
      interactive = true;
      std::string output = co_await take_output(
          stop.expect_pos, stop.expect_pos + action.expect[stop.expect_index].size());
      co_return expect_observation(stop, action, std::move(output));
    }
    co_await fail(stop, action);
    throw std::logic_error("fail() returned");
  }

  // Before a plain command: refuses a busy session and drops stale output. False for a blank
  // command, which runs nothing.
  bool ready_for_command(const BashAction& action) {
    notice_finished_command();
    if (state == State::running) {
      throw SessionBusyError(
          interactive ? "an interactive program is running in this session: send it input with "
                        "is_interactive_command, leave it with is_interactive_quit, or interrupt it"
                      : "the previous command is still running (it timed out): interrupt it first");
    }
    discard_stale_output();
    return !ShellFraming::is_blank(action.command);
  }

  // Direct delivery when the text allows it and PROMPT_COMMAND already holds what the session
  // needs; eval delivery otherwise, which also brings PROMPT_COMMAND up to date. The line is
  // kept in `command_line` while the command runs.
  Action begin_command(const BashAction& action, bool& flush_jobs) {
    const ShellFraming::TextTraits traits = ShellFraming::inspect(action.command);
    tainted = tainted || traits.may_change_prompt_later;
    flush_jobs = jobs > 0 || traits.may_start_jobs;
    const bool direct = traits.direct && guarded == tainted && flushing == flush_jobs &&
                        (prompt_command_arrays || (!tainted && !flush_jobs));
    if (direct) {
      command_line.assign(action.command);
      command_line += '\n';
    } else {
      command_line = eval_line(action.command, flush_jobs);
    }
    restore_terminal_modes();
    set_cap(action);
    state = State::running;
    interactive = false;
    const auto deadline = deadline_after(action.timeout);
    const auto idle = idle_limit(action);
    // A line that turns out incomplete is dropped, checked and sent again through eval; a stale
    // prompt is confirmed (CommandMachine).
    return machine.begin_command(command_line, direct, action.expect, command_number, deadline,
                                 idle);
  }

  struct CommandEnd {
    bool direct = false;   // the command went out as it is
    bool counted = false;  // bash's command number grew
  };

  // The command's prompt came: the session is idle again.
  CommandEnd at_command_prompt(const Stop& stop, bool flush_jobs) {
    const CommandEnd end{machine.direct(), stop.match.command_number != command_number};
    state = State::idle;
    last_status = stop.match.status;
    note_prompt(stop.match);
    if (!end.direct) {
      guarded = tainted;
      flushing = flush_jobs;
    }
    return end;
  }

  BashObservation command_observation(const Stop& stop, const BashAction& action,
                                      const CommandEnd& end, std::string output) {
    // Direct: the command ran if bash counted it. A line that parses to nothing (an alias for
    // nothing) runs nothing either, but bash then says nothing.
    const bool ran = end.direct ? end.counted || output.empty() : !stop.match.rejected;
    if (!ran) {
      const std::string message = framing.clean_syntax_error(output);
      boost::json::object info{{"bash_stdout", ""}, {"bash_stderr", message}};
      throw BashIncorrectSyntaxError(
          fmt::format("Error (exit code {}) while checking bash command \n{}\n---- Stderr "
                      "----\n{}\n---- Stdout ----\n",
                      stop.match.status, python_repr(action.command), message),
          std::move(info));
    }
    BashObservation obs;
    obs.output = std::move(output);
    obs.exit_code = stop.match.status;
    obs.expect_string = framing.marker();
    return finish(std::move(obs), action);
  }

  static BashObservation expect_observation(const Stop& stop, const BashAction& action,
                                            std::string output) {
    BashObservation obs;
    obs.output = std::move(output);
    obs.exit_code = 0;
    obs.expect_string = action.expect[stop.expect_index];
    return obs;
  }

  asio::awaitable<BashObservation> run_interactive(BashAction action,
                                                   BashSession::OutputListener on_output) {
    auto self = shared_from_this();
    if (attached())
      co_await wait_until_detached();
    Lock lock_ = try_lock();
    if (!lock_)
      lock_ = co_await lock();
    ensure_usable();
    Listening listening{*this};
    machine.set_line_sink(std::move(on_output));
    notice_finished_command();
    if (state == State::idle)
      discard_stale_output();
    set_cap(action);
    state = State::running;
    interactive = true;
    const std::string input = action.command + "\n";
    const auto deadline = deadline_after(action.timeout);
    const auto idle = idle_limit(action);
    Action send = machine.begin_input(input, action.expect, deadline, idle);
    const Stop stop = co_await drive(send);
    BashObservation obs;
    obs.exit_code = 0;
    switch (stop.kind) {
      case Stop::prompt:
        state = State::idle;
        interactive = false;
        last_status = 0;
        note_prompt(stop.match);
        obs.output = co_await take_output(stop.match.begin, stop.match.end);
        obs.expect_string = framing.marker();
        break;
      case Stop::expect:
        obs.output = co_await take_output(
            stop.expect_pos, stop.expect_pos + action.expect[stop.expect_index].size());
        obs.expect_string = action.expect[stop.expect_index];
        break;
      default:
        co_return co_await fail_command(stop, action);
    }
    if (!action.is_interactive_quit)
      obs.output = strip_interactive_echo(std::move(obs.output), action.command);
    co_return obs;
  }

  asio::awaitable<BashObservation> fail_command(const Stop& stop, const BashAction& action) {
    co_await fail(stop, action);
    throw std::logic_error("fail() returned");
  }

  // Reports a command that ended without its prompt; always throws.
  asio::awaitable<void> fail(const Stop& stop, const BashAction& action) {
    std::string output = co_await take_all_output();
    boost::json::object info{{"output", output}};
    if (stop.kind == Stop::died) {
      if (state == State::closed)
        throw SessionDiedError("the session was closed while the command ran", std::move(info));
      // The terminal closes a moment before bash can be reaped; wait (briefly) for the exit
      // so the error can name the status or signal.
      reap();
      if (!reaped) {
        auto exit = exited.wait();
        co_await with_timeout(std::move(exit), std::chrono::seconds(1));
        reap();
      }
      state = State::dead;
      throw SessionDiedError(death_description() + " while running " + python_repr(action.command),
                             std::move(info));
    }
    // The command keeps running; an interrupt (or its own end) frees the session.
    if (stop.kind == Stop::idle) {
      info["no_output_timeout"] = *action.no_output_timeout;
      throw CommandTimeoutError(
          fmt::format("no output for {} seconds while running command {}",
                      python_float_repr(*action.no_output_timeout), python_repr(action.command)),
          std::move(info));
    }
    info["timeout"] = action.timeout ? boost::json::value(*action.timeout) : nullptr;
    throw CommandTimeoutError(
        fmt::format("timeout after {} seconds while running command {}",
                    action.timeout ? python_float_repr(*action.timeout) : std::string("None"),
                    python_repr(action.command)),
        std::move(info));
  }

  void set_cap(const BashAction& action) {
    const auto limit = action.max_output_bytes ? action.max_output_bytes : cfg.max_output_bytes;
    machine.set_cap(limit && *limit > 0
                        ? std::optional<std::size_t>(static_cast<std::size_t>(*limit))
                        : std::nullopt);
  }

  static std::optional<Clock::duration> idle_limit(const BashAction& action) {
    if (!action.no_output_timeout || *action.no_output_timeout <= 0)
      return std::nullopt;
    return duration_from_seconds(*action.no_output_timeout);
  }

  // ---- input ---------------------------------------------------------------------------------

  asio::awaitable<void> send_input(std::string input) {
    if (attached()) {
      co_await write(input);  // keys of the attached terminal
      co_return;
    }
    notice_finished_command();
    if (state != State::running)
      throw NoCommandRunningError(
          "no command is running in this session: input goes to a running command (bash would "
          "take it as a command of its own)");
    co_await write(input);
  }

  // ---- attach -------------------------------------------------------------------------------

  // A call that comes while a terminal is attached waits a little for it to leave: a client
  // that detaches and at once sends a command on another connection is often heard before its
  // stream's close is. Then it is refused.
  asio::awaitable<void> wait_until_detached() {
    auto self = shared_from_this();
    while (attached()) {
      auto left = with_timeout(detached.wait(), kDetachGrace);
      const std::optional<bool> waited = co_await std::move(left);
      if (!waited)
        throw SessionBusyError(
            "a terminal is attached to this session: its commands wait until it detaches");
    }
  }

  // The rest of a chunk after `mark` and the line end that follows it; nullopt before it shows.
  static std::optional<std::string> after_mark(const std::string& seen, const std::string& mark) {
    const std::size_t at = seen.find(mark);
    if (at == std::string::npos)
      return std::nullopt;
    std::size_t rest = at + mark.size();
    while (rest < seen.size() && (seen[rest] == '\r' || seen[rest] == '\n'))
      ++rest;
    return seen.substr(rest);
  }

  // Reads the terminal until `limit`: the bytes, nothing on timeout (the read is cancelled);
  // an error code (EIO once bash and everything holding the terminal are gone).
  asio::awaitable<std::pair<error_code, std::optional<std::string>>> read_for(
      Clock::duration limit) {
    auto read = master.async_read_some(asio::buffer(chunk), use_tuple);
    auto timed = with_timeout(std::move(read), limit);
    auto got = co_await std::move(timed);
    if (!got)
      co_return std::pair<error_code, std::optional<std::string>>{};
    auto [ec, n] = *got;
    if (ec)
      co_return std::pair<error_code, std::optional<std::string>>{ec, std::nullopt};
    co_return std::pair<error_code, std::optional<std::string>>{error_code{},
                                                                std::string(chunk.data(), n)};
  }

  asio::awaitable<std::optional<ProcessEnd>> attach(SessionAttach request,
                                                    BashSession::EventListener on_event) {
    auto self = shared_from_this();
    detail::check_terminal_size(request.size);
    ensure_usable();
    if (attached())
      co_await wait_until_detached();
    Lock lock_ = try_lock();
    if (!lock_)
      throw SessionBusyError(
          "a command is running in this session: a terminal attaches between commands");
    notice_finished_command();
    if (state == State::running)
      throw SessionBusyError(
          interactive ? "an interactive program is running in this session: a terminal attaches "
                        "between commands (leave it with is_interactive_quit or interrupt it)"
                      : "the previous command is still running (it timed out): interrupt it "
                        "before a terminal attaches");
    discard_stale_output();
    detached.reset();
    state = State::running;
    std::optional<ProcessEnd> end;
    std::exception_ptr failure;
    try {
      end = co_await lend(request, on_event);
    } catch (...) {
      failure = std::current_exception();
    }
    // Handed back whatever happened, a cancelled stream (a server stopping) included, and deaf
    // to cancellation from here on: a stream whose client left can be cancelled after lend()
    // returned on its own (the race that cancels it completes later), and a cancellation that
    // lands in the middle would leave the session taken for ever.
    co_await asio::this_coro::reset_cancellation_state(asio::disable_cancellation());
    try {
      co_await give_back(end.has_value());
    } catch (const std::exception& e) {
      if (state != State::closed) {
        ended_because =
            std::string("the session could not be taken back from its terminal: ") + e.what();
        kill_everything();
        state = State::dead;
      }
      if (!failure)
        failure = std::current_exception();
    }
    co_await asio::this_coro::reset_cancellation_state();  // the caller cancellable again
    if (failure)
      std::rethrow_exception(failure);
    co_return end;
  }

  // The terminal with the person: echo on, their size, their output as it comes, until the
  // listener stops (nothing) or bash ends (how).
  asio::awaitable<std::optional<ProcessEnd>> lend(const SessionAttach& request,
                                                  const BashSession::EventListener& on_event) {
    // A prompt for a person, the commands a person expects (rex's less and more print the
    // whole text at once), and Ctrl-D that does not end the session; written with echo off, so
    // only what it prints shows, the mark last.
    const std::string mark = framing.marker() + "attached";
    co_await write(
        "unset PROMPT_COMMAND; PS1='(rex) \\u@\\h:\\w\\$ '; PS2='> '; PS0=; unset -f less more; "
        "set -o ignoreeof; printf '%sattached\\n' \"$__rex_m\"\n");
    const auto setup_limit = Clock::now() + std::chrono::seconds(10);
    std::string seen;
    std::optional<std::string> first;
    while (!(first = after_mark(seen, mark))) {
      if (Clock::now() >= setup_limit)
        throw PexpectTimeout("bash did not take the attached terminal's prompt within 10 s");
      auto [ec, bytes] = co_await read_for(setup_limit - Clock::now());
      if (ec == asio::error::operation_aborted)
        co_return std::nullopt;  // cancelled, or the session closed
      if (ec)
        co_return co_await ended();
      if (bytes)
        seen += *bytes;
    }
    termios person = baseline;
    person.c_lflag |= ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE;
    ::tcsetattr(master.native_handle(), TCSANOW, &person);
    detail::set_terminal_size(master.native_handle(),
                              static_cast<unsigned short>(request.size.cols),
                              static_cast<unsigned short>(request.size.rows));
    if (!on_event(ProcessEvent{ProcessEvent::Kind::started, pid, {}}))
      co_return std::nullopt;
    if (!first->empty() && !on_event(ProcessEvent{ProcessEvent::Kind::stdout_data, pid, *first}))
      co_return std::nullopt;
    const auto quiet_limit = request.keepalive > 0 ? duration_from_seconds(request.keepalive)
                                                   : Clock::duration(std::chrono::hours(24));
    for (;;) {
      if (state == State::closed)
        co_return ProcessEnd{std::nullopt, std::nullopt, "the session was closed"};
      auto [ec, bytes] = co_await read_for(quiet_limit);
      if (ec) {
        if (state == State::closed)
          co_return ProcessEnd{std::nullopt, std::nullopt, "the session was closed"};
        if (ec == asio::error::operation_aborted)
          co_return std::nullopt;  // the stream was cancelled: the session goes back
        co_return co_await ended();
      }
      const ProcessEvent event =
          bytes ? ProcessEvent{ProcessEvent::Kind::stdout_data, pid, std::move(*bytes)}
                : ProcessEvent{ProcessEvent::Kind::keepalive, pid, {}};
      if (!bytes && request.keepalive <= 0)
        continue;
      if (!on_event(event))
        co_return std::nullopt;
    }
  }

  // Bash has gone (the person typed exit): how, once it is collected.
  asio::awaitable<ProcessEnd> ended() {
    reap();
    if (!reaped) {
      auto timed = with_timeout(exited.wait(), std::chrono::seconds(5));
      co_await std::move(timed);
    }
    ProcessEnd end = reaped ? detail::process_end(detail::end_code(wait_status))
                            : ProcessEnd{std::nullopt, std::nullopt, "the terminal closed"};
    if (state != State::closed)
      state = State::dead;
    co_return end;
  }

  // The session back to its commands: rex's terminal modes and size, what the person left in the
  // foreground interrupted (then killed), keys not read yet dropped, and rex's prompt and helpers
  // installed again, as at start.
  asio::awaitable<void> give_back(bool bash_ended) {
    detached.set();
    if (bash_ended || state == State::closed || state == State::dead || !master.is_open())
      co_return;
    ::tcsetattr(master.native_handle(), TCSANOW, &baseline);
    detail::set_terminal_size(master.native_handle(), cfg.columns, cfg.rows);
    // rex's prompt and helpers go in as a line typed once bash has the terminal. A job the
    // person started can take the terminal after bash seemed to have it (a line bash was still
    // reading when the Ctrl-C came, a fork slow under load): the line then waits behind the job,
    // and the job is stopped as before (its Ctrl-C also drops the line) and the line typed again.
    const std::string setup = "set +o ignoreeof; " + framing.setup_code(true) + "\n";
    const auto limit = Clock::now() + std::chrono::seconds(10);
    Stop stop{Stop::timeout};
    while (stop.kind != Stop::prompt && Clock::now() < limit) {
      co_await settle();
      read_available();  // dropped: what bash printed meanwhile (a line cut short, its prompt)
      machine.reset();
      co_await write(setup);
      for (;;) {
        const auto now = Clock::now();
        const Action wait = machine.begin_wait(
            no_expect, std::min(limit, now + std::chrono::milliseconds(250)), now);
        stop = co_await drive(wait);
        if (stop.kind != Stop::timeout || Clock::now() >= limit)
          break;
        const pid_t group = foreground_group();
        if (group > 0 && group != pid)
          break;  // a job holds the terminal: settle again
      }
      if (stop.kind == Stop::died)
        break;
    }
    if (stop.kind != Stop::prompt) {
      ended_because = "bash did not come back to its prompt within 10 s after a terminal detached";
      kill_everything();
      state = State::dead;
      co_return;
    }
    note_prompt(stop.match);
    machine.reset();
    last_status = 0;  // the person's last status is theirs, not the next command's
    tainted = guarded = true;
    flushing = false;
    interactive = false;
    state = State::idle;
  }

  // Ctrl-C first, whatever runs: it also drops keys bash has not read yet (a line typed just
  // before the detach would otherwise run after it). Then until bash has the terminal for
  // 100 ms: Ctrl-C again now and then, and SIGKILL for a foreground job that outlasts them.
  asio::awaitable<void> settle() {
    co_await write("\x03");
    asio::steady_timer pause(ex);
    int calm = 0;
    for (int attempt = 0; attempt < 40 && calm < 2; ++attempt) {
      pause.expires_after(std::chrono::milliseconds(50));
      co_await pause.async_wait(use_tuple);
      const pid_t group = foreground_group();
      if (group <= 0 || group == pid) {
        ++calm;
        continue;
      }
      calm = 0;
      if (attempt >= 20)
        kill_foreground_job();
      else if (attempt % 5 == 0)
        co_await send_interrupt();
    }
  }

  asio::awaitable<void> resize(const SessionResize& request) {
    detail::check_terminal_size(request.size);
    ensure_usable();
    if (!attached())
      throw ValueError(
          fmt::format("no terminal is attached to session {}", python_repr(request.session)));
    detail::set_terminal_size(master.native_handle(),
                              static_cast<unsigned short>(request.size.cols),
                              static_cast<unsigned short>(request.size.rows));
    co_return;
  }

  // ---- interrupt ----------------------------------------------------------------------------

  pid_t foreground_group() { return master.is_open() ? ::tcgetpgrp(master.native_handle()) : -1; }

  // Kills the foreground job; never bash itself. Returns false when there is no such job.
  bool kill_foreground_job() {
    const pid_t group = foreground_group();
    if (group <= 0 || group == pid)
      return false;
    return ::kill(-group, SIGKILL) == 0;
  }

  // Ctrl-C; a foreground job that ignores SIGINT is killed at once instead of waited for.
  asio::awaitable<void> send_interrupt() {
    co_await write("\x03");
    const pid_t group = foreground_group();
    if (group > 0 && group != pid && ignores_sigint(group))
      kill_foreground_job();
  }

  asio::awaitable<BashObservation> interrupt(BashInterruptAction action) {
    auto self = shared_from_this();
    const auto attempt_time = duration_from_seconds(std::max(action.timeout, 0.001));
    const int attempts = std::max(action.n_retry, 1);
    ensure_usable();
    if (attached())
      co_await wait_until_detached();

    Lock lock_;
    int attempt = 0;
    if (operation.locked()) {
      // A command is running right now: stop it, then take our turn.
      for (; attempt < attempts && !lock_; ++attempt) {
        if (CommandMachine::escalation(attempt) == Action::Kind::interrupt)
          co_await send_interrupt();
        else
          kill_foreground_job();
        const auto until = Clock::now() + attempt_time;
        lock_ = co_await lock(until);
      }
      if (!lock_) {
        throw PexpectTimeout(
            fmt::format("could not interrupt the running command after {} attempts", attempts));
      }
    } else {
      lock_ = try_lock();
      if (!lock_)
        lock_ = co_await lock();
    }
    ensure_usable();
    notice_finished_command();
    if (state == State::idle) {
      discard_stale_output();
      co_return BashObservation{"", 0, "", framing.marker()};
    }
    // At least one attempt here, even if waiting for the running command used them all.
    Action escalate = machine.begin_interrupt(action.expect, attempt, attempts, attempt_time);
    const Stop stop = co_await drive(escalate);
    if (stop.kind == Stop::prompt) {
      // A framed command cut short reports its own status ($? of the killed job).
      last_status = interactive ? 0 : stop.match.status;
      note_prompt(stop.match);
      state = State::idle;
      interactive = false;
      std::string output = co_await take_output(stop.match.begin, stop.match.end);
      co_return BashObservation{trim(std::move(output)), 0, "", framing.marker()};
    }
    if (stop.kind == Stop::expect) {
      std::string output = co_await take_output(
          stop.expect_pos, stop.expect_pos + action.expect[stop.expect_index].size());
      co_return BashObservation{trim(std::move(output)), 0, "", action.expect[stop.expect_index]};
    }
    if (stop.kind == Stop::died) {
      state = State::dead;
      throw SessionDiedError(death_description() + " while being interrupted");
    }
    throw PexpectTimeout("Failed to interrupt session");
  }

  // ---- close --------------------------------------------------------------------------------

  asio::awaitable<void> close() {
    auto self = shared_from_this();
    if (state == State::closed || state == State::not_started) {
      state = State::closed;
      co_return;
    }
    state = State::closed;  // a command still reading sees the end and reports it
    // bash (not collected yet: its pid is still its own), everything else the session started,
    // daemons included, and the terminal: all ended off this thread, which only waits.
    co_await processes.end(ex, remains());
  }
};

BashSession::BashSession(asio::any_io_executor executor, BashSessionConfig config)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(config))) {}

BashSession::~BashSession() {
  impl_->kill_everything();
}

asio::awaitable<CreateBashSessionResponse> BashSession::start(CreateBashSessionRequest request) {
  return impl_->start(std::move(request));
}

asio::awaitable<BashObservation> BashSession::run(BashAction action, OutputListener on_output) {
  if (action.is_interactive_command || action.is_interactive_quit)
    return impl_->run_interactive(std::move(action), std::move(on_output));
  return impl_->run(std::move(action), std::move(on_output));
}

asio::awaitable<void> BashSession::send_input(std::string input) {
  return impl_->send_input(std::move(input));
}

asio::awaitable<BashObservation> BashSession::interrupt(BashInterruptAction action) {
  return impl_->interrupt(std::move(action));
}

asio::awaitable<void> BashSession::close() {
  return impl_->close();
}

asio::awaitable<std::optional<ProcessEnd>> BashSession::attach(SessionAttach request,
                                                               EventListener on_event) {
  return impl_->attach(std::move(request), std::move(on_event));
}

asio::awaitable<void> BashSession::resize(SessionResize request) {
  return impl_->resize(request);
}

pid_t BashSession::pid() const noexcept {
  return impl_->pid;
}

bool BashSession::alive() const noexcept {
  return impl_->pid > 0 && impl_->state != Impl::State::dead &&
         impl_->state != Impl::State::closed && impl_->state != Impl::State::not_started;
}

}  // namespace rex
