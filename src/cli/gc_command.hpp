// `rex gc`: removes the containers (or, with --kubernetes, the pods; with --fargate, the tasks)
// that rex processes started and can no longer remove themselves (see
// rex/deployment/docker_gc.hpp for the rules).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace rex::cli {

struct GcCommandOptions {
  bool all = false;
  bool dry_run = false;
  std::string engine{};                 // DOCKER_HOST form; empty: from the environment
  bool podman = false;                  // Podman's default socket instead of Docker's
  bool kubernetes = false;              // the pods of a cluster instead of an engine's containers
  std::string namespace_name{};         // kubernetes: empty: every namespace
  std::string context{};                // kubernetes: empty: the current context
  std::string kubeconfig{};             // kubernetes: empty: as kubectl finds it
  bool fargate = false;                 // the tasks of an ECS cluster
  std::string cluster = "rex-cluster";  // fargate: the cluster
  std::string region{};                 // fargate: empty: as the AWS CLI finds it
  std::string profile{};                // fargate: empty: as the AWS CLI finds it
};

void add_gc_options(CLI::App& app, GcCommandOptions& options);

/// Prints one line per container removed or kept, with the reason, and a summary. Exit status 0,
/// or 1 when the engine cannot be reached or a removal failed.
int gc_command(const GcCommandOptions& options);

}  // namespace rex::cli
