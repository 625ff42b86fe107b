#include <rex/core/event.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/file_ops.hpp>
#include <rex/runtime/process_runner.hpp>
#include <rex/session/output.hpp>

#include "core/file_system.hpp"
#include "core/process_end.hpp"
#include "core/pty.hpp"
#include "core/spawn.hpp"
#include "core/unique_fd.hpp"
#include "runtime/process_table.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace rex {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;

using detail::UniqueFd;

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// Close-on-exec on both ends: a child spawned by another thread meanwhile inherits neither.
void open_pipe(Pipe& pipe) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw_os_error(errno);
  pipe.read.reset(fds[0]);
  pipe.write.reset(fds[1]);
}

// Owns a started child until it is reaped. If the coroutine frame is destroyed before that
// (its io_context went away), the group is killed and the child reaped here, blocking briefly:
// a SIGKILLed process exits at once.
class ChildReaper {
 public:
  explicit ChildReaper(pid_t pid) noexcept : pid_(pid) {}
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;
  ~ChildReaper() {
    if (pid_ > 0) {
      kill_group();
      reap();
    }
  }

  // The child is not reaped yet, so its pid (the group id) cannot have been reused.
  void kill_group() const noexcept { ::kill(-pid_, SIGKILL); }

  /// Waits for the (exited) child; its exit code, -N for signal N, none when unknowable.
  std::optional<int> reap() noexcept {
    int status = 0;
    pid_t rc;
    do {
      rc = ::waitpid(pid_, &status, 0);
    } while (rc < 0 && errno == EINTR);
    pid_ = -1;
    if (rc < 0)
      return std::nullopt;  // ECHILD: SIGCHLD is ignored, the kernel reaped it
    return detail::end_code(status);
  }

 private:
  pid_t pid_;
};

std::vector<std::string> build_argv(const Command& command) {
  std::vector<std::string> argv;
  if (const auto* text = std::get_if<std::string>(&command.command)) {
    if (command.shell)
      return {"/bin/sh", "-c", *text};
    return {*text};
  }
  const auto& list = std::get<std::vector<std::string>>(command.command);
  if (list.empty())
    throw ValueError("the command is an empty list");
  if (command.shell)
    argv = {"/bin/sh", "-c"};
  argv.insert(argv.end(), list.begin(), list.end());
  return argv;
}

using detail::reject_nul;

// ValueError for a variable a child cannot be given.
void check_variable(const std::string& name, const std::string& value) {
  if (name.empty() || name.find('=') != std::string::npos)
    throw ValueError("illegal environment variable name", {{"name", name}});
  reject_nul(name);
  reject_nul(value);
}

std::optional<std::vector<std::string>> build_env(const Command& command) {
  if (!command.env)
    return std::nullopt;
  std::vector<std::string> env;
  env.reserve(command.env->size());
  for (const auto& [name, value] : *command.env) {
    check_variable(name, value);
    env.push_back(name + "=" + value);
  }
  return env;
}

// Why `cwd` cannot be the working directory (an errno), or 0 when it can.
int cwd_problem(const std::string& cwd) {
  struct stat st {};
  if (::stat(cwd.c_str(), &st) != 0)
    return errno;
  if (!S_ISDIR(st.st_mode))
    return ENOTDIR;
  if (::access(cwd.c_str(), X_OK) != 0)
    return errno;
  return 0;
}

detail::SpawnedChild spawn(const detail::SpawnOptions& options) {
  try {
    return detail::spawn_process(options);
  } catch (const std::system_error& e) {
    // Python names the cwd when changing into it failed, else the program.
    if (options.cwd) {
      if (const int err = cwd_problem(*options.cwd))
        throw_os_error(err, *options.cwd);
    }
    throw_os_error(e.code().value(), options.argv.front());
  }
}

