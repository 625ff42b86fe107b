// `rex run`: runs commands (or a JSON-lines file of actions) in one bash session of the chosen
// deployment and prints each step's observation.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "deployment_options.hpp"

namespace rex::cli {

struct RunOptions {
  DeploymentOptions deployment{};
  bool demo = false;
  bool json = false;
  std::string actions_file{};
  std::vector<std::string> commands{};
  double timeout = 30.0;
  std::vector<std::string> startup_source{};
};

void add_run_options(CLI::App& app, RunOptions& options);

/// Starts the deployment, runs the steps in one session, stops the deployment. Exit status 0,
/// exit_failure when a step raised an error or the deployment failed, exit_usage for bad
/// options, 128 + signal when SIGINT/SIGTERM/SIGHUP ended it.
int run_command(const RunOptions& options);

}  // namespace rex::cli
