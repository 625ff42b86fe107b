// `rex gc`: removes the sandboxes (containers, pods, tasks, cloud sandboxes) that rex processes
// started and can no longer remove themselves, on any backend that can list them, by the rules
// of rex/deployment/gc.hpp.
#pragma once

#include "deployment_options.hpp"

#include <CLI/CLI.hpp>

#include <map>
#include <string>

namespace rex::cli {

struct GcCommandOptions {
  bool all = false;
  bool dry_run = false;
  // Where to look: --deployment (a backend, default docker, or a config file) and the backend
  // flags; --<backend> (every backend and alias that gc works on) names a backend too.
  DeploymentOptions where{.deployment = "docker"};
  std::map<std::string, bool> shorthands;  // --<backend> given
};

void add_gc_options(CLI::App& app, GcCommandOptions& options);

/// Prints one line per sandbox removed or kept, with the reason, and a summary. Exit status 0,
/// 1 when the backend cannot be reached or a removal failed, 2 for a backend that cannot list.
int gc_command(const GcCommandOptions& options);

}  // namespace rex::cli