// Appends everything readable from `pipe` to `out` until end of file.
asio::awaitable<void> drain(stream_descriptor& pipe, std::string& out) {
  constexpr std::size_t kChunk = 1 << 16;
  while (true) {
    const std::size_t old_size = out.size();
    out.resize(old_size + kChunk);
    boost::system::error_code ec;
    const std::size_t n = co_await pipe.async_read_some(
        asio::buffer(out.data() + old_size, kChunk), asio::redirect_error(asio::use_awaitable, ec));
    out.resize(old_size + n);
    if (ec == asio::error::eof)
      co_return;
    if (ec)
      throw boost::system::system_error(ec, "reading the command's output");
  }
}

asio::awaitable<void> wait_for_exit(stream_descriptor& pidfd) {
  co_await pidfd.async_wait(stream_descriptor::wait_read, asio::use_awaitable);
}

// Completes when both pipes are at end of file and the child has exited.
asio::awaitable<void> finish(stream_descriptor& out_pipe, stream_descriptor* err_pipe,
                             stream_descriptor& pidfd, std::string& out, std::string& err) {
  auto out_done = drain(out_pipe, out);
  auto exited = wait_for_exit(pidfd);
  if (err_pipe != nullptr) {
    auto err_done = drain(*err_pipe, err);
    co_await all_of(std::move(out_done), std::move(err_done), std::move(exited));
  } else {
    co_await all_of(std::move(out_done), std::move(exited));
  }
}

// Python's repr of the command as given: 'ls -l' or ['ls', '-l'].
std::string command_repr(const Command& command) {
  if (const auto* text = std::get_if<std::string>(&command.command))
    return python_repr(*text);
  std::string out = "[";
  for (const auto& arg : std::get<std::vector<std::string>>(command.command)) {
    if (out.size() > 1)
      out += ", ";
    out += python_repr(arg);
  }
  return out + "]";
}

// A child in a process group of its own; ValueError for a NUL byte in an argument or the
// directory.
detail::SpawnOptions group_options(std::vector<std::string> argv,
                                   std::optional<std::vector<std::string>> env,
                                   std::optional<std::string> cwd) {
  for (const auto& arg : argv)
    reject_nul(arg);
  if (cwd)
    reject_nul(*cwd);
  return detail::SpawnOptions{.argv = std::move(argv),
                              .env = std::move(env),
                              .cwd = std::move(cwd),
                              .new_process_group = true,
                              .controlling_tty = std::nullopt};
}

}  // namespace

