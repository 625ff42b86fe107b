// The deployment flags shared by `rex run`, `rex shell` and `rex eval`, and the lifecycle `run`
// and `shell` give a deployment: started with progress on stderr, stopped on every way out
// (done, error, signal; signals through StopSignals, which `rex eval` uses too).
//
// --deployment names a backend (local, docker, podman, remote, ...) or a JSON config file; the
// other flags are applied on top of it as the JSON fields they stand for (the backend table says
// which), and the library validates the result, so every error names the field ("docker.pull:
// expected one of ...").
#pragma once

#include <rex/backends/backends.hpp>
#include <rex/deployment/deployment.hpp>

#include <CLI/CLI.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rex::cli {

/// Exit statuses of `rex run` and `rex shell`.
inline constexpr int exit_failure = 1;  // a step failed, or the deployment did
inline constexpr int exit_usage = 2;    // bad flags or a bad config: nothing was started

struct DeploymentOptions {
  std::string deployment = "local";  // a type name or the path of a JSON config file
  // The backend flags given (--image, --env, ...; the backend table has them all), in order,
  // with their values; a switch's value is empty.
  std::vector<std::pair<std::string, std::string>> flags{};
  bool quiet = false;  // no progress lines on stderr
};

/// Adds --deployment, every flag of the backend table (rex/deployment/registry.hpp; the help of
/// each says what it sets on each backend) and --quiet to `app`.
void add_deployment_options(CLI::App& app, DeploymentOptions& options);

/// Adds only the backend table's flags; the caller has its own --deployment.
void add_backend_flags(CLI::App& app, DeploymentOptions& options);

/// The config the options describe. DeploymentConfigError naming the flag or field at fault: a
/// flag that does not apply to the chosen type, an unknown type, a file that cannot be read, a
/// value the library refuses.
DeploymentConfig build_deployment_config(const DeploymentOptions& options);

/// A hook printing one line per progress event to stderr; on a terminal the pull percentage
/// updates its line in place.
DeploymentHook progress_printer();

/// How a command takes part in run_with_deployment's handling of SIGINT, SIGTERM and SIGHUP
/// (which otherwise stop the deployment): the shell takes SIGINT for itself, to interrupt the
/// running command, and ends its own work before the deployment stops.
struct SignalRouting {
  /// Called for SIGINT while the body runs, when set; otherwise SIGINT stops everything too.
  std::function<void()> on_interrupt{};
  /// Awaited before the deployment stops, whether the body ended or a signal ended it, to end
  /// what the body left running in the deployment's runtime.
  std::function<asio::awaitable<void>()> before_stop{};
};

/// The work done with a started deployment; returns the exit status.
using DeploymentBody = std::function<asio::awaitable<int>(Deployment&)>;

/// Runs `body` against the deployment on `io`: start (progress printed unless quiet), body,
/// stop. The first SIGINT/SIGTERM/SIGHUP cancels start or body and stops the deployment (exit
/// status 128 + signal); a second one exits at once. A failed start or a body that throws
/// prints "rex: ..." and gives exit_failure. Returns after the deployment stopped.
int run_with_deployment(asio::io_context& io, Deployment& deployment,
                        const DeploymentOptions& options, DeploymentBody body,
                        SignalRouting routing = {});

}  // namespace rex::cli
