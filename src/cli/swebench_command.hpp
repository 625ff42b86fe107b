// `rex swebench`: SWE-bench's evaluation harness (swebench 5.0.2's run_evaluation, its flags in
// both spellings) on any deployment rex has: the same inputs, the same files and verdicts, with
// live progress on stderr and the harness's summary on stdout (rex/swebench/harness.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "deployment_options.hpp"

namespace rex::cli {

struct SwebenchOptions {
  DeploymentOptions deployment{};
  std::string dataset_name{};
  std::string split = "test";
  std::vector<std::string> instance_ids{};
  std::string predictions_path{};
  std::size_t max_workers = 4;
  long open_file_limit = 4096;
  int timeout = 1800;
  std::string run_id{};
  std::string rewrite_reports = "false";
  std::string report_dir = ".";
  std::string modal = "false";
  std::size_t repeat = 1;
};

void add_swebench_options(CLI::App& app, SwebenchOptions& options);

/// The harness's "-id" (one dash, two letters) as "--run_id", for CLI11.
void rewrite_swebench_arguments(int argc, char** argv);

/// Exit status: 0 every selected instance with a prediction has a report (or an empty patch);
/// 1 some instance ended in an error (no report: the patch did not apply, the tests timed out,
/// the sandbox did not start) or a file could not be written; exit_usage for bad flags or a bad
/// dataset or predictions file (nothing started); 128 + N after signal N.
int swebench_command(const SwebenchOptions& options);

}  // namespace rex::cli
