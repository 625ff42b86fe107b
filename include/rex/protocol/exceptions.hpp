// The exception hierarchy of the wire protocol. Each type knows the Python class path that
// SWE-ReX clients import to re-raise it (PROTOCOL.md, "HTTP 511 exception transfer"), and
// carries `extra_info`, a JSON object with details for a program to act on.
//
// Every exception a runtime raises for a request derives from SwerexException, so a server
// can transfer it and a client can re-raise the same C++ type (see `to_wire` / `throw_wire`).
#pragma once

#include <boost/json/object.hpp>

#include <stdexcept>
#include <string>
#include <string_view>

namespace rex {

class SwerexException : public std::runtime_error {
 public:
  explicit SwerexException(const std::string& message, boost::json::object extra_info = {})
      : std::runtime_error(message), message_(message), extra_info_(std::move(extra_info)) {}

  /// The whole message; what() ends at a NUL byte (command output may hold one), this does not.
  const std::string& message() const noexcept { return message_; }

  /// The Python class path clients re-raise, e.g. "swerex.exceptions.CommandTimeoutError".
  virtual std::string_view class_path() const noexcept {
    return "swerex.exceptions.SwerexException";
  }
  const boost::json::object& extra_info() const noexcept { return extra_info_; }
  boost::json::object& extra_info() noexcept { return extra_info_; }

 private:
  std::string message_;
  boost::json::object extra_info_;
};

#define REX_DEFINE_EXCEPTION(Name, Base, ClassPath)                             \
  class Name : public Base {                                                    \
   public:                                                                      \
    using Base::Base;                                                           \
    std::string_view class_path() const noexcept override { return ClassPath; } \
  }

/// A command ran longer than its timeout. extra_info: "output" (so far), "timeout".
REX_DEFINE_EXCEPTION(CommandTimeoutError, SwerexException, "swerex.exceptions.CommandTimeoutError");
/// A command exited non-zero under check="raise". extra_info: "exit_code", "output".
REX_DEFINE_EXCEPTION(NonZeroExitCodeError, SwerexException,
                     "swerex.exceptions.NonZeroExitCodeError");
/// Bash rejected the command's syntax; nothing ran. extra_info: "bash_stdout", "bash_stderr".
REX_DEFINE_EXCEPTION(BashIncorrectSyntaxError, SwerexException,
                     "swerex.exceptions.BashIncorrectSyntaxError");
REX_DEFINE_EXCEPTION(SessionExistsError, SwerexException, "swerex.exceptions.SessionExistsError");
REX_DEFINE_EXCEPTION(SessionDoesNotExistError, SwerexException,
                     "swerex.exceptions.SessionDoesNotExistError");
REX_DEFINE_EXCEPTION(SessionNotInitializedError, SwerexException,
                     "swerex.exceptions.SessionNotInitializedError");
REX_DEFINE_EXCEPTION(NoExitCodeError, SwerexException, "swerex.exceptions.NoExitCodeError");
/// Session start or interrupt did not reach the prompt in time (pexpect's TIMEOUT on the wire).
REX_DEFINE_EXCEPTION(PexpectTimeout, SwerexException, "pexpect.exceptions.TIMEOUT");
REX_DEFINE_EXCEPTION(FileNotFoundError, SwerexException, "builtins.FileNotFoundError");
REX_DEFINE_EXCEPTION(IsADirectoryError, SwerexException, "builtins.IsADirectoryError");
REX_DEFINE_EXCEPTION(NotADirectoryError, SwerexException, "builtins.NotADirectoryError");
REX_DEFINE_EXCEPTION(FileExistsError, SwerexException, "builtins.FileExistsError");
REX_DEFINE_EXCEPTION(PermissionError, SwerexException, "builtins.PermissionError");
/// Bad argument values (an unknown encoding, text that cannot be decoded, ...).
REX_DEFINE_EXCEPTION(ValueError, SwerexException, "builtins.ValueError");
/// An unknown encoding or error handler name (what Python's codecs raise for them).
REX_DEFINE_EXCEPTION(LookupError, SwerexException, "builtins.LookupError");
/// Any other operating-system failure (disk full, too many open files, ...).
REX_DEFINE_EXCEPTION(OSError, SwerexException, "builtins.OSError");

// rex additions. They travel as their nearest SWE-ReX class, so stock clients raise a
// SwerexException; extra_info["rex_error"] lets rex's own client rebuild the precise type.

/// The shell of a session has exited or was killed; the session can only be closed.
REX_DEFINE_EXCEPTION(SessionDiedError, SwerexException, "swerex.exceptions.SwerexException");
/// The session is busy (an interactive program or a timed-out command holds it).
REX_DEFINE_EXCEPTION(SessionBusyError, SwerexException, "swerex.exceptions.SwerexException");
/// Input was sent to a session that runs no command (it would be run as one).
REX_DEFINE_EXCEPTION(NoCommandRunningError, SwerexException, "swerex.exceptions.SwerexException");
/// No running process has the pid or tag a process call gave.
REX_DEFINE_EXCEPTION(ProcessDoesNotExistError, SwerexException,
                     "swerex.exceptions.SwerexException");
/// The runtime has no background processes (a SWE-ReX server, the dummy runtime).
REX_DEFINE_EXCEPTION(ProcessesUnsupportedError, SwerexException,
                     "swerex.exceptions.SwerexException");

#undef REX_DEFINE_EXCEPTION

/// The wire form: {"message", "class_path", "traceback", "extra_info"} (the value of the
/// "swerexception" key of a 511 answer).
boost::json::object to_wire(const SwerexException& e);

/// Throws the C++ exception type that `to_wire` produced `wire` from; an unknown class path
/// becomes a SwerexException that keeps it in extra_info["class_path"].
[[noreturn]] void throw_wire(const boost::json::object& wire);

/// Throws the exception Python raises for an OSError with this errno: FileNotFoundError,
/// IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError, else OSError; the
/// message reads "[Errno N] strerror" and, with a file name, ": 'name'" after it.
[[noreturn]] void throw_os_error(int err);
[[noreturn]] void throw_os_error(int err, std::string_view filename);

}  // namespace rex
