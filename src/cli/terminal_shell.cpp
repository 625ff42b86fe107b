#include "terminal_shell.hpp"

#include <rex/core/event.hpp>
#include <rex/core/random.hpp>
#include <rex/core/timeout.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/runtime.hpp>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>

namespace rex::cli {

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

TerminalSize window_size() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0)
    return TerminalSize{80, 24};
  return TerminalSize{ws.ws_col, ws.ws_row};
}

// Writes all of `bytes` to stdout. Blocking: a terminal takes what it is given quickly, and the
// descriptor is never made non-blocking (it is shared with the shell rex was started from).
void write_out(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      // Another program made the terminal non-blocking: wait until it takes more.
      pollfd out{STDOUT_FILENO, POLLOUT, 0};
      ::poll(&out, 1, 1000);
      continue;
    }
    if (n <= 0)
      return;  // the terminal is gone: nothing to show the output on
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// The shell a person expects in the sandbox: bash when it has one, else sh.
ProcessConfig shell_config(const std::string& tag, const TerminalShellOptions& options) {
  ProcessConfig c;
  c.argv = {"/bin/sh", "-c",
            "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"};
  c.tag = tag;
  c.keepalive = 15;  // a quiet shell's stream stays open through proxies
  c.pty = window_size();
  std::map<std::string, std::string> env = options.env;
  if (!options.working_dir.empty())
    c.cwd = options.working_dir;
  if (const char* term = std::getenv("TERM"); term != nullptr && *term != '\0')
    env["TERM"] = term;
  if (const char* colorterm = std::getenv("COLORTERM"); colorterm != nullptr)
    env["COLORTERM"] = colorterm;
  if (!env.empty())
    c.env = std::move(env);
  return c;
}

// The keys that detach from a session (as docker attach's): Ctrl-P Ctrl-Q.
constexpr std::string_view kDetachKeys = "\x10\x11";

// What of `typed` goes to the session before a detach: all of it, or what comes before the
// detach keys (`detach` is then true). A Ctrl-P at the very end is held back in `held` until
// the next key says whether it starts the detach keys.
std::string keys_before_detach(std::string& held, std::string typed, bool& detach) {
  std::string pending = std::move(held) + std::move(typed);
  held.clear();
  if (const auto at = pending.find(kDetachKeys); at != std::string::npos) {
    detach = true;
    pending.resize(at);
    return pending;
  }
  if (!pending.empty() && pending.back() == kDetachKeys.front()) {
    held = pending.substr(pending.size() - 1);
    pending.pop_back();
  }
  return pending;
}

// What was typed and not yet sent, filled by the KeyReader's thread through the executor.
struct Keys {
  explicit Keys(asio::any_io_executor ex) : arrived(std::move(ex)) {}
  std::string typed;
  bool ended = false;  // stdin reached its end (the terminal hung up)
  Event arrived;
};

// Reads this terminal's keys on a thread of its own, with poll() and blocking reads: an asio
// descriptor would make stdin non-blocking, and with it stdout (the same open terminal) and the
// shell rex was started from, which would then lose output and see EAGAIN after rex exits.
class KeyReader {
 public:
  KeyReader(asio::any_io_executor ex, std::shared_ptr<Keys> keys) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2");
    wake_read_ = p[0];
    wake_write_ = p[1];
    thread_ = std::thread([this, ex = std::move(ex), keys = std::move(keys)] { run(ex, keys); });
  }
  ~KeyReader() {
    const char stop = 0;
    (void)::write(wake_write_, &stop, 1);
    thread_.join();
    ::close(wake_read_);
    ::close(wake_write_);
  }
  KeyReader(const KeyReader&) = delete;
  KeyReader& operator=(const KeyReader&) = delete;

 private:
  void run(const asio::any_io_executor& ex, const std::shared_ptr<Keys>& keys) const {
    std::array<char, 4096> buffer{};
    for (;;) {
      std::array<pollfd, 2> fds{pollfd{STDIN_FILENO, POLLIN, 0}, pollfd{wake_read_, POLLIN, 0}};
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR)
          continue;
        return;
      }
      if (fds[1].revents != 0)
        return;  // stopping
      const ssize_t n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      std::string piece = n > 0 ? std::string(buffer.data(), static_cast<std::size_t>(n)) : "";
      asio::post(ex, [keys, piece = std::move(piece)] {
        if (piece.empty())
          keys->ended = true;
        keys->typed += piece;
        keys->arrived.set();
      });
      if (n <= 0)
        return;
    }
  }

  int wake_read_ = -1;
  int wake_write_ = -1;
  std::thread thread_;
};

}  // namespace

