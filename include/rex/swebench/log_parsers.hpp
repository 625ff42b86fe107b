// SWE-bench's log parsers: each turns a test run's output into a map from test name to status,
// exactly as the parser of the same name in swebench 5.0.2's PARSER_REGISTRY does (the grading
// of `rex swebench` relies on it; tests/swebench checks every parser against swebench's own on
// the same logs).
//
// A log is text as swebench reads it: UTF-8 (invalid bytes already replaced by U+FFFD). Names and
// statuses are UTF-8 too. A parser never fails on any text except where swebench's raises (a
// parser keyed on instance ids it does not know): then LogParserError.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::swebench {

/// The statuses swebench's parsers give (its TestStatus values).
namespace status {
inline constexpr std::string_view failed = "FAILED";
inline constexpr std::string_view passed = "PASSED";
inline constexpr std::string_view skipped = "SKIPPED";
inline constexpr std::string_view error = "ERROR";
inline constexpr std::string_view xfail = "XFAIL";
}  // namespace status

/// Test name -> status, in the order each name was first set (a Python dict's order: setting a
/// name again changes its status, not its place).
class StatusMap {
 public:
  using Entry = std::pair<std::string, std::string>;

  void set(std::string_view name, std::string_view status);
  /// The status, or nullptr.
  const std::string* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  /// Removes a name (a later set puts it last, as in Python). False when absent.
  bool erase(std::string_view name);
  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  const std::vector<Entry>& entries() const noexcept { return entries_; }

  friend bool operator==(const StatusMap& a, const StatusMap& b) {
    return a.entries_ == b.entries_;
  }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in entries_
};

/// What some parsers look at besides the log (swebench's TestSpec fields they read).
struct ParseContext {
  std::string instance_id{};
  std::string repo{};
  std::string version{};
};

/// A parser refused its input where swebench's raises (say, an instance id it has no rule for).
class LogParserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using LogParser = StatusMap (*)(std::string_view log, const ParseContext& context);

/// The parser of that registry name ("parse_log_pytest"), or nullptr.
LogParser find_log_parser(std::string_view name) noexcept;

/// Every registry name, in swebench's order.
std::span<const std::string_view> log_parser_names() noexcept;

}  // namespace rex::swebench
