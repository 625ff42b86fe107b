// `rex shell`: an interactive bash session in the chosen deployment, for a person. Output shows
// as it arrives, a non-zero exit status as "[exit N]"; Ctrl-C interrupts the running command
// (the shell stays), Ctrl-D or `exit [N]` leaves. With stdin not a terminal, commands are read
// line by line with no prompt, which is how scripts and tests drive it.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "deployment_options.hpp"

namespace rex::cli {

struct ShellOptions {
  DeploymentOptions deployment{};
  double timeout = 0;  // seconds per command; 0: none (Ctrl-C interrupts)
  std::vector<std::string> startup_source{};
  std::string history_file{};  // empty: ~/.rex_history
  bool no_tty = false;         // line by line even when stdin is a terminal
  std::string attach_session;  // attach the terminal to this bash session of the sandbox
};

void add_shell_options(CLI::App& app, ShellOptions& options);

/// Runs the shell until the input ends, `exit`, or SIGTERM/SIGHUP; the deployment is stopped on
/// every way out. Exit status: N from `exit N`, else 0; exit_failure when the deployment
/// failed, exit_usage for bad options, 128 + signal after a signal.
int shell_command(const ShellOptions& options);

}  // namespace rex::cli