struct TerminalShell::Impl {
  Impl(asio::any_io_executor ex, TerminalShellOptions o)
      : executor(ex), options(std::move(o)), resizes(ex, SIGWINCH) {}

  // This terminal in raw mode: keys arrive as typed, nothing is echoed or translated here.
  void enter_raw_mode() {
    termios t{};
    if (::tcgetattr(STDIN_FILENO, &t) != 0)
      return;
    saved = t;
    ::cfmakeraw(&t);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    ::tcsetattr(STDIN_FILENO, TCSADRAIN, &t);
  }

  void restore() {
    boost::system::error_code ignored;
    resizes.cancel(ignored);
    reader.reset();
    if (saved) {
      ::tcsetattr(STDIN_FILENO, TCSADRAIN, &*saved);
      saved.reset();
    }
  }

  bool attaching() const { return !options.attach_session.empty(); }

  // Keys to the sandbox's shell, or to the attached session. Throws what the runtime throws
  // when the shell, or the attachment, has just ended.
  asio::awaitable<void> send_keys(Runtime& runtime, std::string data) {
    if (attaching()) {
      SessionInput input{.session = options.attach_session, .input = std::move(data)};
      co_await runtime.send_session_input(std::move(input));
    } else {
      ProcessInput input{.pid = 0, .tag = tag, .data = std::move(data), .close = false};
      co_await runtime.send_process_input(std::move(input));
    }
  }

  // A size for the sandbox's shell's terminal, or for the attached session's.
  asio::awaitable<void> send_size(Runtime& runtime, TerminalSize size) {
    if (attaching()) {
      SessionResize resize{.session = options.attach_session, .size = size};
      co_await runtime.resize_session(std::move(resize));
    } else {
      ProcessResize resize{.pid = 0, .tag = tag, .size = size};
      co_await runtime.resize_process(std::move(resize));
    }
  }

  // Keys to the sandbox. What is typed while one write is on its way goes with the next. Returns
  // when the keys detach from a session (detached is then true).
  asio::awaitable<void> pump_input(Runtime& runtime) {
    keys = std::make_shared<Keys>(executor);
    reader = std::make_unique<KeyReader>(executor, keys);
    std::string held;  // a Ctrl-P that may start the detach keys
    for (;;) {
      while (keys->typed.empty() && !keys->ended) {
        keys->arrived.reset();
        if (!co_await keys->arrived.wait())
          co_return;  // cancelled: the shell has ended, or its start failed
      }
      if (!keys->typed.empty()) {
        std::string data = std::move(keys->typed);
        keys->typed.clear();
        bool detach = false;
        if (attaching())
          data = keys_before_detach(held, std::move(data), detach);
        try {
          if (!data.empty())
            co_await send_keys(runtime, std::move(data));
        } catch (const ProcessDoesNotExistError&) {
          co_return;  // the shell has just ended: its end is on its way
        } catch (const NoCommandRunningError&) {
          co_return;  // the attachment has just ended: its end is on its way
        }
        if (detach) {
          detached = true;
          co_return;
        }
        continue;
      }
      if (attaching()) {
        detached = true;  // the person is gone: the session goes back to its commands
        co_return;
      }
      // This terminal is gone (hung up): so is the person, and the shell with them.
      ProcessSignal hangup{.pid = 0, .tag = tag, .signal = "SIGHUP"};
      try {
        co_await runtime.signal_process(hangup);
      } catch (const ProcessDoesNotExistError&) {
      }
      co_return;
    }
  }

  // The sandbox's shell, started and followed. A stream that breaks (a proxy on the way that
  // drops it: Kubernetes' pod proxy does, now and then, right after the answer's head) is
  // taken up again by the shell's tag, up to three times; the shell is then asked to redraw its
  // prompt (two resizes: the kernel signals only a change), since what it printed meanwhile is
  // lost. A shell that is not running (or not reachable) ends it with the first failure.
  asio::awaitable<std::optional<ProcessEnd>> follow_shell(Runtime& runtime,
                                                          Runtime::ProcessListener show) {
    std::exception_ptr broke;
    try {
      co_return co_await runtime.start_process(shell_config(tag, options), show);
    } catch (const http::ConnectionError&) {
      broke = std::current_exception();
    }
    Runtime::ProcessListener show_and_redraw = [this, &runtime, show](const ProcessEvent& e) {
      if (e.kind == ProcessEvent::Kind::started)
        asio::co_spawn(executor, redraw(runtime), [](std::exception_ptr) {});
      return show(e);
    };
    for (int attempt = 0; attempt < 3; ++attempt) {
      ProcessSelector again{.pid = 0, .tag = tag, .keepalive = 15};
      auto connecting = runtime.connect_process(std::move(again), show_and_redraw);
      auto taken_up = co_await capture(std::move(connecting));
      if (!taken_up.error())
        co_return std::move(taken_up).value();
      try {
        std::rethrow_exception(taken_up.error());
      } catch (const http::ConnectionError&) {
        continue;  // broken again on the way
      } catch (...) {
        break;
      }
    }
    std::rethrow_exception(broke);
  }

