// swebench's PHP log parser (harness/log_parsers/php.py): phpunit's --testdox output, a suite
// heading followed by one ✔/✘/↩ line per test. Follows the Python original line by line with
// py_text's str and re semantics.
#include <optional>
#include <string>
#include <string_view>

#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

namespace rex::swebench::parsers {

namespace php_detail {

// "Suite title (Fully\Qualified\Class)".
const py::Regex& suite_heading() {
  static const py::Regex re(R"(^(\w.+) \(.+\)$)");
  return re;
}

const py::Regex& test_line() {
  static const py::Regex re(R"(^\s*([✔✘↩])\s*(.*)$)");
  return re;
}

std::string_view status_of(std::string_view mark) {
  if (mark == "✔")
    return status::passed;
  return mark == "✘" ? status::failed : status::skipped;
}

}  // namespace php_detail

StatusMap parse_log_phpunit(std::string_view log, const ParseContext& /*context*/) {
  using namespace php_detail;
  StatusMap map;
  std::optional<std::string_view> suite;  // None before the first heading, as Python prints it
  for (const std::string_view line : py::split(log, "\n")) {
    if (const auto m = suite_heading().match(line)) {
      suite = m->str(1);
      continue;
    }
    if (const auto m = test_line().match(line)) {
      std::string name(suite.value_or("None"));
      name += " > ";
      name += m->str(2);
      map.set(name, status_of(m->str(1)));
    }
  }
  return map;
}

}  // namespace rex::swebench::parsers
