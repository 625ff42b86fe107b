// SWE-bench 5.x's grading, as its harness does it: the eval script with the test command's exit
// status recorded, the test output sliced between its markers and parsed by the instance's log
// parser, the FAIL_TO_PASS / PASS_TO_PASS rules, FULL / PARTIAL / NO, the cross-check of the
// parsed statuses against the recorded exit status, and the triage of runs that left no
// parseable output (likely infrastructure failures, or ambiguous ones). The report is built as
// the harness builds it, key order included, and written as Python's json.dumps writes it, so
// the files are the harness's byte for byte.
#pragma once

#include <rex/swebench/dataset.hpp>
#include <rex/swebench/log_parsers.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::swebench {

// The harness's markers and file names.
inline constexpr std::string_view apply_patch_fail = ">>>>> Patch Apply Failed";
inline constexpr std::string_view apply_patch_pass = ">>>>> Applied Patch";
inline constexpr std::string_view reset_failed = ">>>>> Reset Failed";
inline constexpr std::string_view tests_error = ">>>>> Tests Errored";
inline constexpr std::string_view tests_timeout = ">>>>> Tests Timed Out";
inline constexpr std::string_view start_test_output = ">>>>> Start Test Output";
inline constexpr std::string_view end_test_output = ">>>>> End Test Output";
inline constexpr std::string_view test_exit_code = ">>>>> Test Exit Code";
inline constexpr std::string_view container_patch_file = "/tmp/patch.diff";
inline constexpr std::string_view container_workdir = "/testbed";
inline constexpr std::string_view log_report = "report.json";
inline constexpr std::string_view log_instance = "run_instance.log";
inline constexpr std::string_view log_test_output = "test_output.txt";
inline constexpr std::string_view run_evaluation_log_dir = "logs/run_evaluation";

/// The instance's eval script as the harness runs it: its lines without the shebang and
/// `set -uxo pipefail` (put back first), the test command's $? kept and echoed after the end
/// marker, and the image assets' restore commands before the start marker.
std::string eval_script(const Instance& instance,
                        const std::vector<std::string>& asset_restore_commands = {});

/// Why a run left no verdict, when its logs say: (reason, tier), tier "environment" (cannot come
/// from a patch) or "ambiguous". The first of the harness's signatures that matches.
std::optional<std::pair<std::string, std::string>> classify_failure(std::string_view text);

struct LogsEval {
  StatusMap status;
  bool found = false;  // the output is usable: markers present, no failure marker, the suite ran
};

/// The harness's reading of a test output (as read back from test_output.txt, "\r\n" and "\r"
/// already "\n"). LogParserError when the parser refuses it.
LogsEval evaluate_logs(const Instance& instance, std::string_view content);

/// The harness's report.json for one instance: {"<id>": {patch_is_None, patch_exists,
/// patch_successfully_applied, resolved, infra_failure[, infra_failure_reason][, tests_status]}}.
/// `test_output` is test_output.txt's text as written. LogParserError when the parser refuses.
boost::json::object eval_report(const Instance& instance, const Prediction& prediction,
                                std::string_view test_output);

/// Python's json.dumps(value, indent=indent) (ensure_ascii, ", " and ": " separators); indent
/// negative: on one line.
std::string python_json(const boost::json::value& value, int indent = -1);

}  // namespace rex::swebench
