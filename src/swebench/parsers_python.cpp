// swebench's parsers for Python repositories' test logs (pytest in its variants, Django's test
// runner, sympy's), line for line as swebench 5.0.2's log_parsers/python.py reads them.
#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::swebench::parsers {
namespace python_detail {

namespace py = rex::swebench::py;

// TestStatus's values, in its order.
inline constexpr std::array<std::string_view, 5> kStatuses{
    status::failed, status::passed, status::skipped, status::error, status::xfail};

inline bool starts_with_status(std::string_view line) {
  for (std::string_view s : kStatuses)
    if (line.starts_with(s))
      return true;
  return false;
}

inline bool ends_with_status(std::string_view line) {
  for (std::string_view s : kStatuses)
    if (line.ends_with(s))
      return true;
  return false;
}

// pytest's "SKIPPED [N] path:line: reason" summary, whose [N] is a count, not a test.
inline bool is_skip_summary(std::string_view status_word, std::string_view name) {
  static const py::Regex count(R"(^\[\d+\]$)");
  return status_word == status::skipped && count.match(name).has_value();
}

inline std::string join(const std::vector<std::string_view>& words, std::size_t from,
                        std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) {
    if (i > from)
      out += ' ';
    out += words[i];
  }
  return out;
}

// The pytest -rA summary shared by parse_log_pytest and parse_log_matplotlib: "STATUS name ...".
inline void pytest_summary_line(std::string_view line, StatusMap& map) {
  if (!starts_with_status(line))
    return;
  std::string replaced;
  if (line.starts_with(status::failed)) {
    replaced = py::replace(line, " - ", " ");
    line = replaced;
  }
  const std::vector<std::string_view> test_case = py::split(line);
  if (test_case.size() <= 1)
    return;
  if (is_skip_summary(test_case[0], test_case[1]))
    return;
  map.set(test_case[1], test_case[0]);
}

// re.search(r"(.*?)\[(.*)\]", name) on a name without whitespace (so without "\n"): the text
// before the first '[' and between it and the last ']' when that ']' comes after it. Found
// directly, as the search takes quadratic time on a long name without brackets.
inline std::optional<std::pair<std::string_view, std::string_view>> split_option(
    std::string_view name) {
  const std::size_t open = name.find('[');
  const std::size_t close = name.rfind(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  return std::pair{name.substr(0, open), name.substr(open + 1, close - open - 1)};
}

// Characters 1..31, which parse_log_pytest_v2 deletes from each line.
inline std::string without_escapes(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (char c : line)
    if (!(c >= 1 && c <= 31))
      out += c;
  return out;
}

}  // namespace python_detail

StatusMap parse_log_pytest(std::string_view log, const ParseContext&) {
  using namespace python_detail;
  StatusMap map;
  for (std::string_view line : py::split(log, "\n"))
    pytest_summary_line(line, map);
  return map;
}

StatusMap parse_log_pytest_options(std::string_view log, const ParseContext&) {
  using namespace python_detail;
  StatusMap map;
  for (std::string_view line : py::split(log, "\n")) {
    if (!starts_with_status(line))
      continue;
    std::string replaced;
    if (line.starts_with(status::failed)) {
      replaced = py::replace(line, " - ", " ");
      line = replaced;
    }
    const std::vector<std::string_view> test_case = py::split(line);
    if (test_case.size() <= 1)
      continue;
    if (is_skip_summary(test_case[0], test_case[1]))
      continue;
    if (const std::optional<std::pair<std::string_view, std::string_view>> parts =
            split_option(test_case[1])) {
      auto [main, option] = *parts;
      std::string shortened;
      if (option.starts_with("/") && !option.starts_with("//") &&
          option.find('*') == std::string_view::npos) {
        shortened = "/" + std::string(py::split(option, "/").back());
        option = shortened;
      }
      map.set(std::string(main) + "[" + std::string(option) + "]", test_case[0]);
    } else {
      map.set(test_case[1], test_case[0]);
    }
  }
  return map;
}

