// Actions run in a bash session and the observation each returns (PROTOCOL.md).
// An Action is tagged on the wire by "action_type": "bash" or "bash_interrupt".
#pragma once

#include <boost/describe/class.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace rex {

struct BashAction {
  std::string command{};
  std::string session = "default";
  std::optional<double> timeout{};  // seconds; none = no limit
  bool is_interactive_command = false;
  bool is_interactive_quit = false;
  std::string check = "raise";  // "raise" | "silent" | "ignore"
  std::string error_msg{};
  std::vector<std::string> expect{};  // strings that end the command besides the prompt
  std::string action_type = "bash";
  // rex additions (optional; absent = off):
  std::optional<double> no_output_timeout{};       // fail when nothing is printed for this long
  std::optional<std::int64_t> max_output_bytes{};  // keep head and tail of longer output
};
BOOST_DESCRIBE_STRUCT(BashAction, (),
                      (command, session, timeout, is_interactive_command, is_interactive_quit,
                       check, error_msg, expect, action_type, no_output_timeout, max_output_bytes))

struct BashInterruptAction {
  std::string session = "default";
  double timeout = 0.2;  // seconds to wait for the prompt after each attempt
  int n_retry = 3;
  std::vector<std::string> expect{};
  std::string action_type = "bash_interrupt";
};
BOOST_DESCRIBE_STRUCT(BashInterruptAction, (), (session, timeout, n_retry, expect, action_type))

using Action = std::variant<BashAction, BashInterruptAction>;

struct BashObservation {
  std::string output{};
  std::optional<int> exit_code{};
  std::string failure_reason{};
  std::string expect_string{};
  std::string session_type = "bash";
};
BOOST_DESCRIBE_STRUCT(BashObservation, (),
                      (output, exit_code, failure_reason, expect_string, session_type))

/// The session an action addresses.
inline const std::string& session_of(const Action& action) {
  return std::visit([](const auto& a) -> const std::string& { return a.session; }, action);
}

}  // namespace rex