asio::awaitable<CommandResponse> run_command(Command command) {
  detail::SpawnOptions options =
      group_options(build_argv(command), build_env(command), command.cwd);

  Pipe out_pipe;
  Pipe err_pipe;
  open_pipe(out_pipe);
  if (!command.merge_output_streams)
    open_pipe(err_pipe);
  options.stdout_fd = out_pipe.write.get();
  options.stderr_fd = command.merge_output_streams ? out_pipe.write.get() : err_pipe.write.get();

  const detail::SpawnedChild child = spawn(options);
  UniqueFd pidfd_owner(child.pidfd);
  ChildReaper reaper(child.pid);
  // Only the child may hold the write ends, so that end of file means it (and whatever it
  // started) is done writing.
  out_pipe.write.reset();
  err_pipe.write.reset();

  const auto executor = co_await asio::this_coro::executor;
  stream_descriptor pidfd(executor, pidfd_owner.get());
  pidfd_owner.release();
  stream_descriptor out_stream(executor, out_pipe.read.get());
  out_pipe.read.release();
  std::optional<stream_descriptor> err_stream;
  if (!command.merge_output_streams) {
    err_stream.emplace(executor, err_pipe.read.get());
    err_pipe.read.release();
  }

  std::string out_bytes;
  std::string err_bytes;
  auto done = finish(out_stream, err_stream ? &*err_stream : nullptr, pidfd, out_bytes, err_bytes);
  bool timed_out = false;
  Outcome<void> finished;
  if (command.timeout) {
    auto limited = with_timeout(std::move(done), duration_from_seconds(*command.timeout));
    auto in_time = co_await capture(std::move(limited));
    timed_out = in_time.has_value() && !in_time.value();
    finished =
        in_time.has_value() ? Outcome<void>::success() : Outcome<void>::failure(in_time.error());
  } else {
    finished = co_await capture(std::move(done));
  }
  const std::exception_ptr failure = finished.error();

  if (timed_out || failure) {
    reaper.kill_group();
    // Wait for the child's exit without blocking the thread, even when this coroutine has been
    // cancelled (the kill makes the wait short). If that wait is itself cancelled, reap()
    // below blocks for the moment the kernel needs.
    const bool throw_if_cancelled = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    boost::system::error_code ignored;
    co_await pidfd.async_wait(stream_descriptor::wait_read,
                              asio::redirect_error(asio::use_awaitable, ignored));
    co_await asio::this_coro::throw_if_cancelled(throw_if_cancelled);
  }
  const std::optional<int> exit_code = reaper.reap();

  if (failure) {
    const asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      throw boost::system::system_error(asio::error::operation_aborted, "run_command");
    }
    std::rethrow_exception(failure);
  }

  CommandResponse response{.stdout_ = utf8_backslashreplace(out_bytes),
                           .stderr_ = utf8_backslashreplace(err_bytes),
                           .exit_code = exit_code};
  if (timed_out) {
    throw CommandTimeoutError(fmt::format("Timeout ({}s) exceeded while running command",
                                          python_float_repr(*command.timeout)),
                              {{"timeout", *command.timeout},
                               {"stdout", std::move(response.stdout_)},
                               {"stderr", std::move(response.stderr_)}});
  }
  if (command.check && exit_code && *exit_code != 0) {
    std::string message = fmt::format(
        "Command {} failed with exit code {}. Stdout:\n{}\nStderr:\n{}", command_repr(command),
        *exit_code, python_repr(response.stdout_), python_repr(response.stderr_));
    if (!command.error_msg.empty())
      message = command.error_msg + ": " + message;
    boost::json::object info{
        {"exit_code", *exit_code}, {"stdout", response.stdout_}, {"stderr", response.stderr_}};
    throw NonZeroExitCodeError(message, std::move(info));
  }
  co_return response;
}

}  // namespace rex

// --- background processes --------------------------------------------------------------------

namespace rex::detail {

namespace {

using ProcessListener = Runtime::ProcessListener;

// Output a listener may have queued before the process's output is read no further: a slow
// listener slows the process down (as a full pipe would), and memory stays bounded.
constexpr std::size_t kMaxQueuedBytes = std::size_t{1} << 20;

// What one listener has not seen yet.
struct Listener {
  explicit Listener(asio::any_io_executor ex) : wake(std::move(ex)) {}
  std::deque<ProcessEvent> queue;
  std::size_t queued_bytes = 0;
  std::optional<ProcessEnd> end;
  Event wake;
};

}  // namespace

struct ProcessTable::Process {
  explicit Process(asio::any_io_executor ex) : pidfd(ex), out(ex), err(ex), in(ex), drained(ex) {}

  void publish(const ProcessEvent& e) {
    for (const auto& l : listeners) {
      l->queue.push_back(e);
      l->queued_bytes += e.data.size();
      l->wake.set();
    }
  }
  bool backlogged() const {
    return std::any_of(listeners.begin(), listeners.end(),
                       [](const auto& l) { return l->queued_bytes > kMaxQueuedBytes; });
  }

