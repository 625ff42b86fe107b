#include "shell_command.hpp"

#include <rex/backends/local/local_config.hpp>
#include <rex/backends/remote/remote_config.hpp>
#include <rex/core/event.hpp>
#include <rex/protocol/exceptions.hpp>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "line_reader.hpp"
#include "terminal_shell.hpp"

namespace rex::cli {

namespace {

std::string default_history_file() {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    const passwd* pw = ::getpwuid(::getuid());
    home = pw != nullptr ? pw->pw_dir : nullptr;
  }
  return home != nullptr ? std::string(home) + "/.rex_history" : std::string();
}

std::string_view trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos)
    return {};
  const auto end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

// `exit` or `exit N` leaves the shell with status N; anything else is a command for bash.
std::optional<int> exit_request(std::string_view command) {
  if (command == "exit")
    return 0;
  if (!command.starts_with("exit ") && !command.starts_with("exit\t"))
    return std::nullopt;
  const std::string_view arg = trim(command.substr(4));
  int code = 0;
  const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), code);
  if (ec != std::errc() || end != arg.data() + arg.size())
    return std::nullopt;
  return code & 0xff;
}

void print(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

class Shell {
 public:
  Shell(asio::any_io_executor executor, const ShellOptions& options, LineReader& reader,
        std::string prompt, bool interactive, std::string description)
      : executor_(executor),
        options_(options),
        reader_(reader),
        prompt_(std::move(prompt)),
        interactive_(interactive),
        description_(std::move(description)),
        interrupts_done_(executor),
        resizes_(executor, SIGWINCH) {}

  asio::awaitable<int> run(Deployment& deployment) {
    runtime_ = &deployment.runtime();
    if (interactive_)
      asio::co_spawn(executor_, watch_resizes(), asio::detached);
    co_await create_session();
    if (interactive_) {
      std::cerr << fmt::format(
          "rex shell on {}: Ctrl-C interrupts a command, Ctrl-D or exit leaves\n", description_);
    }
    int status = 0;
    for (;;) {
      std::optional<std::string> line = co_await reader_.read(prompt_);
      if (!line)
        break;
      const std::string_view command = trim(*line);
      if (command.empty())
        continue;
      if (auto code = exit_request(command)) {
        status = *code;
        break;
      }
      co_await run_command(*line);
    }
    co_return status;
  }

  /// SIGINT while the body runs: interrupt the running command, if any.
  void interrupt() {
    if (!running_ || runtime_ == nullptr)
      return;
    ++pending_interrupts_;
    asio::co_spawn(executor_, send_interrupt(*runtime_), [this](std::exception_ptr e) {
      --pending_interrupts_;
      interrupts_done_.set();
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& error) {
          std::cerr << "rex: interrupt failed: " << error.what() << '\n';
        }
      }
    });
  }

  /// Before the deployment stops: no more input, and no interrupt left inside the runtime.
  asio::awaitable<void> finish() {
    reader_.stop();
    boost::system::error_code ignored;
    resizes_.cancel(ignored);
    co_await wait_for_interrupts();
  }

 private:
  asio::awaitable<void> create_session() {
    CreateBashSessionRequest create;
    create.startup_source = options_.startup_source;
    create.startup_timeout = 10.0;
    auto created = co_await runtime_->create_session(create);
    print(created.output);
  }

  asio::awaitable<void> watch_resizes() {
    for (;;) {
      auto [ec, signo] = co_await resizes_.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec)
        co_return;
      reader_.resized();
    }
  }

  static asio::awaitable<void> send_interrupt(Runtime& runtime) {
    BashInterruptAction action;
    Action interrupt = action;
    co_await runtime.run_in_session(interrupt);  // the running command reports the outcome
  }

  asio::awaitable<void> wait_for_interrupts() {
    while (pending_interrupts_ > 0) {
      interrupts_done_.reset();
      co_await interrupts_done_.wait();
    }
  }

  asio::awaitable<void> run_command(std::string command) {
    BashAction bash;
    bash.command = std::move(command);
    bash.check = "silent";
    if (options_.timeout > 0)
      bash.timeout = options_.timeout;
    const Action action = bash;

    std::string shown;  // what streamed so far
    Runtime::OutputListener on_output = [&shown](std::string_view piece) {
      print(piece);
      shown.append(piece);
    };
    std::optional<BashObservation> observation;
    std::string error;
    bool timed_out = false;
    bool died = false;
    running_ = true;
    try {
      observation = co_await runtime_->run_in_session_streaming(action, on_output);
    } catch (const CommandTimeoutError& e) {
      timed_out = true;
      error = e.what();
    } catch (const SessionDiedError& e) {
      died = true;
      error = e.what();
    } catch (const SwerexException& e) {
      error = e.what();
    }
    running_ = false;
    co_await wait_for_interrupts();

    if (observation) {
      // What did not stream (a last line without a newline, or all of it).
      const std::string& output = observation->output;
      if (output.starts_with(shown))
        print(std::string_view(output).substr(shown.size()));
      else if (shown.empty())
        print(output);
      shown = output;
    }
    if (!shown.empty() && shown.back() != '\n')
      print("\n");
    if (observation && observation->exit_code && *observation->exit_code != 0)
      print(fmt::format("[exit {}]\n", *observation->exit_code));
    if (!error.empty())
      std::cerr << "rex: " << error << '\n';
    if (timed_out) {
      // The command keeps running until interrupted; the session is needed for the next one.
      std::cerr << "rex: interrupting it\n";
      BashInterruptAction stop;
      Action interrupt = stop;
      try {
        co_await runtime_->run_in_session(interrupt);
      } catch (const SwerexException& e) {
        std::cerr << "rex: interrupt failed: " << e.what() << '\n';
      }
    }
    if (died) {
      std::cerr << "rex: starting a new session\n";
      co_await restart_session();
    }
  }

  asio::awaitable<void> restart_session() {
    CloseBashSessionRequest close;
    try {
      co_await runtime_->close_session(close);
    } catch (const SwerexException&) {
      // Already gone with its shell.
    }
    co_await create_session();
  }

  asio::any_io_executor executor_;
  const ShellOptions& options_;
  LineReader& reader_;
  std::string prompt_;
  bool interactive_;
  std::string description_;
  Runtime* runtime_ = nullptr;
  bool running_ = false;
  int pending_interrupts_ = 0;
  Event interrupts_done_;  // set whenever an interrupt has been delivered
  asio::signal_set resizes_;
};

}  // namespace

