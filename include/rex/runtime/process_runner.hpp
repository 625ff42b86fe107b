// One-off process execution (`/execute`, PROTOCOL.md) with the semantics of SWE-ReX's
// `subprocess.run`, on asio: the awaiting coroutine's executor is never blocked beyond the
// posix_spawn call itself.
#pragma once

#include <rex/protocol/commands.hpp>

#include <boost/asio/awaitable.hpp>

namespace rex {

/// Runs `command` to completion and returns its decoded output and exit status.
///
/// - `command`: an argv list, or a string that is the program name (shell=false) or a script
///   for `/bin/sh -c` (shell=true; with a list, the first element is the script and the others
///   become $0, $1, ...). A program without '/' is looked up in PATH (the new `env`'s PATH
///   when `env` is given).
/// - `env` replaces the whole environment; `cwd` is the working directory; stdin is /dev/null.
/// - stdout and stderr are read concurrently until both reach end of file (so a background
///   grandchild holding them open is waited for, as in Python); merge_output_streams sends
///   stderr into stdout. Output is decoded as UTF-8 with `\xNN` for invalid bytes.
/// - exit_code: the exit status, or -N after death by signal N.
/// - The child leads a process group of its own. When `timeout` seconds pass before the
///   output is complete and the child has exited, the whole group is killed (SIGKILL) and
///   reaped, then CommandTimeoutError is thrown with extra_info {"timeout", "stdout",
///   "stderr"} (the output so far).
/// - check=true and a non-zero exit: NonZeroExitCodeError, extra_info {"exit_code", "stdout",
///   "stderr"}, message as SWE-ReX's, prefixed with "error_msg: " when error_msg is set.
/// - A program that cannot be started: FileNotFoundError, PermissionError, NotADirectoryError
///   or OSError, naming the program or the cwd as Python does.
///
/// Cancellation: terminal cancellation of the awaiting coroutine kills the process group,
/// reaps the child and completes with boost::asio::error::operation_aborted (as a
/// boost::system::system_error). No child is ever left unreaped and no descriptor leaks.
boost::asio::awaitable<CommandResponse> run_command(Command command);

}  // namespace rex
