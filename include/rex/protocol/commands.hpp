// One-off process execution (`/execute`), independent of any session (PROTOCOL.md).
#pragma once

#include <boost/describe/class.hpp>

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace rex {

struct Command {
  // An argv list, or a string: with shell=true a shell command line, otherwise a program name.
  std::variant<std::string, std::vector<std::string>> command{};
  std::optional<double> timeout{};  // seconds; none = no limit
  bool shell = false;
  bool check = false;  // raise NonZeroExitCodeError on a non-zero exit
  std::string error_msg{};
  std::optional<std::map<std::string, std::string>> env{};  // replaces the whole environment
  std::optional<std::string> cwd{};
  bool merge_output_streams = false;  // stderr goes to stdout
};
BOOST_DESCRIBE_STRUCT(Command, (),
                      (command, timeout, shell, check, error_msg, env, cwd, merge_output_streams))

// `stdout` and `stderr` are macros in C and C++; the JSON names drop the trailing underscore.
struct CommandResponse {
  std::string stdout_{};
  std::string stderr_{};
  std::optional<int> exit_code{};
};
BOOST_DESCRIBE_STRUCT(CommandResponse, (), (stdout_, stderr_, exit_code))

}  // namespace rex