StatusMap parse_log_django(std::string_view log, const ParseContext&) {
  using namespace python_detail;
  StatusMap map;
  std::optional<std::string> prev_test;
  for (std::string_view raw : py::split(log, "\n")) {
    std::string_view line = py::strip(raw);
    std::string rest;  // backs `line` when it is cut down below

    if (line.find("--version is equivalent to version") != std::string_view::npos)
      map.set("--version is equivalent to version", status::passed);

    if (line.find(" ... ") != std::string_view::npos)
      prev_test = std::string(py::split(line, " ... ")[0]);

    for (std::string_view suffix : {" ... ok", " ... OK", " ...  OK"}) {
      if (!line.ends_with(suffix))
        continue;
      // swebench's special case for django__django-7188's interleaved output.
      if (py::strip(line).starts_with(
              "Applying sites.0002_alter_domain_unique...test_no_migrations")) {
        rest = std::string(py::strip(py::split(line, "...", 1).back()));
        line = rest;
      }
      map.set(py::rsplit(line, suffix, 1)[0], status::passed);
      break;
    }
    if (line.find(" ... skipped") != std::string_view::npos)
      map.set(py::split(line, " ... skipped")[0], status::skipped);
    if (line.ends_with(" ... FAIL"))
      map.set(py::split(line, " ... FAIL")[0], status::failed);
    if (line.starts_with("FAIL:")) {
      const std::vector<std::string_view> words = py::split(line);
      if (words.size() < 2)
        throw LogParserError("parse_log_django: IndexError: list index out of range (\"" +
                             std::string(line) + "\")");
      map.set(py::strip(words[1]), status::failed);
    }
    if (line.ends_with(" ... ERROR"))
      map.set(py::split(line, " ... ERROR")[0], status::error);
    if (line.starts_with("ERROR:")) {
      const std::vector<std::string_view> words = py::split(line);
      if (words.size() < 2)
        throw LogParserError("parse_log_django: IndexError: list index out of range (\"" +
                             std::string(line) + "\")");
      map.set(py::strip(words[1]), status::error);
    }
    if (py::lstrip(line).starts_with("ok") && prev_test)
      map.set(*prev_test, status::passed);
  }

  // Test lines whose "ok" a multi-line message pushed onto the next line.
  static const std::array<py::Regex, 3> interrupted{
      py::Regex(
          R"(^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$)",
          py::multiline),
      py::Regex(R"(^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$)", py::multiline),
      py::Regex(R"(^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$)",
                py::multiline),
  };
  for (const py::Regex& pattern : interrupted)
    for (const py::Match& m : pattern.finditer(log))
      map.set(m.str(1), status::passed);
  return map;
}

StatusMap parse_log_pytest_v2(std::string_view log, const ParseContext&) {
  using namespace python_detail;
  static const py::Regex color(R"(\[(\d+)m)");
  StatusMap map;
  for (std::string_view raw : py::split(log, "\n")) {
    const std::string cleaned = without_escapes(color.sub("", raw));
    std::string_view line = cleaned;
    if (starts_with_status(line)) {
      if (line.starts_with(status::failed))
        line = py::split(line, " - ", 1)[0];
      const std::vector<std::string_view> test_case = py::split(line);
      if (test_case.size() >= 2 && !is_skip_summary(test_case[0], test_case[1]))
        map.set(join(test_case, 1, test_case.size()), test_case[0]);
    } else if (ends_with_status(line)) {
      // Older pytest: "name STATUS".
      const std::vector<std::string_view> test_case = py::split(line);
      if (test_case.size() >= 2)
        map.set(join(test_case, 0, test_case.size() - 1), test_case.back());
    }
  }
  return map;
}

StatusMap parse_log_seaborn(std::string_view log, const ParseContext&) {
  using namespace python_detail;
  StatusMap map;
  for (std::string_view line : py::split(log, "\n")) {
    const std::vector<std::string_view> parts = py::split(line);
    if (parts.size() < 2)
      continue;
    if (line.starts_with(status::failed)) {
      map.set(parts[1], status::failed);
    } else if (line.find(" PASSED ") != std::string_view::npos) {
      if (parts[1] == status::passed)
        map.set(parts[0], status::passed);
    } else if (line.starts_with(status::passed)) {
      map.set(parts[1], status::passed);
    }
  }
  return map;
}

StatusMap parse_log_sympy(std::string_view log, const ParseContext&) {
  using namespace python_detail;
  static const py::Regex failure(R"((_*) (.*)\.py:(.*) (_*))");
  StatusMap map;
  for (const py::Match& m : failure.findall(log))
    map.set(std::string(m.str(2)) + ".py:" + std::string(m.str(3)), status::failed);
  for (std::string_view raw : py::split(log, "\n")) {
    const std::string_view line = py::strip(raw);
    if (!line.starts_with("test_"))
      continue;
    // The line starts with "test_", so split() has a first word.
    if (line.ends_with(" E"))
      map.set(py::split(line)[0], status::error);
    if (line.ends_with(" F"))
      map.set(py::split(line)[0], status::failed);
    if (line.ends_with(" ok"))
      map.set(py::split(line)[0], status::passed);
  }
  return map;
}

StatusMap parse_log_matplotlib(std::string_view log, const ParseContext&) {
  using namespace python_detail;
  StatusMap map;
  for (std::string_view raw : py::split(log, "\n")) {
    const std::string line =
        py::replace(py::replace(raw, "MouseButton.LEFT", "1"), "MouseButton.RIGHT", "3");
    pytest_summary_line(line, map);
  }
  return map;
}

}  // namespace rex::swebench::parsers
