// Runs rex's SWE-bench log parsers over cases read as JSON lines from stdin, one result line each
// on stdout, for tests/swebench/test_parsers.py (which runs swebench's own parsers on the same
// cases with tests/swebench/parse_logs.py and compares the two).
//
// In:  {"parser": "parse_log_pytest", "instance_id": "...", "repo": "...", "version": "...",
//       "log": "..."}
// Out: {"map": [[name, status], ...]} (in the map's order), or {"error": "<what>"} when the
//      parser refused the log, or {"error": "unknown parser"}.
#include <rex/swebench/log_parsers.hpp>

#include <boost/json.hpp>

#include <iostream>
#include <string>

namespace json = boost::json;

namespace {

std::string field(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

json::object run_case(const json::object& in) {
  json::object out;
  const rex::swebench::LogParser parser = rex::swebench::find_log_parser(field(in, "parser"));
  if (!parser) {
    out["error"] = "unknown parser";
    return out;
  }
  rex::swebench::ParseContext context{field(in, "instance_id"), field(in, "repo"),
                                      field(in, "version")};
  try {
    const rex::swebench::StatusMap map = parser(field(in, "log"), context);
    json::array entries;
    for (const auto& [name, status] : map.entries())
      entries.push_back(json::array{json::string(name), json::string(status)});
    out["map"] = std::move(entries);
  } catch (const rex::swebench::LogParserError& e) {
    out["error"] = e.what();
  }
  return out;
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty())
      continue;
    std::cout << json::serialize(run_case(json::parse(line).as_object())) << '\n';
  }
  return std::cout.good() ? 0 : 1;
}
