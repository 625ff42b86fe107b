// report.html, written beside the harness's summary JSON: one self-contained page (inline CSS
// and SVG, no script, nothing fetched) for a person to read a run: the header, the headline
// numbers, every instance with its verdict and links to its logs, a histogram of the instance
// times, the failure reasons grouped, and the flaky tests.
#pragma once

#include <boost/json/object.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace rex::swebench {

/// One instance of the run, as the table shows it.
struct ReportRow {
  std::string instance_id;
  /// "resolved", "unresolved", "error", "empty_patch", "incomplete" (no prediction).
  std::string status;
  std::string verdict;  // "RESOLVED_FULL" | "RESOLVED_PARTIAL" | "RESOLVED_NO" | "" (not graded)
  /// Why it failed: an error's first line, or an infra/ambiguous failure reason
  /// ("tests_timed_out"), or "".
  std::string reason;
  std::size_t f2p_passed = 0, f2p_total = 0, p2p_passed = 0, p2p_total = 0;
  std::optional<double> seconds;  // whole instance; none when unknown
  std::optional<double> start_seconds, patch_seconds, eval_seconds, stop_seconds;
  /// Relative to the HTML file's folder, e.g. "logs/run_evaluation/r1/model/id" (may be "").
  /// When set, the folder and its run_instance.log are linked, and for a graded row (verdict
  /// set) its test_output.txt and report.json too: those must exist.
  std::string log_dir;
  std::vector<std::string> flaky_tests;  // tests whose status differed between repeats
};

struct ReportMeta {
  std::string run_id, model, dataset, deployment;  // for the header
  std::string generated_at;                        // UTC ISO 8601
  double wall_seconds = 0;
  std::size_t max_workers = 0;
  std::size_t repeats = 1;
};

/// The whole page: one self-contained HTML document (inline CSS, inline SVG, no script needed to
/// read it, nothing fetched from the network). `summary` is the harness's summary JSON (missing
/// keys count as 0 or empty); the rows are shown errors first, then unresolved, then resolved.
/// Every text is escaped; bytes that are not UTF-8 show as U+FFFD.
std::string render_html_report(const boost::json::object& summary,
                               const std::vector<ReportRow>& rows, const ReportMeta& meta);

}  // namespace rex::swebench
