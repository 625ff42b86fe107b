// `rex server` and `rex-server` (alias swerex-remote): the options and the main loop of the
// HTTP server over a LocalRuntime, shared by both executables.
#pragma once

#include <rex/server/server.hpp>

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace rex::cli {

struct ServerOptions {
  server::ServerConfig server{};
  double max_lifetime = 0;  // seconds; 0 = no limit
  std::string log_level = "info";
};

/// Adds SWE-ReX's flags (--host, --port, --auth-token) and rex's additions to `app`.
void add_server_options(CLI::App& app, ServerOptions& options);

/// Serves until SIGINT/SIGTERM or --max-lifetime, then closes every session and returns the
/// exit status. A second signal stops at once (sessions are still killed on the way out).
int run_server(const ServerOptions& options);

/// Whether a listening host is this machine's loopback only (127.0.0.0/8, ::1, localhost).
bool is_loopback(std::string_view host);

/// Raises the soft limit of open files to the hard limit (each session holds descriptors).
void raise_fd_limit();

}  // namespace rex::cli
