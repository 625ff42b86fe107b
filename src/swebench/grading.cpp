#include <rex/protocol/python_text.hpp>
#include <rex/swebench/grading.hpp>

#include "swebench/py_text.hpp"

#include <fmt/format.h>
#include <boost/json/array.hpp>

#include <array>
#include <set>

namespace rex::swebench {

namespace json = boost::json;

namespace grading_detail {

// Evidence that a test runner ran, for a run whose parsed map is empty (every count non-zero).
const py::Regex& suite_ran() {
  static const py::Regex re(R"(Executed [1-9]\d* of \d+)"
                            R"(|TOTAL: [1-9]\d* (?:SUCCESS|FAILED))"
                            R"(|[1-9]\d* passing)"
                            R"(|Tests:\s+[1-9]\d*)"
                            R"(|Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total)"
                            R"(|^# tests [1-9]\d*)"
                            R"(|[1-9]\d* specs?, \d+ failures?)"
                            R"(|': ok$)",
                            py::multiline);
  return re;
}

const py::Regex& exit_code_line() {
  static const py::Regex re(R"(>>>>> Test Exit Code:\s*(-?\d+))");
  return re;
}

struct Signature {
  std::string_view reason;
  std::string_view tier;
  std::string_view pattern;
};

// The harness's signatures, in its order: the first that matches wins.
constexpr std::array signatures{
    Signature{"browser_launch_failed", "environment",
              R"(Failed to launch|Failed to connect to the bus)"},
    Signature{"display_unavailable", "environment",
              R"(cannot open display|Missing X server|unable to open X display)"},
    Signature{"out_of_memory", "environment",
              R"(Cannot allocate memory|OutOfMemoryError|^Killed$)"},
    Signature{"container_unavailable", "environment",
              R"(Error response from daemon|Cannot connect to the Docker daemon)"},
    Signature{"network_unreachable", "environment",
              R"(Could not resolve host|Temporary failure in name resolution)"},
    Signature{"missing_module", "ambiguous",
              R"(Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError)"},
    Signature{"no_tests_collected", "ambiguous", R"(no tests ran|collected 0 items)"},
    Signature{"tests_timed_out", "ambiguous", R"(Timeout error: \d+ seconds exceeded)"},
};

const std::vector<py::Regex>& signature_patterns() {
  static const std::vector<py::Regex> compiled = [] {
    std::vector<py::Regex> out;
    for (const auto& s : signatures)
      out.emplace_back(s.pattern, py::multiline);
    return out;
  }();
  return compiled;
}

bool is_passing(std::string_view s) {
  return s == status::passed || s == status::xfail;
}

// The map's key for an expected test: itself, or for an id cut inside its parameters (more "["
// than "]") the first key it begins when all such keys agree on passing or not.
const std::string* resolve_case(const std::string& name, const StatusMap& map) {
  if (const std::string* found = map.find(name))
    return found;
  const auto opens = std::count(name.begin(), name.end(), '[');
  const auto closes = std::count(name.begin(), name.end(), ']');
  if (opens <= closes)
    return nullptr;
  const std::string* first = nullptr;
  std::set<bool> outcomes;
  for (const auto& [key, value] : map.entries()) {
    if (key.starts_with(name)) {
      if (!first)
        first = &value;
      outcomes.insert(is_passing(value));
    }
  }
  return first && outcomes.size() == 1 ? first : nullptr;
}

bool test_passed(const std::string& name, const StatusMap& map) {
  const std::string* s = resolve_case(name, map);
  return s && is_passing(*s);
}

bool test_maintained(const std::string& name, const StatusMap& map) {
  const std::string* s = resolve_case(name, map);
  return test_passed(name, map) || (s && *s == status::skipped);
}

bool test_failed(const std::string& name, const StatusMap& map) {
  const std::string* s = resolve_case(name, map);
  return !s || *s == status::failed || *s == status::error || *s == status::skipped;
}

struct Split {
  json::array success;
  json::array failure;
};

void check_case(const std::string& name, const StatusMap& map, EvalType type, bool maintenance,
                Split& out) {
  if (type == EvalType::fail_only) {
    const std::string* s = map.find(name);
    if (s && *s == status::failed)
      out.failure.emplace_back(name);
    else
      out.success.emplace_back(name);
    return;
  }
  if (maintenance ? test_maintained(name, map) : test_passed(name, map))
    out.success.emplace_back(name);
  else if (test_failed(name, map))
    out.failure.emplace_back(name);
}

json::object split_json(Split s) {
  json::object o;
  o["success"] = std::move(s.success);
  o["failure"] = std::move(s.failure);
  return o;
}

double rate(const Split& s) {
  const std::size_t total = s.success.size() + s.failure.size();
  return total == 0 ? 1.0 : static_cast<double>(s.success.size()) / static_cast<double>(total);
}

std::string_view find_or_end(std::string_view text, std::string_view what) {
  const std::size_t at = text.find(what);
  return at == std::string_view::npos ? text : text.substr(0, at);
}

void escape_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"':
          out += "\\\"";
          continue;
        case '\\':
          out += "\\\\";
          continue;
        case '\n':
          out += "\\n";
          continue;
        case '\r':
          out += "\\r";
          continue;
        case '\t':
          out += "\\t";
          continue;
        case '\b':
          out += "\\b";
          continue;
        case '\f':
          out += "\\f";
          continue;
        default:
          break;
      }
      if (c < 0x20 || c == 0x7f)
        out += fmt::format("\\u{:04x}", c);
      else
        out += static_cast<char>(c);
      continue;
    }
    // A UTF-8 sequence (the text is valid UTF-8): \uXXXX, a surrogate pair above U+FFFF.
    std::size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    n = std::min(n, s.size() - i);
    char32_t cp = c & (n == 4 ? 0x07 : n == 3 ? 0x0F : 0x1F);
    for (std::size_t k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += n;
    if (cp > 0xFFFF) {
      cp -= 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    }
  }
  out += '"';
}