  // Has the shell draw its prompt again, once its stream was taken up (follow_shell).
  asio::awaitable<void> redraw(Runtime& runtime) {
    TerminalSize size = window_size();
    TerminalSize nudged{.cols = size.cols, .rows = size.rows > 1 ? size.rows - 1 : size.rows + 1};
    for (const TerminalSize& s : {nudged, size})
      co_await send_size(runtime, s);
  }

  asio::awaitable<void> follow_resizes(Runtime& runtime) {
    for (;;) {
      auto [ec, signo] = co_await resizes.async_wait(use_tuple);
      (void)signo;
      if (ec)
        co_return;
      try {
        co_await send_size(runtime, window_size());
      } catch (const ProcessDoesNotExistError&) {
        co_return;  // it has just ended
      } catch (const std::exception&) {
        // A sandbox whose server cannot resize keeps the size it has: no reason to end.
      }
    }
  }

  asio::awaitable<int> run(Deployment& deployment) {
    Runtime& runtime = deployment.runtime();
    runtime_ = &runtime;
    tag = "rex-shell-" + random_hex(8);
    Runtime::ProcessListener show = [](const ProcessEvent& e) {
      if (e.kind == ProcessEvent::Kind::stdout_data || e.kind == ProcessEvent::Kind::stderr_data)
        write_out(e.data);
      return true;
    };
    enter_raw_mode();
    running = true;
    std::optional<ProcessEnd> end;
    try {
      // Resizes follow beside (a signal_set's wait does not take a cancellation slot here):
      // cancelled through resizes.cancel() when the shell has ended.
      asio::co_spawn(executor, follow_resizes(runtime), asio::detached);
      // The first to finish decides, by value or by exception: a start the server refuses must
      // not wait for a key to be typed.
      auto shell = attaching()
                       ? runtime.attach_session(SessionAttach{.session = options.attach_session,
                                                              .size = window_size(),
                                                              .keepalive = 15},
                                                show)
                       : follow_shell(runtime, show);
      auto keys_in = pump_input(runtime);
      auto ended = co_await first_of(std::move(shell), std::move(keys_in));
      if (ended.index() == 0)
        end = std::get<0>(std::move(ended));
    } catch (const ProcessesUnsupportedError& e) {
      restore();
      if (attaching())
        throw;
      throw ProcessesUnsupportedError(
          std::string(e.what()) +
          ": the sandbox's server has no terminals for rex shell (`rex shell --no-tty` works "
          "with it)");
    } catch (...) {
      restore();
      throw;
    }
    restore();
    running = false;
    if (attaching() && detached) {
      write_out(fmt::format("\r\nrex: detached from session {}; it is back with its commands\r\n",
                            options.attach_session));
      co_return 0;
    }
    if (!end || (!end->exit_code && !end->signal))
      co_return 1;
    if (end->signal)
      co_return 128 + *end->signal;
    co_return *end->exit_code;
  }

  asio::any_io_executor executor;
  TerminalShellOptions options;
  asio::signal_set resizes;
  std::shared_ptr<Keys> keys;
  std::unique_ptr<KeyReader> reader;  // while attached
  std::optional<termios> saved;
  std::string tag;
  Runtime* runtime_ = nullptr;
  bool running = false;   // the sandbox's shell was started and has not been seen to end
  bool detached = false;  // the keys (or the terminal's end) detached from the session
};

TerminalShell::TerminalShell(asio::any_io_executor executor, TerminalShellOptions options)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(options))) {}

TerminalShell::~TerminalShell() {
  impl_->restore();
}

asio::awaitable<int> TerminalShell::run(Deployment& deployment) {
  return impl_->run(deployment);
}

asio::awaitable<void> TerminalShell::finish() {
  impl_->restore();  // also ends the resizes
  // A signal ended rex while the shell ran: end the shell too (a local one would outlive us).
  // An attached session is only detached from: the stream's end does that.
  if (impl_->running && impl_->runtime_ != nullptr && !impl_->attaching()) {
    ProcessSignal kill{.pid = 0, .tag = impl_->tag, .signal = "SIGHUP"};
    try {
      co_await impl_->runtime_->signal_process(std::move(kill));
    } catch (const std::exception&) {
      // Already gone, or the sandbox cannot be reached: it goes with the deployment.
    }
  }
}

}  // namespace rex::cli
