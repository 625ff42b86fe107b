#include "server_command.hpp"

#include <rex/core/log.hpp>
#include <rex/core/timeout.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/server/lifetime.hpp>
#include <rex/session/teardown.hpp>
#include <rex/version.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

namespace rex::cli {

namespace asio = boost::asio;

void add_server_options(CLI::App& app, ServerOptions& o) {
  auto& s = o.server;
  app.add_option("--host", s.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", s.port, "TCP port to listen on (0: any free port)")
      ->capture_default_str();
  app.add_option("--auth-token", s.auth_token,
                 "Token every request must carry in X-API-Key (empty: no authentication); "
                 "also read from REX_AUTH_TOKEN, which keeps it out of the process list")
      ->envname("REX_AUTH_TOKEN")
      ->required();
  app.add_option("--unix-socket", s.unix_socket,
                 "Listen on this unix domain socket instead of TCP");
  app.add_option("--max-lifetime", o.max_lifetime,
                 "Seconds after which the server closes every session and exits (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-connections", s.max_connections,
                 "Concurrent connections; more are answered 503")
      ->capture_default_str();
  app.add_option("--max-header-bytes", s.max_header_bytes,
                 "Largest request header; larger ones are answered 431")
      ->capture_default_str();
  app.add_option("--max-body-bytes", s.max_body_bytes,
                 "Largest upload body; larger ones are answered 413")
      ->capture_default_str();
  app.add_option("--max-json-body-bytes", s.max_json_body_bytes,
                 "Largest JSON request body; larger ones are answered 413")
      ->capture_default_str();
  auto seconds = [](std::chrono::milliseconds& target) {
    return [&target](double v) {
      target = std::chrono::milliseconds(static_cast<long long>(v * 1000));
    };
  };
  app.add_option_function<double>("--idle-timeout", seconds(s.idle_timeout),
                                  "Seconds a keep-alive connection may stay idle (default 120)")
      ->check(CLI::PositiveNumber);
  app.add_option_function<double>("--read-timeout", seconds(s.read_timeout),
                                  "Seconds a request's header or a piece of its body may take "
                                  "to arrive (default 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--upload-dir", s.upload_dir,
                 "Directory for uploads in transit (default: the system's temporary directory)");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

void raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

namespace {

struct Shutdown {
  server::Server& server;
  LocalRuntime& runtime;
  bool started = false;
};

// Stops accepting, closes every session (a running command ends with an error answer), and
// lets the server finish the answers in flight.
asio::awaitable<void> shut_down(Shutdown& s, std::string reason) {
  if (s.started)
    co_return;
  s.started = true;
  logging::info("rex-server: {}; closing all sessions", reason);
  s.server.stop();
  co_await s.runtime.close();
}

asio::awaitable<void> watch_signals(asio::signal_set& signals, Shutdown& s, asio::io_context& io) {
  auto [ec, signo] = co_await signals.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec)
    co_return;
  const std::string reason = signo == SIGINT ? "SIGINT" : "SIGTERM";
  auto first = shut_down(s, reason);
  asio::co_spawn(io, std::move(first), asio::detached);
  auto [ec2, again] = co_await signals.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!ec2) {
    logging::warn("rex-server: second signal; stopping now");
    io.stop();
  }
  (void)again;
}

// A container started without an init makes rex-server its PID 1. Every process whose parent
// ends (the background jobs of a closed session) is then reparented to PID 1, and only PID 1
// can reap it. So PID 1 stays behind as a minimal init: it forks, the child serves, and PID 1
// passes each signal it receives on to the server and reaps whatever ends, until the server
// has exited; it then exits the same way. Returns the status PID 1 exits with; nothing in the
// server, or when rex-server is not PID 1.
std::optional<int> become_init_if_pid_one() {
  if (::getpid() != 1)
    return std::nullopt;
  sigset_t all;
  sigset_t previous;
  ::sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, &previous);
  const pid_t server = ::fork();
  if (server <= 0) {
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (server < 0)
      std::cerr << "rex-server: cannot fork a server under PID 1 (" << std::strerror(errno)
                << "); serving as PID 1: processes left by closed sessions stay zombies\n";
    return std::nullopt;
  }
  for (;;) {
    int signo = 0;
    if (::sigwait(&all, &signo) != 0)
      continue;
    if (signo != SIGCHLD) {
      ::kill(server, signo);
      continue;
    }
    int status = 0;
    pid_t ended = 0;
    while ((ended = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (ended == server)
        return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
  }
}

// The token may have come from the environment (read into the options by now). The sessions
// must not inherit it, and nothing may read it from /proc/PID/environ, which shows the bytes the
// process was started with wherever they still are: they are overwritten, then the entry goes.
// Done before become_init_if_pid_one, so that neither process keeps them.
void forget_token_in_environment() {
  constexpr std::string_view kName = "REX_AUTH_TOKEN=";
  std::vector<char*> entries;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (std::string_view(*e).starts_with(kName))
      entries.push_back(*e);
  ::unsetenv("REX_AUTH_TOKEN");
  for (char* entry : entries)
    std::memset(entry, 0, std::strlen(entry));
}

}  // namespace

int run_server(const ServerOptions& options) {
  forget_token_in_environment();
  if (const auto status = become_init_if_pid_one())
    return *status;
  logging::set_level(logging::parse_level(options.log_level).value_or(logging::Level::info));
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();

  asio::io_context io(1);
  LocalRuntime runtime(io.get_executor());
  std::optional<Shutdown> shutdown;
  server::Lifetime lifetime(io.get_executor(), [&shutdown](std::string reason) {
    return shut_down(*shutdown, std::move(reason));
  });
  server::Server server(io.get_executor(), runtime, options.server, &lifetime);
  // A later POST /lifetime replaces this deadline (a server started ahead of its use).
  try {
    lifetime.set(options.max_lifetime);
  } catch (const std::exception& e) {
    std::cerr << "rex-server: --max-lifetime: " << e.what() << '\n';
    return 2;
  }
  try {
    server.listen();
  } catch (const std::exception& e) {
    std::cerr << "rex-server: " << e.what() << '\n';
    return 1;
  }
  const auto& cfg = options.server;
  if (cfg.unix_socket.empty() && cfg.auth_token.empty() && !is_loopback(cfg.host)) {
    logging::warn(
        "rex-server: listening on {} with an empty --auth-token: anyone who can reach this "
        "address can run commands here",
        cfg.host);
  }
  // Signals are caught before the address is announced: whoever starts the server may stop it
  // as soon as it has read that line.
  shutdown.emplace(Shutdown{server, runtime});
  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::co_spawn(io, watch_signals(signals, *shutdown, io), asio::detached);
  logging::info("rex-server: sessions end by {}", rex::describe_session_teardown());
  logging::info("rex-server {} listening on {}", rex::version(), server.url());

  std::exception_ptr failure;
  asio::co_spawn(io, server.run(), [&](std::exception_ptr e) {
    failure = e;
    // Served out: nothing else may keep the process alive.
    boost::system::error_code ignored;
    signals.cancel(ignored);
    lifetime.cancel();
  });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::cerr << "rex-server: " << e.what() << '\n';
      return 1;
    }
  }
  logging::info("rex-server: stopped");
  return 0;
}

bool is_loopback(std::string_view host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost" || host.starts_with("127.");
}

}  // namespace rex::cli
