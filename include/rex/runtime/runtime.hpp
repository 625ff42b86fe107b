// Runtime: the one interface an agent or harness programs against. Local, remote and dummy
// runtimes implement it; the same agent code runs against any of them.
//
// Every operation is a coroutine on the runtime's executor. Failures are thrown as the
// protocol's exceptions (rex/protocol/exceptions.hpp). Cancellation: an operation obeys the
// terminal cancellation of the coroutine that awaits it (e.g. via awaitable operators).
#pragma once

#include <rex/protocol/actions.hpp>
#include <rex/protocol/commands.hpp>
#include <rex/protocol/files.hpp>
#include <rex/protocol/processes.hpp>
#include <rex/protocol/responses.hpp>
#include <rex/protocol/session.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string_view>

namespace rex {

namespace asio = boost::asio;

class Runtime {
 public:
  virtual ~Runtime() = default;

  virtual asio::awaitable<IsAliveResponse> is_alive() = 0;
  /// Starts a bash session. SessionExistsError when the name is taken.
  virtual asio::awaitable<CreateBashSessionResponse> create_session(
      CreateBashSessionRequest request) = 0;
  /// Runs a bash action or an interrupt in its session. SessionDoesNotExistError when unknown.
  virtual asio::awaitable<BashObservation> run_in_session(Action action) = 0;
  /// Receives a command's output while it runs: whole lines, cleaned as in the observation.
  using OutputListener = std::function<void(std::string_view)>;
  /// run_in_session that also hands the output to `on_output` as it arrives. The observation
  /// stays the complete answer. By default nothing streams: the whole output comes at the end.
  virtual asio::awaitable<BashObservation> run_in_session_streaming(Action action,
                                                                    OutputListener on_output);
  virtual asio::awaitable<CloseBashSessionResponse> close_session(
      CloseBashSessionRequest request) = 0;
  /// Runs a one-off process outside any session.
  virtual asio::awaitable<CommandResponse> execute(Command command) = 0;
  virtual asio::awaitable<ReadFileResponse> read_file(ReadFileRequest request) = 0;
  virtual asio::awaitable<WriteFileResponse> write_file(WriteFileRequest request) = 0;
  /// Copies a local file or directory (source_path) into the runtime's file system.
  virtual asio::awaitable<UploadResponse> upload(UploadRequest request) = 0;
  /// Copies a file or directory of the runtime's file system (path) to the caller's
  /// (target_path): a file to exactly target_path, a directory's contents into target_path.
  /// FileNotFoundError when path does not exist.
  virtual asio::awaitable<DownloadResponse> download(DownloadRequest request) = 0;
  /// Closes every session and ends every background process; the runtime stays usable.
  virtual asio::awaitable<CloseResponse> close() = 0;

  // Background processes (rex/protocol/processes.hpp). A runtime without them throws
  // ProcessesUnsupportedError from each.

  /// Sees a process's events; returning false stops listening (the process runs on).
  using ProcessListener = std::function<bool(const ProcessEvent&)>;
  /// Starts a process and listens to it: `started` first, then its output. Returns how it
  /// ended, or none when the listener stopped first.
  virtual asio::awaitable<std::optional<ProcessEnd>> start_process(ProcessConfig config,
                                                                   ProcessListener on_event);
  /// Listens to a running process's output from now on, as start_process does.
  /// ProcessDoesNotExistError when no process is selected.
  virtual asio::awaitable<std::optional<ProcessEnd>> connect_process(ProcessSelector which,
                                                                     ProcessListener on_event);
  /// The processes running now.
  virtual asio::awaitable<ProcessListResponse> list_processes();
  /// Writes to a process's stdin (started with stdin_pipe), closing it after when asked.
  virtual asio::awaitable<void> send_process_input(ProcessInput input);
  /// Sends a signal to a process's group.
  virtual asio::awaitable<void> signal_process(ProcessSignal signal);
  /// Changes the size of a process's terminal (started with a pty).
  virtual asio::awaitable<void> resize_process(ProcessResize resize);

  /// Writes to the terminal of the command a bash session runs now (BashSession::send_input).
  /// A runtime without it throws SwerexException saying so.
  virtual asio::awaitable<void> send_session_input(SessionInput input);

  /// Lends a bash session's own terminal to a person between its commands (SessionAttach,
  /// BashSession::attach): its output as a process's events, keys through send_session_input,
  /// sizes through resize_session. Returns none when the listener stopped (the session is
  /// handed back to its commands), or how bash ended. A runtime without it throws
  /// ProcessesUnsupportedError.
  virtual asio::awaitable<std::optional<ProcessEnd>> attach_session(SessionAttach attach,
                                                                    ProcessListener on_event);
  /// The new size of the terminal attached to a session.
  virtual asio::awaitable<void> resize_session(SessionResize resize);

  /// The state of bash sessions (SessionState): the named ones, or all. A session whose
  /// foreground program still runs (an open python3) is named in not_carried with the reason;
  /// an unknown name is SessionDoesNotExistError. A runtime without it throws SwerexException
  /// saying so.
  virtual asio::awaitable<CaptureSessionsResponse> capture_sessions(CaptureSessionsRequest request);
  /// Starts a session for each state under its name and recreates the state in it. A name
  /// already taken is SessionExistsError, before anything starts; a session that cannot start
  /// ends the ones this call started. A runtime without it throws SwerexException saying so.
  virtual asio::awaitable<RestoreSessionsResponse> restore_sessions(RestoreSessionsRequest request);
};

}  // namespace rex
