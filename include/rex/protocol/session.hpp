// Session lifecycle messages of the wire protocol: create and close a bash session.
// Field names and defaults are those of the SWE-ReX protocol (PROTOCOL.md).
#pragma once

#include <rex/protocol/processes.hpp>

#include <boost/describe/class.hpp>

#include <string>
#include <vector>

namespace rex {

struct CreateBashSessionRequest {
  std::vector<std::string> startup_source{};  // files sourced after start, in order
  std::string session = "default";
  std::string session_type = "bash";
  double startup_timeout = 1.0;  // seconds
};
BOOST_DESCRIBE_STRUCT(CreateBashSessionRequest, (),
                      (startup_source, session, session_type, startup_timeout))

struct CreateBashSessionResponse {
  std::string output{};  // what the startup files printed
  std::string session_type = "bash";
};
BOOST_DESCRIBE_STRUCT(CreateBashSessionResponse, (), (output, session_type))

struct CloseBashSessionRequest {
  std::string session = "default";
  std::string session_type = "bash";
};
BOOST_DESCRIBE_STRUCT(CloseBashSessionRequest, (), (session, session_type))

struct CloseBashSessionResponse {
  std::string session_type = "bash";
};
BOOST_DESCRIBE_STRUCT(CloseBashSessionResponse, (), (session_type))

/// Input for the command a bash session runs now: what a person would type at its terminal (a
/// rex addition, POST /session_input). "\n" ends a line; "\u0004" (Ctrl-D) ends a `cat`'s input.
struct SessionInput {
  std::string session = "default";
  std::string input{};
};
BOOST_DESCRIBE_STRUCT(SessionInput, (), (session, input))

/// A person's terminal, lent the session's own between its commands (a rex addition, POST
/// /sessions/attach). Its output streams as a process's does (a "start" event with bash's pid,
/// "stdout" events, "keepalive" while quiet); keys go as SessionInput, sizes as SessionResize.
/// Commands are refused (SessionBusyError) while it is attached; when the listener leaves,
/// what the person left running in the foreground is interrupted (then killed) and the session
/// is handed back to its commands with its state: directory, variables, functions.
struct SessionAttach {
  std::string session = "default";
  TerminalSize size{};
  double keepalive = 15;  // seconds between keepalive events of a quiet stream; 0: none
};
BOOST_DESCRIBE_STRUCT(SessionAttach, (), (session, size, keepalive))

/// A new size for the terminal attached to a session (a rex addition, POST /sessions/resize).
struct SessionResize {
  std::string session = "default";
  TerminalSize size{};
};
BOOST_DESCRIBE_STRUCT(SessionResize, (), (session, size))

}  // namespace rex
