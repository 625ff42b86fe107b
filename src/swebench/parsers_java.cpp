// swebench's Java log parsers (harness/log_parsers/java.py): maven run one test at a time under
// `set -x`, ant's junit task and gradle with swebench's per-test logging. Each follows its Python
// original line by line with py_text's str and re semantics.
#include <deque>
#include <optional>
#include <string_view>

#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

namespace rex::swebench::parsers {

namespace java_detail {

// The test a traced `mvn ... -Dtest=<name> ...` command runs (the last -Dtest= that has a name).
const py::Regex& maven_test_name() {
  static const py::Regex re(R"(^.*-Dtest=(\S+).*$)");
  return re;
}

const py::Regex& maven_result() {
  static const py::Regex re(R"(^.*BUILD (SUCCESS|FAILURE)$)");
  return re;
}

const py::Regex& ant_result() {
  static const py::Regex re(R"(^\s*\[junit\]\s+\[(PASS|FAIL|ERR)\]\s+(.*)$)");
  return re;
}

// "<class> > <method> PASSED": name and status on one line.
const py::Regex& gradle_full() {
  static const py::Regex re(R"(^([^>].+)\s+(PASSED|FAILED)$)");
  return re;
}

// "<class> > <method>" whose status comes on a later line (interleaved output).
const py::Regex& gradle_name_only() {
  static const py::Regex re(R"(^([^>]\S*\s+>\s+\S+)$)");
  return re;
}

const py::Regex& gradle_status_only() {
  static const py::Regex re(R"(^(PASSED|FAILED)$)");
  return re;
}

std::string_view maven_status(std::string_view build) {
  return build == "SUCCESS" ? status::passed : status::failed;
}

std::string_view gradle_status(std::string_view outcome) {
  return outcome == "PASSED" ? status::passed : status::failed;
}

}  // namespace java_detail

StatusMap parse_log_maven(std::string_view log, const ParseContext& /*context*/) {
  using namespace java_detail;
  StatusMap map;
  // Tests whose command was seen but not yet their BUILD line, and BUILD lines seen before any
  // command (concurrent output): matched in order.
  std::deque<std::string_view> pending;
  std::deque<std::string_view> unmatched;
  for (const std::string_view line : py::split(log, "\n")) {
    const std::string_view text = py::strip(line);
    if (const auto m = maven_test_name().match(text))
      pending.push_back(m->str(1));
    if (const auto m = maven_result().match(text)) {
      if (pending.empty()) {
        unmatched.push_back(m->str(1));
      } else {
        map.set(pending.front(), maven_status(m->str(1)));
        pending.pop_front();
      }
    }
  }
  for (; !pending.empty() && !unmatched.empty(); pending.pop_front(), unmatched.pop_front())
    map.set(pending.front(), maven_status(unmatched.front()));
  return map;
}

StatusMap parse_log_ant(std::string_view log, const ParseContext& /*context*/) {
  using namespace java_detail;
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n")) {
    if (const auto m = ant_result().match(py::strip(line)))
      map.set(m->str(2), m->str(1) == "PASS" ? status::passed : status::failed);
  }
  return map;
}

StatusMap parse_log_gradle_custom(std::string_view log, const ParseContext& /*context*/) {
  using namespace java_detail;
  StatusMap map;
  std::optional<std::string_view> pending;  // a name whose status has not come yet
  for (const std::string_view line : py::split(log, "\n")) {
    const std::string_view text = py::strip(line);
    if (const auto m = gradle_full().match(text)) {
      map.set(m->str(1), gradle_status(m->str(2)));
      pending.reset();
      continue;
    }
    if (const auto m = gradle_name_only().match(text)) {
      pending = m->str(1);
      continue;
    }
    if (pending) {  // never empty: the name pattern needs a character
      if (const auto m = gradle_status_only().match(text)) {
        map.set(*pending, gradle_status(m->str(1)));
        pending.reset();
      }
    }
  }
  return map;
}

}  // namespace rex::swebench::parsers
