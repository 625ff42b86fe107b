// `rex eval`: runs every instance of a JSON-lines instances file in a fresh sandbox of its own,
// many at once, appending one result per instance to DIR/results.jsonl as it finishes (see
// rex/eval/evaluation.hpp), with live progress on stderr and a summary table on stdout.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>

#include "deployment_options.hpp"

namespace rex::cli {

struct EvalOptions {
  DeploymentOptions deployment{};
  std::string instances_file{};
  std::string output_dir{};
  std::size_t parallel = 4;
  double timeout = 1800;       // run, when an instance sets none
  double setup_timeout = 600;  // each setup command
  bool retry_errors = false;
  bool keep_work = false;
};

void add_eval_options(CLI::App& app, EvalOptions& options);

/// Exit status: 0 every instance of the file has a result and none is an error (passed, failed
/// and timeout are the instances' own outcomes); 1 some instance's result is an error, or a
/// result could not be written; exit_usage for bad flags, a bad instances file or a results
/// file that cannot be used (nothing started); 128 + N after signal N (unfinished instances
/// have no result, so a rerun does them).
int eval_command(const EvalOptions& options);

}  // namespace rex::cli
