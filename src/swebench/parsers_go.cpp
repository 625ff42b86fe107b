// swebench's parser for `go test -v` logs, as swebench 5.0.2's log_parsers/go.py reads them.
#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

#include <optional>
#include <string_view>

namespace rex::swebench::parsers {

StatusMap parse_log_gotest(std::string_view log, const ParseContext&) {
  namespace py = rex::swebench::py;
  // "--- PASS: TestName (0.00s)", subtests included.
  static const py::Regex pattern(R"(^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$)");
  StatusMap map;
  for (std::string_view line : py::split(log, "\n")) {
    const std::optional<py::Match> m = pattern.match(py::strip(line));
    if (!m)
      continue;
    const std::string_view outcome = m->str(1);
    map.set(m->str(2), outcome == "PASS"   ? status::passed
                       : outcome == "FAIL" ? status::failed
                                           : status::skipped);
  }
  return map;
}

}  // namespace rex::swebench::parsers
