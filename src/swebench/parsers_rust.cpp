// swebench's parser for `cargo test` logs, as swebench 5.0.2's log_parsers/rust.py reads them.
#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

#include <optional>
#include <string_view>

namespace rex::swebench::parsers {

StatusMap parse_log_cargo(std::string_view log, const ParseContext&) {
  namespace py = rex::swebench::py;
  // "test path::to::name ... ok"; other outcomes (ignored, bench) are left out.
  static const py::Regex pattern(R"(^test\s+(\S+)\s+\.\.\.\s+(\w+)$)");
  StatusMap map;
  for (std::string_view line : py::split(log, "\n")) {
    const std::optional<py::Match> m = pattern.match(py::strip(line));
    if (!m)
      continue;
    if (m->str(2) == "ok")
      map.set(m->str(1), status::passed);
    else if (m->str(2) == "FAILED")
      map.set(m->str(1), status::failed);
  }
  return map;
}

}  // namespace rex::swebench::parsers
