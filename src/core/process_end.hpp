// How a child process ended, as the protocol reports it (ProcessEnd). Internal to the library.
#pragma once

#include <rex/protocol/processes.hpp>

#include <optional>

namespace rex::detail {

/// A waitpid() status as one number: the exit code, or minus the signal that ended it; none
/// for a status that is neither (stopped, continued).
std::optional<int> end_code(int wait_status) noexcept;

/// The end for end_code()'s number: `exit_code` and "exit status 3", or `signal` and
/// "signal: killed"; "unknown" for none (the child was reaped elsewhere).
ProcessEnd process_end(const std::optional<int>& code);

}  // namespace rex::detail