void add_shell_options(CLI::App& app, ShellOptions& o) {
  app.add_option("--timeout", o.timeout,
                 "Seconds a command may run before it is interrupted (default: no limit; Ctrl-C "
                 "interrupts)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--startup-source", o.startup_source, "Files to source when the session starts")
      ->allow_extra_args(false);
  app.add_option("--history-file", o.history_file,
                 "Where the command history is kept (default ~/.rex_history)");
  app.add_flag("--no-tty", o.no_tty,
               "Line by line through a bash session even when stdin is a terminal (the default "
               "then: a terminal attached to a shell in the sandbox; --timeout, "
               "--startup-source and --history-file apply to the line mode only)");
  app.add_option("--attach-session", o.attach_session,
                 "Attach this terminal to the sandbox's bash session of that name (an agent's, on "
                 "a remote server or a gateway's session) between its commands; Ctrl-P Ctrl-Q "
                 "detaches and hands it back to its commands");
  add_deployment_options(app, o.deployment);
}

int shell_command(const ShellOptions& options) {
  asio::io_context io(1);
  std::unique_ptr<Deployment> deployment;  // after io: destroyed while io still exists
  const bool interactive = ::isatty(STDIN_FILENO) == 1 && ::isatty(STDOUT_FILENO) == 1;
  if (!options.attach_session.empty() && (!interactive || options.no_tty)) {
    std::cerr << "rex shell: --attach-session needs a terminal (stdin and stdout), without "
                 "--no-tty\n";
    return exit_usage;
  }
  DeploymentConfig config;
  bool terminal_mode = false;
  try {
    config = build_deployment_config(options.deployment);
    // A dummy deployment's scripted answers are commands' answers: it has no terminal.
    terminal_mode = interactive && !options.no_tty && deployment_type(config) != "dummy";
    // The terminal's shell ends by itself; the other sessions of a server are not this
    // shell's to close (an agent's, or the one the terminal was lent).
    if (auto* remote = config.get_if<RemoteDeploymentConfig>(); remote && terminal_mode)
      remote->close_on_stop = false;
    deployment = make_deployment(io.get_executor(), config);
  } catch (const DeploymentConfigError& e) {
    std::cerr << "rex shell: " << e.what() << '\n';
    return exit_usage;
  }
  if (terminal_mode) {
    TerminalShellOptions terminal_options;
    terminal_options.attach_session = options.attach_session;
    if (const auto* local = config.get_if<LocalDeploymentConfig>()) {
      terminal_options.env = local->env;
      terminal_options.working_dir = local->working_dir;
    }
    TerminalShell terminal(io.get_executor(), std::move(terminal_options));
    DeploymentBody body = [&terminal](Deployment& d) { return terminal.run(d); };
    SignalRouting routing;
    routing.before_stop = [&terminal] { return terminal.finish(); };
    return run_with_deployment(io, *deployment, options.deployment, std::move(body),
                               std::move(routing));
  }
  if (interactive)
    std::setlocale(LC_CTYPE, "");  // libedit decodes multibyte input by the locale
  LineReaderConfig reader_config;
  reader_config.edit = interactive;
  reader_config.history_file =
      options.history_file.empty() ? default_history_file() : options.history_file;
  LineReader reader(io.get_executor(), reader_config);
  Shell shell(io.get_executor(), options, reader, fmt::format("rex:{} $ ", deployment_type(config)),
              interactive, describe_deployment(config));

  DeploymentBody body = [&shell](Deployment& d) { return shell.run(d); };
  SignalRouting routing;
  routing.on_interrupt = [&shell] { shell.interrupt(); };
  routing.before_stop = [&shell] { return shell.finish(); };
  const int status =
      run_with_deployment(io, *deployment, options.deployment, std::move(body), std::move(routing));
  reader.stop();
  return status;
}

}  // namespace rex::cli