  ProcessInfo info;
  // Until reaped, which is when the process leaves the table. A record that goes first (its
  // io_context went away) kills the group and reaps it on the way.
  std::optional<ChildReaper> reaper;
  stream_descriptor pidfd, out, err, in;  // with a pty: out and in are the master's
  std::vector<std::shared_ptr<Listener>> listeners;
  Event drained;  // set when a listener's backlog went down, or a listener left
  bool exited = false;
};

namespace {

using Process = ProcessTable::Process;

asio::awaitable<void> forward(std::shared_ptr<Process> p, stream_descriptor& pipe,
                              ProcessEvent::Kind kind) {
  std::string buffer(1 << 16, '\0');
  while (!p->exited) {
    boost::system::error_code ec;
    const std::size_t n = co_await pipe.async_read_some(
        asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
    if (n > 0)
      p->publish(ProcessEvent{kind, p->info.pid, buffer.substr(0, n)});
    if (ec)
      co_return;  // end of file (EIO from a pty), or the pipe failed: nothing more comes
    while (p->backlogged() && !p->exited) {
      p->drained.reset();
      co_await p->drained.wait();
    }
  }
}

// A terminal process's output: it ends when the process does, with what the terminal holds
// then; whatever it left running in the background (holding the terminal open) is not waited
// for, as a terminal window closes when its shell exits.
asio::awaitable<void> forward_terminal(std::shared_ptr<Process> p) {
  auto read_done = std::make_shared<Event>(p->out.get_executor());
  asio::co_spawn(
      p->out.get_executor(),
      [p, read_done]() -> asio::awaitable<void> {
        co_await forward(p, p->out, ProcessEvent::Kind::stdout_data);
        read_done->set();
      },
      asio::detached);
  boost::system::error_code ec;
  co_await p->pidfd.async_wait(stream_descriptor::wait_read,
                               asio::redirect_error(asio::use_awaitable, ec));
  p->exited = true;
  p->out.cancel(ec);
  p->drained.set();
  co_await read_done->wait();
  p->out.non_blocking(true, ec);
  std::string buffer(1 << 16, '\0');
  while (!ec) {
    const std::size_t n = p->out.read_some(asio::buffer(buffer), ec);
    if (n > 0)
      p->publish(ProcessEvent{ProcessEvent::Kind::stdout_data, p->info.pid, buffer.substr(0, n)});
  }
}

// Reads a process's output until it has ended, then hands every listener its end and takes
// it out of the table.
asio::awaitable<void> pump(std::shared_ptr<ProcessTable::Processes> table,
                           std::shared_ptr<Process> p) {
  Outcome<void> finished;
  if (p->info.pty) {
    finished = co_await capture(forward_terminal(p));
  } else {
    auto out = forward(p, p->out, ProcessEvent::Kind::stdout_data);
    auto err = forward(p, p->err, ProcessEvent::Kind::stderr_data);
    auto exited = wait_for_exit(p->pidfd);
    finished = co_await capture(all_of(std::move(out), std::move(err), std::move(exited)));
  }
  if (!finished)
    p->reaper->kill_group();  // waiting failed: make sure the reap below cannot block
  const ProcessEnd end = process_end(p->reaper->reap());
  p->reaper.reset();
  table->erase(p->info.pid);  // in the same step: the table holds only unreaped processes
  for (const auto& l : p->listeners) {
    l->end = end;
    l->wake.set();
  }
}

// Hands a listener's events to `on_event` until the process ends (its end), the listener says
// stop (none) or the caller is cancelled.
asio::awaitable<std::optional<ProcessEnd>> listen(std::shared_ptr<Process> p,
                                                  std::shared_ptr<Listener> l, double keepalive,
                                                  ProcessListener on_event) {
  struct Leave {
    Process& p;
    Listener* l;
    ~Leave() {
      std::erase_if(p.listeners, [this](const auto& x) { return x.get() == l; });
      p.drained.set();
    }
  } leave{*p, l.get()};
  while (true) {
    l->wake.reset();
    while (!l->queue.empty()) {
      const ProcessEvent e = std::move(l->queue.front());
      l->queue.pop_front();
      const bool was_backlogged = l->queued_bytes > kMaxQueuedBytes;
      l->queued_bytes -= e.data.size();
      if (was_backlogged && l->queued_bytes <= kMaxQueuedBytes)
        p->drained.set();
      if (!on_event(e))
        co_return std::nullopt;
    }
    if (l->end)
      co_return l->end;
    if (keepalive > 0) {
      auto woken = l->wake.wait();
      const auto in_time =
          co_await with_timeout(std::move(woken), duration_from_seconds(keepalive));
      if (!in_time && !on_event(ProcessEvent{ProcessEvent::Kind::keepalive, p->info.pid, {}}))
        co_return std::nullopt;
    } else {
      co_await l->wake.wait();
    }
  }
}

// A new listener of the process, its first event `started` with the pid.
std::shared_ptr<Listener> attach(Process& p) {
  auto l = std::make_shared<Listener>(p.pidfd.get_executor());
  l->queue.push_back(ProcessEvent{ProcessEvent::Kind::started, p.info.pid, {}});
  p.listeners.push_back(l);
  return l;
}

std::shared_ptr<Process> select(const ProcessTable::Processes& table, long pid,
                                const std::string& tag) {
  if (pid != 0) {
    const auto it = table.find(pid);
    if (it != table.end())
      return it->second;
    throw ProcessDoesNotExistError(fmt::format("no process with pid {} is running", pid));
  }
  if (!tag.empty()) {
    for (const auto& [_, p] : table)
      if (p->info.tag == tag)
        return p;
    throw ProcessDoesNotExistError(
        fmt::format("no process tagged {} is running", python_repr(tag)));
  }
  throw ValueError("a process call needs a pid or a tag");
}

std::vector<std::string> environment_with(const std::map<std::string, std::string>& added) {
  std::map<std::string, std::string> merged = current_environment();
  for (const auto& [name, value] : added) {
    check_variable(name, value);
    merged[name] = value;
  }
  return environment_entries(merged);
}

}  // namespace

int parse_signal(std::string_view name) {
  std::string text = ascii_lower(name);
  if (!text.empty() &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const int n = std::atoi(text.c_str());
    if (n > 0 && n < NSIG)
      return n;
  }
  if (text.starts_with("sig"))
    text.erase(0, 3);
  for (int n = 1; n < NSIG; ++n) {
    const char* abbrev = ::sigabbrev_np(n);
    if (abbrev != nullptr && ascii_lower(abbrev) == text)
      return n;
  }
  throw ValueError(fmt::format("unknown signal {}", python_repr(std::string(name))));
}

ProcessTable::ProcessTable(asio::any_io_executor executor)
    : ex_(std::move(executor)), processes_(std::make_shared<Processes>()) {}

ProcessTable::~ProcessTable() {
  kill_all();
}

void ProcessTable::kill_all() noexcept {
  for (const auto& [_, p] : *processes_)
    p->reaper->kill_group();
}

asio::awaitable<std::optional<ProcessEnd>> ProcessTable::start(ProcessConfig config,
                                                               ProcessListener on_event) {
  if (config.argv.empty())
    throw ValueError("the process's argv is empty");
  std::optional<std::vector<std::string>> env;
  if (config.pty) {
    check_terminal_size(*config.pty);
    // A terminal program needs to know what it draws on.
    std::map<std::string, std::string> added =
        config.env.value_or(std::map<std::string, std::string>{});
    if (!added.contains("TERM"))
      added["TERM"] = "xterm-256color";
    env = environment_with(added);
  } else if (config.env) {
    env = environment_with(*config.env);
  }
  SpawnOptions options = group_options(config.argv, std::move(env), config.cwd);
  Pipe out_pipe, err_pipe, in_pipe;
  Pty pty;
  if (config.pty) {
    try {
      pty = open_pty(static_cast<unsigned short>(config.pty->cols),
                     static_cast<unsigned short>(config.pty->rows));
    } catch (const std::system_error& e) {
      throw_os_error(e.code().value());
    }
    options.controlling_tty = pty.slave_path;
    options.new_process_group = false;  // a session of its own, which is a group too
  } else {
    open_pipe(out_pipe);
    open_pipe(err_pipe);
    if (config.stdin_pipe)
      open_pipe(in_pipe);
    options.stdout_fd = out_pipe.write.get();
    options.stderr_fd = err_pipe.write.get();
    options.stdin_fd = config.stdin_pipe ? in_pipe.read.get() : -1;
  }
  const SpawnedChild child = spawn(options);

  auto p = std::make_shared<Process>(ex_);
  p->reaper.emplace(child.pid);
  p->pidfd.assign(child.pidfd);
  if (config.pty) {
    // Ours closes now: the master reads end of file (EIO) once the child's side is all closed.
    pty.slave.reset();
    UniqueFd input(::fcntl(pty.master.get(), F_DUPFD_CLOEXEC, 0));
    if (input.get() < 0)
      throw_os_error(errno);
    p->out.assign(pty.master.release());
    p->in.assign(input.release());
  } else {
    out_pipe.write.reset();
    err_pipe.write.reset();
    in_pipe.read.reset();
    p->out.assign(out_pipe.read.release());
    p->err.assign(err_pipe.read.release());
    if (config.stdin_pipe)
      p->in.assign(in_pipe.write.release());
  }
  p->info = ProcessInfo{.pid = child.pid,
                        .argv = std::move(config.argv),
                        .env = std::move(config.env),
                        .cwd = config.cwd.value_or(std::filesystem::current_path().string()),
                        .tag = std::move(config.tag),
                        .stdin_pipe = config.stdin_pipe || config.pty.has_value(),
                        .pty = config.pty};
  (*processes_)[child.pid] = p;
  auto l = attach(*p);
  asio::co_spawn(ex_, pump(processes_, p), asio::detached);
  co_return co_await listen(p, l, config.keepalive, std::move(on_event));
}

asio::awaitable<std::optional<ProcessEnd>> ProcessTable::connect(ProcessSelector which,
                                                                 ProcessListener on_event) {
  auto p = select(*processes_, which.pid, which.tag);
  auto l = attach(*p);
  co_return co_await listen(p, l, which.keepalive, std::move(on_event));
}

ProcessListResponse ProcessTable::list() const {
  ProcessListResponse out;
  for (const auto& [_, p] : *processes_)
    out.processes.push_back(p->info);
  return out;
}

asio::awaitable<void> ProcessTable::input(ProcessInput input) {
  auto p = select(*processes_, input.pid, input.tag);
  if (!p->in.is_open())
    throw ValueError(
        fmt::format("process {} has no stdin to write to: start it with "
                    "stdin_pipe, and write before closing it",
                    p->info.pid));
  if (!input.data.empty()) {
    boost::system::error_code ec;
    co_await asio::async_write(p->in, asio::buffer(input.data),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec && ec != asio::error::broken_pipe)
      throw_os_error(ec.value());
  }
  if (input.close && p->info.pty) {
    // A terminal has no end of its input: Ctrl-D is what a person types for one.
    boost::system::error_code ignored;
    co_await asio::async_write(p->in, asio::buffer("\x04", 1),
                               asio::redirect_error(asio::use_awaitable, ignored));
  } else if (input.close) {
    boost::system::error_code ignored;
    p->in.close(ignored);
    p->info.stdin_pipe = false;
  }
}

void ProcessTable::resize(const ProcessResize& resize) {
  check_terminal_size(resize.size);
  auto p = select(*processes_, resize.pid, resize.tag);
  if (!p->info.pty)
    throw ValueError(
        fmt::format("process {} has no terminal to resize: start it with pty", p->info.pid));
  try {
    set_terminal_size(p->out.native_handle(), static_cast<unsigned short>(resize.size.cols),
                      static_cast<unsigned short>(resize.size.rows));
  } catch (const std::system_error& e) {
    throw_os_error(e.code().value());
  }
  p->info.pty = resize.size;
}

void ProcessTable::signal(const ProcessSignal& signal) {
  const int number = parse_signal(signal.signal);
  auto p = select(*processes_, signal.pid, signal.tag);
  if (::kill(-static_cast<pid_t>(p->info.pid), number) != 0 && errno != ESRCH)
    throw_os_error(errno);
}

}  // namespace rex::detail
