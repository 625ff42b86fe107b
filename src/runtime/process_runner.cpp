#include <rex/core/outcome.hpp>
#include <rex/core/timeout.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/file_ops.hpp>
#include <rex/runtime/process_runner.hpp>
#include <rex/session/output.hpp>

#include "core/spawn.hpp"
#include "core/unique_fd.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cerrno>
#include <chrono>
#include <exception>
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
    if (WIFEXITED(status))
      return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
      return -WTERMSIG(status);
    return std::nullopt;
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

void reject_nul(std::string_view value) {
  if (value.find('\0') != std::string_view::npos)
    throw ValueError("embedded null byte");
}

std::optional<std::vector<std::string>> build_env(const Command& command) {
  if (!command.env)
    return std::nullopt;
  std::vector<std::string> env;
  env.reserve(command.env->size());
  for (const auto& [name, value] : *command.env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      throw ValueError("illegal environment variable name", {{"name", name}});
    }
    reject_nul(name);
    reject_nul(value);
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

}  // namespace

asio::awaitable<CommandResponse> run_command(Command command) {
  detail::SpawnOptions options{.argv = build_argv(command),
                               .env = build_env(command),
                               .cwd = command.cwd,
                               .new_process_group = true,
                               .controlling_tty = std::nullopt};
  for (const auto& arg : options.argv)
    reject_nul(arg);
  if (options.cwd)
    reject_nul(*options.cwd);

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
