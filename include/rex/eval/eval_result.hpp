// EvalResult: what one instance of an evaluation produced, as one line of DIR/results.jsonl.
//
// Statuses:
//   passed   the run command exited 0
//   failed   the run command exited non-zero
//   timeout  the run command ran past its timeout and was interrupted
//   error    the instance could not be judged: the sandbox did not start, an upload failed, a
//            setup command failed or timed out, the session died, the run could not start
// `error` says which phase ("start", "upload", "setup", "run") failed, with the exception type
// and message. Artifacts that could not be downloaded do not change the status; each carries
// its own error.
//
// The JSON form (to_json) is the record format documented in README; eval_result_from_json
// reads it back (unknown fields ignored, so newer records still load).
#pragma once

#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

enum class EvalStatus { passed, failed, timeout, error };

/// "passed", "failed", "timeout", "error".
std::string_view to_string(EvalStatus status) noexcept;
/// The status a name stands for; std::nullopt for another name.
std::optional<EvalStatus> eval_status_from_string(std::string_view name) noexcept;

struct EvalError {
  std::string phase{};  // start | upload | setup | run
  std::string type{};   // the exception's type: "SandboxStartError", "CommandTimeoutError", ...
  std::string message{};
};

/// Seconds spent in each phase; none when the phase was not reached. start: sandbox start and
/// session; setup: uploads and setup commands; run: the run command; teardown: artifacts,
/// closing the session and stopping the sandbox.
struct EvalPhaseTimes {
  std::optional<double> start{};
  std::optional<double> setup{};
  std::optional<double> run{};
  std::optional<double> teardown{};
};

struct EvalArtifact {
  std::string path{};                  // as the instance gave it
  std::optional<std::string> saved{};  // relative to DIR: "artifacts/<id>/<name>"; none: failed
  std::optional<std::string> error{};  // why it could not be downloaded
};

struct EvalResult {
  std::string id{};
  EvalStatus status = EvalStatus::error;
  std::optional<int> exit_code{};       // the run command's; none when it did not finish
  std::vector<int> setup_exit_codes{};  // one per setup command that finished
  std::string output{};                 // the run's output, its last output_limit bytes
  bool output_truncated = false;        // the output above is only the tail (full: run.log)
  std::optional<EvalError> error{};
  EvalPhaseTimes times{};
  std::vector<EvalArtifact> artifacts{};
  std::string started{};  // UTC, ISO 8601 with milliseconds: "2025-01-31T12:00:00.125Z"
  std::string finished{};
};

/// A record that does not fit the format; the message names the field.
class EvalResultError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The record as JSON; times rounded to milliseconds.
boost::json::value to_json(const EvalResult& result);
/// The record as one line of results.jsonl (without the newline): to_json's value, with
/// numbers written as people write them ("0.25", not "2.5E-1").
std::string to_json_line(const EvalResult& result);
/// Decodes a record. EvalResultError for a missing id or status, or a field of the wrong type.
EvalResult eval_result_from_json(const boost::json::value& json);

/// The last `limit` bytes of `text`, starting on a UTF-8 character boundary; `truncated` tells
/// whether anything was cut.
std::string tail_of_output(std::string_view text, std::size_t limit, bool& truncated);

/// A time point as the records write it: UTC, ISO 8601, milliseconds, "Z".
std::string format_utc_timestamp(std::chrono::system_clock::time_point when);

}  // namespace rex
