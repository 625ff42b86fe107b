// run_eval_instance: runs one EvalInstance in a sandbox that is already started, through the
// Runtime interface only, so it works the same over local, remote and Docker sandboxes.
//
// Steps, each ending the instance with status error when it fails (result.error names it):
//   1. a bash session (its name: "rex-eval"); `cd working_dir` when one is given; the session's
//      working directory is read back, and relative upload targets and artifact paths are
//      taken relative to it
//   2. uploads
//   3. setup commands, one after another in the session, each with setup_timeout; a non-zero
//      exit or a timeout ends the instance
//   4. the run command in the same session (so `cd` and `export` in setup carry over), with the
//      instance's timeout or default_timeout: exit 0 passed, non-zero failed, timeout
//      interrupted (Ctrl-C, then the job is killed) and status timeout
//   5. artifacts downloaded into artifacts_dir (also after a failure or timeout of the run)
//   6. the session closed
// Runtime errors never escape: they become the result's error. Only the caller's cancellation
// ends the coroutine early (operation_aborted).
#pragma once

#include <rex/eval/eval_instance.hpp>
#include <rex/eval/eval_result.hpp>
#include <rex/runtime/runtime.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace rex {

struct EvalRunnerSettings {
  std::string artifacts_dir{};  // on this machine: artifacts land here (the logs are the caller's)
  std::string artifacts_prefix{};  // how records name artifacts_dir: "artifacts/<id>"
  std::string working_dir{};       // `cd` here before anything else; empty: stay where it starts
  double default_timeout = 1800;   // seconds for run when the instance sets none
  double setup_timeout = 600;      // seconds for each setup command
  double session_timeout = 30;     // seconds for the session to start
  std::size_t output_limit = 16 * 1024;       // bytes of run output kept in the record
  std::int64_t log_limit = 64 * 1024 * 1024;  // bytes kept per command for the logs (head+tail)
};

/// The outcome of one instance and the full text for its logs.
struct EvalRun {
  // Everything but the timestamps; times.start holds the session's start only (the caller adds
  // the sandbox's), times.teardown the artifacts and closing the session.
  EvalResult result{};
  std::string setup_log{};  // "$ command\n<output>[exit N]\n" per setup command
  std::string run_log{};    // the run command's output (up to log_limit)
};

asio::awaitable<EvalRun> run_eval_instance(Runtime& runtime, const EvalInstance& instance,
                                           EvalRunnerSettings settings);

/// The short type name of the exception `error` holds, for EvalError.type: "CommandTimeoutError".
std::string exception_type_name(const std::exception_ptr& error);

}  // namespace rex
