// `rex swebench --repeat N`: the same predictions run N times (run ids <run_id>, <run_id>.2, ...
// each a whole harness run with its own files), then compared: a test is flaky when it passed in
// one run and failed in another, an instance's verdict is flaky when its runs disagree on
// resolved (an error counts as its own outcome).
#pragma once

#include <rex/swebench/dataset.hpp>

#include <boost/json/object.hpp>

#include <map>
#include <string>
#include <vector>

namespace rex::swebench {

struct InstanceRepeats {
  std::vector<std::string> outcomes;     // per run: "resolved", "unresolved" or "error"
  std::vector<std::string> flaky_tests;  // sorted
  bool flaky_verdict = false;
};

/// Reads each run's report.json files under root/logs/run_evaluation/<run id>/<model>/<id>/.
std::map<std::string, InstanceRepeats> compare_repeats(const std::string& root,
                                                       const std::vector<std::string>& run_ids,
                                                       const std::vector<Prediction>& predictions);

/// {"run_ids": [...], "flaky_instances": [...], "flaky_verdicts": [...], "instances": {id:
/// {"outcomes": [...], "flaky_tests": [...]}}}.
boost::json::object repeats_json(const std::vector<std::string>& run_ids,
                                 const std::map<std::string, InstanceRepeats>& result);

/// The run id of repeat k (1-based): the first is run_id itself.
std::string repeat_run_id(const std::string& run_id, std::size_t k);

}  // namespace rex::swebench
