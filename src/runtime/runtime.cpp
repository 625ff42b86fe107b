#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/runtime.hpp>

namespace rex {

asio::awaitable<BashObservation> Runtime::run_in_session_streaming(Action action,
                                                                   OutputListener on_output) {
  auto observation = co_await run_in_session(std::move(action));
  if (on_output && !observation.output.empty())
    on_output(observation.output);
  co_return observation;
}

namespace {
[[noreturn]] void no_processes() {
  throw ProcessesUnsupportedError("this runtime does not run background processes");
}
}  // namespace

asio::awaitable<std::optional<ProcessEnd>> Runtime::start_process(ProcessConfig, ProcessListener) {
  no_processes();
  co_return std::nullopt;
}

asio::awaitable<std::optional<ProcessEnd>> Runtime::connect_process(ProcessSelector,
                                                                    ProcessListener) {
  no_processes();
  co_return std::nullopt;
}

asio::awaitable<ProcessListResponse> Runtime::list_processes() {
  no_processes();
  co_return ProcessListResponse{};
}

asio::awaitable<void> Runtime::send_process_input(ProcessInput) {
  no_processes();
  co_return;
}

asio::awaitable<void> Runtime::signal_process(ProcessSignal) {
  no_processes();
  co_return;
}

asio::awaitable<void> Runtime::resize_process(ProcessResize) {
  no_processes();
  co_return;
}

asio::awaitable<std::optional<ProcessEnd>> Runtime::attach_session(SessionAttach, ProcessListener) {
  throw ProcessesUnsupportedError("this runtime cannot attach a terminal to a session");
  co_return std::nullopt;
}

asio::awaitable<void> Runtime::resize_session(SessionResize) {
  throw ProcessesUnsupportedError("this runtime cannot attach a terminal to a session");
  co_return;
}

asio::awaitable<CaptureSessionsResponse> Runtime::capture_sessions(CaptureSessionsRequest) {
  throw SwerexException("this runtime cannot capture the state of its sessions");
  co_return CaptureSessionsResponse{};
}

asio::awaitable<RestoreSessionsResponse> Runtime::restore_sessions(RestoreSessionsRequest) {
  throw SwerexException("this runtime cannot restore the state of sessions");
  co_return RestoreSessionsResponse{};
}

asio::awaitable<void> Runtime::send_session_input(SessionInput) {
  throw SwerexException("this runtime cannot send input to a session's running command");
  co_return;
}

}  // namespace rex
