// LocalRuntime: the Runtime of this machine. Bash sessions in pseudo-terminals, one-off
// processes, and file operations, all on the caller's io_context; blocking file I/O runs on a
// small thread pool of its own so the io_context never waits for a disk.
//
// Threading: call every member from the executor the runtime was created with. Sessions are
// independent: a long command in one never delays another session or another operation.
#pragma once

#include <rex/runtime/runtime.hpp>
#include <rex/session/bash_session.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

namespace rex {

struct LocalRuntimeConfig {
  BashSessionConfig session{};   // how every bash session starts
  std::size_t file_threads = 2;  // threads for blocking file-system work
};

class LocalRuntime final : public Runtime {
 public:
  explicit LocalRuntime(asio::any_io_executor executor, LocalRuntimeConfig config = {});
  ~LocalRuntime() override;

  asio::awaitable<IsAliveResponse> is_alive() override;
  asio::awaitable<CreateBashSessionResponse> create_session(
      CreateBashSessionRequest request) override;
  asio::awaitable<BashObservation> run_in_session(Action action) override;
  asio::awaitable<BashObservation> run_in_session_streaming(Action action,
                                                            OutputListener on_output) override;
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest request) override;
  asio::awaitable<CommandResponse> execute(Command command) override;
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest request) override;
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest request) override;
  asio::awaitable<UploadResponse> upload(UploadRequest request) override;
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

  /// Number of open sessions.
  std::size_t session_count() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex
