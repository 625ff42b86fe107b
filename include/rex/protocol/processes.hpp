// Background processes, a rex addition to the protocol (SWE-ReX has none): a program started
// with pipes for its stdin, stdout and stderr that runs on after the call that started it, whose
// output streams as it is produced, to the caller that started it and to any that connect to
// it later; input can be written to it and signals sent, until it ends or the runtime closes.
// Served by rex-server under /processes (docs/rex-server.md).
#pragma once

#include <boost/describe/class.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rex {

/// A terminal's size in character cells.
struct TerminalSize {
  int cols = 80;
  int rows = 24;
};
BOOST_DESCRIBE_STRUCT(TerminalSize, (), (cols, rows))

/// What to start (POST /processes/start).
struct ProcessConfig {
  std::vector<std::string> argv{};  // argv[0] is looked up in PATH when it has no '/'
  std::optional<std::map<std::string, std::string>> env{};  // added to the server's environment
  std::optional<std::string> cwd{};                         // else the server's
  std::string tag{};        // a name of the caller's choosing, to find the process by
  bool stdin_pipe = false;  // stdin is a pipe fed by input calls; else /dev/null
  double keepalive = 15;    // seconds between keepalive events of a quiet stream; 0: none
  // A terminal of this size instead of pipes: the process leads a session whose controlling
  // terminal is a new pty, its stdin, stdout and stderr; its output arrives as stdout, input
  // calls type into it (stdin_pipe is implied), and TERM is xterm-256color unless env says.
  std::optional<TerminalSize> pty{};
};
BOOST_DESCRIBE_STRUCT(ProcessConfig, (), (argv, env, cwd, tag, stdin_pipe, keepalive, pty))

/// A running process as listed.
struct ProcessInfo {
  long pid = 0;
  std::vector<std::string> argv{};
  std::optional<std::map<std::string, std::string>> env{};
  std::string cwd{};
  std::string tag{};
  bool stdin_pipe = false;            // still open for input
  std::optional<TerminalSize> pty{};  // its terminal's size now; none: pipes
};
BOOST_DESCRIBE_STRUCT(ProcessInfo, (), (pid, argv, env, cwd, tag, stdin_pipe, pty))

struct ProcessListResponse {
  std::vector<ProcessInfo> processes{};
};
BOOST_DESCRIBE_STRUCT(ProcessListResponse, (), (processes))

/// Which process: by pid, else by tag (POST /processes/connect, and in the calls below).
struct ProcessSelector {
  long pid = 0;
  std::string tag{};
  double keepalive = 15;  // for connect: as in ProcessConfig
};
BOOST_DESCRIBE_STRUCT(ProcessSelector, (), (pid, tag, keepalive))

/// Bytes for a process's stdin (POST /processes/input); `data` is base64 on the wire. With
/// close, stdin is closed after them (the process reads end of file); for a process with a
/// pty, close types Ctrl-D (end of file for a program reading a line) and the pty stays.
struct ProcessInput {
  long pid = 0;
  std::string tag{};
  std::string data{};
  bool close = false;
};
BOOST_DESCRIBE_STRUCT(ProcessInput, (), (pid, tag, data, close))

/// A signal for a process's whole group (POST /processes/signal): its name ("SIGTERM") or
/// number ("15").
struct ProcessSignal {
  long pid = 0;
  std::string tag{};
  std::string signal = "SIGKILL";
};
BOOST_DESCRIBE_STRUCT(ProcessSignal, (), (pid, tag, signal))

/// A new size for a process's terminal (POST /processes/resize): the foreground programs get
/// SIGWINCH. ValueError for a process without a pty, or a size outside 1 to 10000.
struct ProcessResize {
  long pid = 0;
  std::string tag{};
  TerminalSize size{};
};
BOOST_DESCRIBE_STRUCT(ProcessResize, (), (pid, tag, size))

/// How a process ended: its exit code, or the signal that ended it.
struct ProcessEnd {
  std::optional<int> exit_code{};
  std::optional<int> signal{};
  std::string status{};  // "exit status 0", "signal: killed"
};
BOOST_DESCRIBE_STRUCT(ProcessEnd, (), (exit_code, signal, status))

/// What a listener of a process sees, in order: `started` with its pid (once, first, for a
/// connect too), output pieces as they come (`stdout`, `stderr`: bytes, not necessarily whole lines
/// or characters), and `keepalive` when the stream has been quiet for the interval asked.
struct ProcessEvent {
  enum class Kind { started, stdout_data, stderr_data, keepalive };
  Kind kind = Kind::started;
  long pid = 0;
  std::string data{};
};

}  // namespace rex
