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

/// A bash session's state as bash text that recreates it: its variables (exported or not),
/// functions, aliases, shell options, umask, traps and working directory, so an activated Python
/// venv comes along. Captured by POST /sessions/capture, given back to POST /sessions/restore (rex
/// additions); what runs in the session (its programs, background jobs) is not carried.
struct SessionState {
  std::string session = "default";
  std::string cwd{};    // the working directory, for people
  std::string state{};  // bash text; sourced at the top level of a new session, recreates it
};
BOOST_DESCRIBE_STRUCT(SessionState, (), (session, cwd, state))

/// A session whose state was not captured (or not restored), and why: a program still runs in
/// its foreground, it is still starting.
struct SessionNotCarried {
  std::string session{};
  std::string reason{};
};
BOOST_DESCRIBE_STRUCT(SessionNotCarried, (), (session, reason))

struct CaptureSessionsRequest {
  std::vector<std::string> sessions{};  // the sessions to capture; empty: every session
  double timeout = 30;                  // seconds per session
};
BOOST_DESCRIBE_STRUCT(CaptureSessionsRequest, (), (sessions, timeout))

struct CaptureSessionsResponse {
  std::vector<SessionState> sessions{};  // by name
  std::vector<SessionNotCarried> not_carried{};
};
BOOST_DESCRIBE_STRUCT(CaptureSessionsResponse, (), (sessions, not_carried))

/// Starts a session of each state's name and recreates its state. A name already taken is
/// refused (SessionExistsError) before anything starts.
struct RestoreSessionsRequest {
  std::vector<SessionState> sessions{};
  double timeout = 30;  // seconds per session, its start and the state's restore
};
BOOST_DESCRIBE_STRUCT(RestoreSessionsRequest, (), (sessions, timeout))

/// What restoring each session printed (empty when it went cleanly: an error names the line).
struct RestoredSession {
  std::string session{};
  std::string output{};
};
BOOST_DESCRIBE_STRUCT(RestoredSession, (), (session, output))

struct RestoreSessionsResponse {
  std::vector<RestoredSession> sessions{};
};
BOOST_DESCRIBE_STRUCT(RestoreSessionsResponse, (), (sessions))

}  // namespace rex
