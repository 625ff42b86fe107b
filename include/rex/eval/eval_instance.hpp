// EvalInstance: one job of an evaluation, read from a JSON-lines instances file (one object per
// line, blank lines allowed). What `rex eval` runs: files uploaded into a fresh sandbox, setup
// commands and the run command in one bash session, artifacts downloaded afterwards.
//
// Loading is strict and complete before anything starts: unknown fields, wrong types, bad
// values, duplicate ids and missing upload sources are all refused, every problem reported with
// its line number and field ("instances.jsonl:4: timeout: expected a positive number of
// seconds, got a string").
#pragma once

#include <rex/backends/backends.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

/// A file or directory copied into the sandbox before setup.
struct EvalUpload {
  std::string source{};  // on this machine; made absolute against the instances file's folder
  std::string target{};  // in the sandbox; relative = relative to the session's working dir
};

struct EvalInstance {
  std::string id{};                              // unique; names DIR/artifacts/<id>/
  std::optional<std::string> image{};            // docker: replaces the image of the deployment
  std::optional<DeploymentConfig> deployment{};  // replaces the whole deployment config
  std::vector<EvalUpload> upload{};
  std::vector<std::string> setup{};      // commands, in order, in the run's session
  std::string run{};                     // a command or a multi-line script
  std::optional<double> timeout{};       // seconds for run; none: the evaluation's default
  std::vector<std::string> artifacts{};  // sandbox paths to download afterwards
  int line = 0;                          // where it was read (for messages)
};

/// Every problem found in an instances file, one per line of what().
class EvalInstanceError : public std::invalid_argument {
 public:
  explicit EvalInstanceError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const noexcept { return problems_; }

 private:
  std::vector<std::string> problems_;
};

/// Names rex writes into DIR/artifacts/<id>/ itself; an artifact may not take them.
inline constexpr std::string_view eval_setup_log = "setup.log";
inline constexpr std::string_view eval_run_log = "run.log";

/// Decodes one line. `base_dir` makes relative upload sources absolute; `where` prefixes every
/// message ("instances.jsonl:4"). Checks everything that needs no file system.
EvalInstance parse_eval_instance(std::string_view text, std::string_view base_dir,
                                 std::string_view where);

/// Reads a whole instances file: every line parsed, ids unique, upload sources present.
/// Throws EvalInstanceError listing every problem (at most 50), or when the file cannot be read.
std::vector<EvalInstance> load_eval_instances(const std::string& path);

/// Where an artifact lands inside DIR/artifacts/<id>/: the last component of its path.
std::string eval_artifact_name(std::string_view path);

}  // namespace rex
