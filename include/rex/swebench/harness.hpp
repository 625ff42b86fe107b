// The SWE-bench evaluation `rex swebench` drives: for each instance with a prediction, a fresh
// sandbox from the instance's image, the prediction's patch applied with the harness's fallbacks,
// the eval script run under the timeout, the output graded; every file where and as swebench
// 5.0.2's harness writes it (logs/run_evaluation/<run_id>/<model>/<instance_id>/ and
// <report_dir>/<model>.<run_id>.json), so its tools, and a rerun of either harness, read them.
//
// Guarantees:
// - Resumable as the harness is: an instance whose report.json exists is not run again; a
//   report is written (whole, renamed into place) only once its instance finished, so a kill
//   loses no finished instance. An instance that ended in an error (the patch did not apply,
//   the tests timed out, the sandbox did not start) has no report, as with the harness: a rerun
//   runs it again.
// - Each instance gets a sandbox no other used; at most max_workers exist at a time, counting
//   those stopping.
// - stop(): no instance starts any more and every sandbox stops; the unfinished instances get
//   nothing on disk beyond their logs.
#pragma once

#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_config.hpp>
#include <rex/swebench/dataset.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rex::swebench {

struct HarnessConfig {
  std::string run_id{};
  int timeout = 1800;  // seconds for the eval script
  std::size_t max_workers = 4;
  std::string report_dir = ".";
  bool rewrite_reports = false;  // grade the test outputs already there again; run nothing
  /// For every instance, with its image put in (docker, podman, kubernetes, fargate, daytona,
  /// modal). Other types are refused.
  DeploymentConfig deployment = DockerDeploymentConfig{};
  std::string root = ".";  // where logs/run_evaluation/ lives (the harness: its working dir)
  int start_attempts = 2;
  std::string dataset_name{};  // as given: recorded in logs/run_evaluation/<run_id>/run.json
  std::string split = "test";
  bool html = true;  // <report_dir>/<model>.<run_id>.html beside the summary
};

/// How one instance ended, for progress lines, the summary and report.html.
struct InstanceOutcome {
  std::string instance_id{};
  /// "resolved", "unresolved", "error" (no report: the patch did not apply, a timeout, the
  /// sandbox...), "empty_patch" (not run), "skipped" (a report was already there).
  std::string status{};
  std::string verdict{};  // RESOLVED_FULL / RESOLVED_PARTIAL / RESOLVED_NO when graded
  std::string error{};    // for status error: what happened, one line
  std::size_t f2p_passed = 0, f2p_total = 0, p2p_passed = 0, p2p_total = 0;
  double seconds = 0;  // whole instance
  double start_seconds = 0, patch_seconds = 0, eval_seconds = 0, stop_seconds = 0;
};

struct HarnessObserver {
  std::function<void(const Instance&)> started{};
  std::function<void(const Instance&, const InstanceOutcome&)> finished{};
};

struct HarnessReport {
  std::vector<InstanceOutcome> outcomes{};  // this run's, in the order they finished
  bool stopped = false;
  double wall_seconds = 0;
};

class Harness {
 public:
  /// `dataset`: the whole dataset (the summary counts it all); `instance_ids`: when not empty,
  /// only these are run (each must be in the dataset). Every prediction's id must be in the
  /// dataset. InputError naming what is wrong, before anything starts.
  Harness(asio::any_io_executor executor, HarnessConfig config, std::vector<Instance> dataset,
          std::vector<Prediction> predictions, std::vector<std::string> instance_ids = {});
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  std::size_t to_run() const noexcept;     // instances this run will run (or grade again)
  std::size_t completed() const noexcept;  // already with a report (skipped)
  std::size_t empty_patches() const noexcept;
  const std::string& model() const noexcept;  // the predictions' model, as a directory name

  /// Docker and Podman: every image of what is to run is on the engine, or is pulled now (unless
  /// the deployment's pull policy is never). InputError naming each instance whose image is
  /// missing, before anything starts. Other deployments: nothing to check here.
  asio::awaitable<void> check_images();

  /// Runs (or with rewrite_reports grades again) what is to run; then writes the summary.
  asio::awaitable<HarnessReport> run(HarnessObserver observer = {});
  void stop();

  /// The summary the harness writes to <report_dir>/<model>.<run_id>.json, from the files on
  /// disk, and its path. Written by run(); callable again.
  asio::awaitable<std::string> write_summary();
  const boost::json::object& summary() const noexcept;
  /// Where write_summary() put the summary and the HTML report ("" when none).
  const std::string& summary_path() const noexcept;
  const std::string& html_path() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// Why an instance of a finished run is not resolved, in a line: its error ("Patch Apply
/// Failed", "Test timed out after 30 seconds.") or the expected tests that failed.
std::string describe_unresolved(const HarnessConfig& config, const Prediction& prediction);

/// "docker", "podman", "kubernetes", ...: where the sandboxes run, for messages.
std::string deployment_name(const DeploymentConfig& config);

}  // namespace rex::swebench
