// A JSON-lines file (rex eval's results.jsonl) read back as objects, for the tests that check one.
#pragma once

#include <boost/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "support/test_helpers.hpp"

namespace rex::test {

/// One object per non-empty line of the file at `path` (none when it cannot be read); a line
/// that is not a JSON object throws.
inline std::vector<boost::json::object> read_json_lines(const std::string& path) {
  std::vector<boost::json::object> records;
  std::istringstream lines(read_text(path));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty())
      records.push_back(boost::json::parse(line).as_object());
  }
  return records;
}

}  // namespace rex::test
