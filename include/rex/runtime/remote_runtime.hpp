// RemoteRuntime: the Runtime of a rex-server (or SWE-ReX's swerex-remote) reached over HTTP, by
// TCP, TLS or a unix socket (PROTOCOL.md). The same agent code runs against it as against a
// LocalRuntime, and a failure arrives as the same C++ exception type the server's runtime threw
// (transferred as HTTP 511).
//
// Guarantees:
// - Connections are kept alive and reused; concurrent calls use separate connections.
// - Every call carries a fresh X-Request-ID, the same on each retry, so a server that already
//   ran it answers the retry from its cache. Only connection failures are retried
//   (config.client.retry); an answer never is.
// - Each call has a timeout fitted to it: is_alive a short one; a command's own timeout plus a
//   margin; a command without a timeout a long limit. A call that exceeds it fails with
//   http::RequestTimeoutError and its connection is closed.
// - Other error statuses become http::HttpError (status, URL and body); a lost server
//   http::ConnectionError. is_alive never throws for those: it answers is_alive=false.
// - Uploads and downloads stream through temporary files; no transfer is held in memory whole.
//
// Threading: call every member from the executor the runtime was created with.
#pragma once

#include <rex/http/client.hpp>
#include <rex/runtime/runtime.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace rex {

struct RemoteRuntimeConfig {
  std::string url = "http://127.0.0.1:8000";  // forms: see rex/http/url.hpp
  std::string auth_token{};                   // sent as X-API-Key when not empty
  std::chrono::milliseconds is_alive_timeout = std::chrono::seconds(1);
  // Calls whose duration does not depend on a caller's timeout: closing sessions, reading and
  // writing files.
  std::chrono::milliseconds request_timeout = std::chrono::seconds(120);
  // Added to a command's, session start's or interrupt's own timeout: the server needs time to
  // notice the timeout, interrupt the command and answer.
  std::chrono::milliseconds timeout_margin = std::chrono::seconds(15);
  // Limit of run_in_session and execute when the command has no timeout of its own.
  std::chrono::milliseconds unbounded_command_timeout = std::chrono::hours(2);
  std::chrono::milliseconds transfer_timeout = std::chrono::hours(1);  // upload and download
  std::chrono::milliseconds poll_interval{100};  // wait_until_alive's pause between checks
  http::ClientConfig client{};   // retries, connection pool, TLS (its timeout is not used)
  std::size_t file_threads = 1;  // threads for archive and temporary-file work
};

class RemoteRuntime final : public Runtime {
 public:
  /// Throws http::InvalidUrlError for a bad config.url.
  explicit RemoteRuntime(asio::any_io_executor executor, RemoteRuntimeConfig config = {});
  ~RemoteRuntime() override;

  /// {is_alive: false, message} when the server cannot be reached, does not answer within
  /// is_alive_timeout, or answers an error status; a transferred exception is thrown.
  asio::awaitable<IsAliveResponse> is_alive() override;
  asio::awaitable<CreateBashSessionResponse> create_session(
      CreateBashSessionRequest request) override;
  asio::awaitable<BashObservation> run_in_session(Action action) override;
  /// POST /run_in_session_stream (a rex addition): output arrives as Server-Sent Events while
  /// the command runs. A server without that endpoint (SWE-ReX's answers 404) is remembered and
  /// served by run_in_session instead, the output then coming at the end.
  asio::awaitable<BashObservation> run_in_session_streaming(Action action,
                                                            OutputListener on_output) override;
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest request) override;
  asio::awaitable<CommandResponse> execute(Command command) override;
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest request) override;
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest request) override;
  /// A file is sent as is (unzip=false); a directory is zipped and sent with unzip=true, as
  /// SWE-ReX's client does, so both rex's and SWE-ReX's servers accept it.
  asio::awaitable<UploadResponse> upload(UploadRequest request) override;
  /// POST /download (a rex addition; SWE-ReX's server lacks it and answers 404 -> HttpError).
  /// The answer is written to a temporary file beside target_path, then renamed into place (a
  /// file) or extracted into target_path (a directory), so a failed transfer leaves nothing
  /// half-written at target_path.
  asio::awaitable<DownloadResponse> download(DownloadRequest request) override;
  asio::awaitable<CloseResponse> close() override;
  asio::awaitable<std::optional<ProcessEnd>> start_process(ProcessConfig config,
                                                           ProcessListener on_event) override;
  asio::awaitable<std::optional<ProcessEnd>> connect_process(ProcessSelector which,
                                                             ProcessListener on_event) override;
  asio::awaitable<ProcessListResponse> list_processes() override;
  asio::awaitable<void> send_process_input(ProcessInput input) override;
  asio::awaitable<void> signal_process(ProcessSignal signal) override;
  asio::awaitable<void> resize_process(ProcessResize resize) override;
  asio::awaitable<void> send_session_input(SessionInput input) override;
  asio::awaitable<std::optional<ProcessEnd>> attach_session(SessionAttach attach,
                                                            ProcessListener on_event) override;
  asio::awaitable<void> resize_session(SessionResize resize) override;
  asio::awaitable<CaptureSessionsResponse> capture_sessions(
      CaptureSessionsRequest request) override;
  asio::awaitable<RestoreSessionsResponse> restore_sessions(
      RestoreSessionsRequest request) override;

  /// Sends one SWE-ReX JSON request as it is (`body`, already read into `parsed` by the caller,
  /// or null when it is not JSON) and returns the server's answer as it is, whatever its status:
  /// a proxy's path, without decoding and encoding the protocol's types. The token, the
  /// configured headers and `request_id` as X-Request-ID are added; the time limit is the one
  /// the typed call would have (the action's timeout and the margin). Throws what the client
  /// throws (ConnectionError, RequestTimeoutError).
  asio::awaitable<http::ClientResponse> forward(const char* method, std::string target,
                                                std::string body, const boost::json::value* parsed,
                                                std::string request_id);

  /// Sets the server's hard deadline `seconds` from now (0: none), with POST /lifetime (a rex
  /// addition: rex-server, not SWE-ReX's server). Used on a server started ahead of its use.
  asio::awaitable<void> set_max_lifetime(double seconds);

  /// Polls is_alive every poll_interval until it answers true. Throws http::RequestTimeoutError
  /// with the last check's message when `timeout` passes first.
  asio::awaitable<void> wait_until_alive(std::chrono::steady_clock::duration timeout);

  const RemoteRuntimeConfig& config() const noexcept;
  /// The HTTP client underneath (for its connection statistics).
  const http::Client& client() const noexcept;
  /// Closes the kept-alive connections that wait idle (see http::Client::close_idle_connections).
  void close_idle_connections() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex
