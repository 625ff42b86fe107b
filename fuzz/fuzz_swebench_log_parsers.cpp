// SWE-bench's log parsers (rex/swebench/log_parsers.hpp) over Python's str and re semantics
// (py_text). The first byte picks the parser, the second the instance id and version some
// parsers read, the rest is the log (as swebench reads it: UTF-8, invalid bytes replaced).
//
// Properties: a parser returns a map or throws LogParserError (nothing else, no crash, no hang);
// the same log gives the same map again (names, statuses and their order); every name and
// status is valid UTF-8 and names are unique.
#include <rex/protocol/python_text.hpp>
#include <rex/swebench/log_parsers.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;
namespace swebench = rex::swebench;

// Instance ids and versions the parsers branch on (and ones they refuse).
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> contexts{{
    {"django__django-11099", "3.0"},
    {"GoogleChrome__lighthouse-1234", "9.5"},
    {"vercel__next.js-1234", "1.27"},
    {"immutable-js__immutable-js-2005", "4.0"},
    {"jekyll__jekyll-9141", "x"},
    {"nothing", ""},
}};

bool valid_utf8(std::string_view s) {
  return rex::decode_text(s, "utf-8", "replace") == s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2)
    return 0;
  const auto names = swebench::log_parser_names();
  const std::string_view name = names[data[0] % names.size()];
  const auto& [instance_id, version] = contexts[data[1] % contexts.size()];
  const std::string log = rex::decode_text(
      std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2), "utf-8", "replace");
  const swebench::LogParser parser = swebench::find_log_parser(name);
  check(parser != nullptr, "every registry name has a parser");
  const swebench::ParseContext context{std::string(instance_id), "owner/repo",
                                       std::string(version)};
  swebench::StatusMap first;
  try {
    first = parser(log, context);
  } catch (const swebench::LogParserError&) {
    return 0;
  }
  check(parser(log, context) == first, "the same log gives the same map");
  std::set<std::string_view> seen;
  for (const auto& [test, status] : first.entries()) {
    check(valid_utf8(test) && valid_utf8(status), "names and statuses are UTF-8");
    check(seen.insert(test).second, "names are unique");
  }
  return 0;
}
