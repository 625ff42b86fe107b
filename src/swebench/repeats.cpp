#include <rex/swebench/grading.hpp>
#include <rex/swebench/repeats.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace rex::swebench {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace repeats_detail {

// The tests of a report that passed and that failed (F2P and P2P together); nullopt without a
// usable report.
std::optional<std::pair<std::set<std::string>, std::set<std::string>>> test_outcomes(
    const fs::path& report_file, const std::string& id, bool& resolved) {
  std::ifstream in(report_file, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const json::value report = json::parse(text.str());
    const json::object& entry = report.at(id).as_object();
    resolved = entry.at("resolved").as_bool();
    std::set<std::string> passed, failed;
    if (const json::value* tests = entry.if_contains("tests_status")) {
      for (const char* kind : {"FAIL_TO_PASS", "PASS_TO_PASS"}) {
        const json::object& split = tests->at(kind).as_object();
        for (const auto& t : split.at("success").as_array())
          passed.insert(std::string(t.as_string()));
        for (const auto& t : split.at("failure").as_array())
          failed.insert(std::string(t.as_string()));
      }
    }
    return std::pair{std::move(passed), std::move(failed)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace repeats_detail

std::string repeat_run_id(const std::string& run_id, std::size_t k) {
  return k <= 1 ? run_id : fmt::format("{}.{}", run_id, k);
}

std::map<std::string, InstanceRepeats> compare_repeats(const std::string& root,
                                                       const std::vector<std::string>& run_ids,
                                                       const std::vector<Prediction>& predictions) {
  std::map<std::string, InstanceRepeats> out;
  for (const Prediction& p : predictions) {
    if (empty_patch(p))
      continue;
    InstanceRepeats r;
    std::set<std::string> ever_passed, ever_failed;
    for (const auto& run_id : run_ids) {
      const fs::path file = fs::path(root) / run_evaluation_log_dir / run_id /
                            model_directory(p.model_name_or_path) / p.instance_id / log_report;
      bool resolved = false;
      auto tests = repeats_detail::test_outcomes(file, p.instance_id, resolved);
      if (!tests) {
        r.outcomes.emplace_back("error");
        continue;
      }
      r.outcomes.emplace_back(resolved ? "resolved" : "unresolved");
      ever_passed.insert(tests->first.begin(), tests->first.end());
      ever_failed.insert(tests->second.begin(), tests->second.end());
    }
    for (const auto& t : ever_passed)
      if (ever_failed.contains(t))
        r.flaky_tests.push_back(t);
    r.flaky_verdict = std::set<std::string>(r.outcomes.begin(), r.outcomes.end()).size() > 1;
    out.emplace(p.instance_id, std::move(r));
  }
  return out;
}

json::object repeats_json(const std::vector<std::string>& run_ids,
                          const std::map<std::string, InstanceRepeats>& result) {
  json::object out;
  json::array ids;
  for (const auto& id : run_ids)
    ids.emplace_back(id);
  json::array flaky_instances, flaky_verdicts;
  json::object instances;
  for (const auto& [id, r] : result) {
    if (!r.flaky_tests.empty())
      flaky_instances.emplace_back(id);
    if (r.flaky_verdict)
      flaky_verdicts.emplace_back(id);
    json::object entry;
    json::array outcomes, tests;
    for (const auto& o : r.outcomes)
      outcomes.emplace_back(o);
    for (const auto& t : r.flaky_tests)
      tests.emplace_back(t);
    entry["outcomes"] = std::move(outcomes);
    entry["flaky_tests"] = std::move(tests);
    instances[id] = std::move(entry);
  }
  out["run_ids"] = std::move(ids);
  out["flaky_instances"] = std::move(flaky_instances);
  out["flaky_verdicts"] = std::move(flaky_verdicts);
  out["instances"] = std::move(instances);
  return out;
}

}  // namespace rex::swebench
