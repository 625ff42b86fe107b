// swebench's Ruby log parsers (harness/log_parsers/ruby.py): minitest's verbose lines, cucumber's
// progress format, test-unit's verbose lines, rspec results flattened to "<name> - <status>", and
// jekyll's choice between the first two by pull request. Each follows its Python original line by
// line with py_text's str and re semantics.
#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <string_view>

#include "swebench/parsers.hpp"
#include "swebench/py_text.hpp"

namespace rex::swebench::parsers {

namespace ruby_detail {

// "<name>. = 0.01 s = ." (shoulda-style names end in a period).
const py::Regex& minitest_line() {
  static const py::Regex re(R"(^(.+)\. .*=.*(\.|F|E).*$)");
  return re;
}

// "<scenario> ....F" (--format progress).
const py::Regex& cucumber_line() {
  static const py::Regex re(R"(^(.*) \.+(\.|F))");
  return re;
}

// "test: <name>:<tabs>.: (0.001)".
const py::Regex& ruby_unit_line() {
  static const py::Regex re(R"(^\s*(?:test: )?(.+):\s+(\.|E\b|F\b|O\b))");
  return re;
}

const py::Regex& rspec_line() {
  static const py::Regex re(R"((.+) - (passed|failed))");
  return re;
}

// Matches each stripped line against the pattern, names from group 1, statuses from group 2.
template <typename StatusOf>
StatusMap parse_lines(std::string_view log, const py::Regex& pattern, StatusOf status_of) {
  StatusMap map;
  for (const std::string_view line : py::split(log, "\n")) {
    if (const auto m = pattern.match(py::strip(line)))
      map.set(m->str(1), status_of(m->str(2)));
  }
  return map;
}

// The pull requests of jekyll's instances, by the runner their logs come from.
constexpr std::array<std::string_view, 3> jekyll_minitest{"9141", "8047", "8167"};
constexpr std::array<std::string_view, 2> jekyll_cucumber{"8761", "8771"};

bool one_of(std::string_view s, std::span<const std::string_view> options) {
  return std::ranges::find(options, s) != options.end();
}

}  // namespace ruby_detail

StatusMap parse_log_minitest(std::string_view log, const ParseContext& /*context*/) {
  return ruby_detail::parse_lines(log, ruby_detail::minitest_line(), [](std::string_view outcome) {
    return outcome == "." ? status::passed : status::failed;
  });
}

StatusMap parse_log_cucumber(std::string_view log, const ParseContext& /*context*/) {
  return ruby_detail::parse_lines(log, ruby_detail::cucumber_line(), [](std::string_view outcome) {
    return outcome == "." ? status::passed : status::failed;
  });
}

StatusMap parse_log_ruby_unit(std::string_view log, const ParseContext& /*context*/) {
  return ruby_detail::parse_lines(log, ruby_detail::ruby_unit_line(), [](std::string_view outcome) {
    if (outcome == ".")
      return status::passed;
    return outcome == "O" ? status::skipped : status::failed;
  });
}

StatusMap parse_log_rspec_transformed_json(std::string_view log, const ParseContext& /*context*/) {
  return ruby_detail::parse_lines(log, ruby_detail::rspec_line(), [](std::string_view outcome) {
    return outcome == "passed" ? status::passed : status::failed;
  });
}

StatusMap parse_log_jekyll(std::string_view log, const ParseContext& context) {
  using namespace ruby_detail;
  const auto parts = py::split(context.instance_id, "-");
  if (parts.size() < 2)  // Python's split(...)[1] raises IndexError
    throw LogParserError("jekyll: instance id without a pull request: " + context.instance_id);
  if (one_of(parts[1], jekyll_minitest))
    return parse_log_minitest(log, context);
  if (one_of(parts[1], jekyll_cucumber))
    return parse_log_cucumber(log, context);
  throw LogParserError("jekyll: unknown instance id: " + context.instance_id);
}

}  // namespace rex::swebench::parsers
