// The runtime SandboxDeployment hands out: the sandbox's server through a RemoteRuntime, with the
// backend asked before each call to bring a proxy's credentials up to date, and after a failed
// call whether the sandbox is lost (then SandboxLostError with the backend's reason rather than
// a bare connection error). Internal to the library.
#pragma once

#include <rex/deployment/backend.hpp>
#include <rex/runtime/remote_runtime.hpp>
#include <rex/runtime/runtime.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace rex::detail {

class SandboxRuntime final : public Runtime {
 public:
  /// `backend` made the sandbox `id`, whose server `inner` reaches at `url`.
  SandboxRuntime(asio::any_io_executor executor, std::shared_ptr<SandboxBackend> backend,
                 std::string id, std::string url, std::unique_ptr<RemoteRuntime> inner);

  /// The backend's reason when it sees the sandbox lost (its failure to answer counts as one),
  /// else the server's answer, and the backend asked again when the server does not answer.
  asio::awaitable<IsAliveResponse> is_alive() override;
  asio::awaitable<CreateBashSessionResponse> create_session(CreateBashSessionRequest r) override;
  asio::awaitable<BashObservation> run_in_session(Action a) override;
  asio::awaitable<BashObservation> run_in_session_streaming(Action a, OutputListener l) override;
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest r) override;
  asio::awaitable<CommandResponse> execute(Command c) override;
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest r) override;
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest r) override;
  asio::awaitable<UploadResponse> upload(UploadRequest r) override;
  asio::awaitable<DownloadResponse> download(DownloadRequest r) override;
  asio::awaitable<CloseResponse> close() override;
  asio::awaitable<std::optional<ProcessEnd>> start_process(ProcessConfig c,
                                                           ProcessListener l) override;
  asio::awaitable<std::optional<ProcessEnd>> connect_process(ProcessSelector w,
                                                             ProcessListener l) override;
  asio::awaitable<ProcessListResponse> list_processes() override;
  asio::awaitable<void> send_process_input(ProcessInput i) override;
  asio::awaitable<void> send_session_input(SessionInput i) override;
  asio::awaitable<void> signal_process(ProcessSignal s) override;
  asio::awaitable<void> resize_process(ProcessResize r) override;
  asio::awaitable<std::optional<ProcessEnd>> attach_session(SessionAttach a,
                                                            ProcessListener l) override;
  asio::awaitable<void> resize_session(SessionResize r) override;
  asio::awaitable<CaptureSessionsResponse> capture_sessions(
      CaptureSessionsRequest request) override;
  asio::awaitable<RestoreSessionsResponse> restore_sessions(
      RestoreSessionsRequest request) override;

  RemoteRuntime& remote() noexcept { return *inner_; }
  /// From now on the sandbox `id` at `url`, through `inner` (the sandbox a rewind or a resume
  /// started); the previous client stays until the runtime goes, for calls still under way.
  void retarget(std::string id, std::string url, std::unique_ptr<RemoteRuntime> inner);

 private:
  template <class T>
  asio::awaitable<T> guarded(std::function<asio::awaitable<T>()> call);
  asio::awaitable<void> guarded_void(std::function<asio::awaitable<void>()> call);
  // Throws SandboxLostError when `failure` may mean a lost sandbox and the backend says it is.
  asio::awaitable<void> explain(std::exception_ptr failure);
  // The backend's reason, asked a few times: a backend reports an end a moment after it.
  asio::awaitable<std::optional<std::string>> lost_patiently();

  asio::any_io_executor executor_;
  std::shared_ptr<SandboxBackend> backend_;
  std::string id_;
  std::string url_;
  std::unique_ptr<RemoteRuntime> inner_;
  std::vector<std::unique_ptr<RemoteRuntime>> retired_;
};

}  // namespace rex::detail
