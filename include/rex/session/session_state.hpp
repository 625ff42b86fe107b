// The state of a bash session as bash text (SessionState): what a session's shell holds besides
// its processes (variables, exported or not, with their attributes; functions; aliases; shell
// options; umask; traps; the working directory), captured by a command run in the session and
// recreated by sourcing the text at the top level of a fresh session.
//
// What is left out: bash's own variables (PPID, RANDOM, SECONDS, BASH_*, ...), those of the host
// (HOSTNAME), rex's prompt and framing (PS0-PS2, PROMPT_COMMAND, __rex_*, REX_SESSION), the
// history, the directory stack, jobs. Exported variables the new session inherits and the
// captured one did not have are unset, so an `unset` carries over too.
#pragma once

#include <string>
#include <string_view>

namespace rex {

/// The command that writes the session's state to `path` (a file the session's user can write).
/// It changes nothing in the session but `$_` and `$?`.
std::string capture_state_command(std::string_view path);

/// The command that recreates the state written by capture_state_command, read from `path`.
std::string restore_state_command(std::string_view path);

/// The working directory a captured state records (its first line), empty when it has none.
std::string captured_cwd(std::string_view state);

/// `text` (a state, a path) with the directory `from` replaced by `to` wherever it stands whole
/// (followed by '/', a quote, a separator or the end): a state moved to a sandbox that works in
/// another directory (each of the gateway's local sandboxes has one of its own).
std::string moved_paths(std::string_view text, std::string_view from, std::string_view to);

}  // namespace rex
