// Evaluation: runs every instance of an instances file that has no result yet, each in a fresh
// sandbox of its own, at most `parallel` at once, and appends each result to
// DIR/results.jsonl as it finishes. What `rex eval` drives.
//
// Guarantees:
// - Each instance gets a new sandbox (SandboxPool with ReturnPolicy::stop), never one another
//   instance used. Instances needing different deployment configs (another image) use one pool
//   per distinct config; at most `parallel` sandboxes exist in all, counting those stopping:
//   an instance holds its slot until its sandbox has stopped. A remote deployment runs one
//   instance at a time (stopping it closes every session of that server).
// - Local deployments: each instance runs in a new, empty directory <root>/<id>, root being
//   the config's working_dir or DIR/work; it is removed afterwards unless keep_work.
// - Resumable: ids that already have a record are skipped (with retry_errors, records with
//   status error are removed first and those instances run again). A result is on disk before
//   the next step; an instance without a record has not finished, and a rerun does it again.
// - DIR/artifacts/<id>/ is emptied when its instance starts and then holds setup.log, run.log
//   and the downloaded artifacts.
// - stop(): no instance starts any more; every pool shuts down, which stops the sandboxes of
//   the running instances (killing their commands); those instances record nothing. run() then
//   returns with stopped = true.
//
// Threading: construct (it reads the results file), then call run() and stop() from the
// executor given. File writes run on a thread of the evaluation's own.
#pragma once

#include <rex/backends/backends.hpp>
#include <rex/eval/eval_instance.hpp>
#include <rex/eval/eval_result.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rex {

struct EvaluationConfig {
  std::string output_dir{};  // DIR: results.jsonl, artifacts/, work/ (local)
  DeploymentConfig deployment = default_deployment_config();  // for instances that name none
  std::size_t parallel = 4;
  double timeout = 1800;                      // seconds for run when the instance sets none
  double setup_timeout = 600;                 // seconds for each setup command
  bool retry_errors = false;                  // run instances whose record has status error again
  bool keep_work = false;                     // local: keep each instance's working directory
  int start_attempts = 2;                     // sandbox starts per instance before it is an error
  std::size_t output_limit = 16 * 1024;       // bytes of run output in a record
  std::int64_t log_limit = 64 * 1024 * 1024;  // bytes per command kept for the logs
};

/// Called on the evaluation's executor; must not block.
struct EvaluationObserver {
  std::function<void(const EvalInstance&)> started{};
  /// After the result is on disk.
  std::function<void(const EvalInstance&, const EvalResult&)> finished{};
};

struct EvaluationReport {
  std::vector<EvalResult> results{};  // recorded by this run, in the order they finished
  std::size_t unfinished = 0;         // instances of this run without a record (after stop)
  bool stopped = false;               // stop() was called
  double wall_seconds = 0;
};

class Evaluation {
 public:
  /// Opens DIR/results.jsonl (ResultsLogError when it cannot) and works out each instance's
  /// deployment: EvalInstanceError naming the line for an image on a deployment that is not
  /// docker, or a config make_deployment refuses. Nothing starts yet.
  Evaluation(asio::any_io_executor executor, EvaluationConfig config,
             std::vector<EvalInstance> instances);
  ~Evaluation();
  Evaluation(const Evaluation&) = delete;
  Evaluation& operator=(const Evaluation&) = delete;

  std::size_t total() const noexcept;           // instances in the file
  std::size_t pending() const noexcept;         // to run now
  std::size_t skipped() const noexcept;         // already recorded
  std::size_t retried() const noexcept;         // error records removed to run again (retry_errors)
  std::size_t repaired_bytes() const noexcept;  // of a torn last line cut off the results file
  std::size_t running() const noexcept;         // instances holding a sandbox slot now
  const std::string& results_path() const noexcept;

  /// Runs the pending instances; returns when all are recorded, or after stop() once every
  /// sandbox has stopped. Throws only when a result cannot be written (the evaluation stops).
  /// Call once.
  asio::awaitable<EvaluationReport> run(EvaluationObserver observer = {});

  /// See above. Idempotent; run() still has to be awaited to its end.
  void stop();

  /// The record of every instance of the file that has one (after run()).
  std::vector<EvalResult> recorded() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace rex