void dump(std::string& out, const json::value& v, int indent, int level) {
  auto newline = [&](int at) {
    if (indent >= 0) {
      out += '\n';
      out.append(static_cast<std::size_t>(indent * at), ' ');
    }
  };
  const std::string_view item_separator = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case json::kind::null:
      out += "null";
      return;
    case json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      return;
    case json::kind::int64:
      out += std::to_string(v.get_int64());
      return;
    case json::kind::uint64:
      out += std::to_string(v.get_uint64());
      return;
    case json::kind::double_:
      out += python_float_repr(v.get_double());
      return;
    case json::kind::string:
      escape_string(out, v.get_string());
      return;
    case json::kind::array: {
      const auto& a = v.get_array();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& item : a) {
        if (!first)
          out += item_separator;
        first = false;
        newline(level + 1);
        dump(out, item, indent, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case json::kind::object: {
      const auto& o = v.get_object();
      if (o.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, item] : o) {
        if (!first)
          out += item_separator;
        first = false;
        newline(level + 1);
        escape_string(out, key);
        out += ": ";
        dump(out, item, indent, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace grading_detail

using namespace grading_detail;

std::string eval_script(const Instance& instance,
                        const std::vector<std::string>& asset_restore_commands) {
  std::vector<std::string> lines;
  for (std::string_view line : py::split(py::strip(instance.eval_script), "\n"))
    if (line != "#!/bin/bash" && line != "set -uxo pipefail")
      lines.emplace_back(line);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(end_test_output) != std::string::npos) {
      const std::string end = lines[i];
      lines[i] = "SWEBENCH_TEST_EXIT_CODE=$?";
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, end);
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i) + 2,
                   fmt::format("echo \"{}: $SWEBENCH_TEST_EXIT_CODE\"", test_exit_code));
      break;
    }
  }
  std::string script = "#!/bin/bash\nset -uxo pipefail";
  for (const auto& line : lines)
    script += "\n" + line;
  script += "\n";
  if (asset_restore_commands.empty())
    return script;
  // The restore commands go right before the line holding the start marker.
  std::vector<std::string_view> all = py::split(script, "\n");
  std::string out;
  bool placed = false;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!placed && all[i].find(start_test_output) != std::string_view::npos) {
      for (const auto& command : asset_restore_commands)
        out += command + "\n";
      placed = true;
    }
    out += all[i];
    if (i + 1 < all.size())
      out += '\n';
  }
  if (!placed) {
    out += "\n";
    for (std::size_t i = 0; i < asset_restore_commands.size(); ++i)
      out += (i ? "\n" : "") + asset_restore_commands[i];
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> classify_failure(std::string_view text) {
  if (text.empty())
    return std::nullopt;
  const auto& patterns = signature_patterns();
  for (std::size_t i = 0; i < signatures.size(); ++i)
    if (patterns[i].search(text))
      return std::pair{std::string(signatures[i].reason), std::string(signatures[i].tier)};
  return std::nullopt;
}

LogsEval evaluate_logs(const Instance& instance, std::string_view content) {
  LogsEval out;
  for (std::string_view bad : {apply_patch_fail, reset_failed, tests_error, tests_timeout})
    if (content.find(bad) != std::string_view::npos)
      return out;
  const std::size_t start = content.find(start_test_output);
  if (start == std::string_view::npos || content.find(end_test_output) == std::string_view::npos)
    return out;
  // What lies between the first start marker and the next start marker, up to the end marker.
  std::string_view sliced = content.substr(start + start_test_output.size());
  sliced = find_or_end(sliced, start_test_output);
  sliced = find_or_end(sliced, end_test_output);

  const LogParser parser = find_log_parser(instance.log_parser);
  if (!parser)
    throw LogParserError("unknown log parser " + instance.log_parser);
  const ParseContext context{instance.instance_id, instance.repo, instance.version};
  out.status = parser(sliced, context);
  if (out.status.empty())
    out.status = parser(content, context);  // some runners print outside the markers
  if (out.status.empty() && !suite_ran().search(content))
    return {};
  // A patch can print "PASSED" lines itself: a non-zero exit with no failure parsed is not
  // the run that happened.
  if (auto m = exit_code_line().search(content)) {
    const auto code = py::to_int(m->str(1));
    if (code && *code != 0 && !out.status.empty()) {
      bool any_failure = false;
      for (const auto& [name, s] : out.status.entries())
        any_failure = any_failure || s == status::failed || s == status::error;
      if (!any_failure)
        return {};
    }
  }
  out.found = true;
  return out;
}

json::object eval_report(const Instance& instance, const Prediction& prediction,
                         std::string_view test_output) {
  json::object entry;
  entry["patch_is_None"] = false;
  entry["patch_exists"] = false;
  entry["patch_successfully_applied"] = false;
  entry["resolved"] = false;
  entry["infra_failure"] = false;
  json::object report;
  auto finish = [&] {
    report[prediction.instance_id] = std::move(entry);
    return report;
  };
  if (!prediction.model_patch) {
    entry["patch_is_None"] = true;
    return finish();
  }
  entry["patch_exists"] = true;

  const std::string content = translate_newlines(test_output);
  LogsEval logs = evaluate_logs(instance, content);
  if (!logs.found) {
    if (auto why = classify_failure(content)) {
      entry["infra_failure"] = why->second == "environment";
      entry["infra_failure_reason"] = why->first;
    }
    return finish();
  }
  entry["patch_successfully_applied"] = true;

  Split f2p;
  for (const auto& name : instance.fail_to_pass)
    check_case(name, logs.status, instance.eval_type, false, f2p);
  Split p2p;
  for (const auto& name : instance.pass_to_pass)
    check_case(name, logs.status, instance.eval_type, true, p2p);
  const double f2p_rate = rate(f2p);
  const double p2p_rate = rate(p2p);
  entry["resolved"] = f2p_rate == 1.0 && p2p_rate == 1.0;

  json::object tests;
  tests["FAIL_TO_PASS"] = split_json(std::move(f2p));
  tests["PASS_TO_PASS"] = split_json(std::move(p2p));
  tests["FAIL_TO_FAIL"] = split_json({});
  tests["PASS_TO_FAIL"] = split_json({});
  entry["tests_status"] = std::move(tests);
  return finish();
}

std::string python_json(const json::value& value, int indent) {
  std::string out;
  dump(out, value, indent, 0);
  return out;
}

}  // namespace rex::swebench
