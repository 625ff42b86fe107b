#include "deployment/sandbox_runtime.hpp"

#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <utility>

namespace rex::detail {

namespace {

namespace json = boost::json;

constexpr int kLostChecks = 6;  // more looks at a sandbox that seems alive after a failed call
constexpr auto kLostCheckPause = std::chrono::milliseconds(500);

// Failures that may mean the sandbox is gone: the connection (to it, or a proxy's to it) broke
// or timed out, or something else answered for it: a proxy (404: no such sandbox; 5xx: it could
// not reach it), or another server that now has its address and refuses its token (401: a
// container's address is given to the next container once it ends).
bool may_be_lost(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const SandboxLostError&) {
    return false;  // explained already
  } catch (const http::ConnectionError&) {
    return true;
  } catch (const http::RequestTimeoutError&) {
    return true;
  } catch (const http::HttpError& e) {
    return e.status() == 401 || e.status() == 404 || e.status() >= 500;
  } catch (...) {
    return false;
  }
}

// A proxy that refused the call's credentials.
bool refused(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const http::HttpError& e) {
    return e.status() == 401;
  } catch (...) {
    return false;
  }
}

// The backend's reason when it sees the sandbox lost; `failure_counts`: its failure to answer
// counts as one (else it says nothing).
asio::awaitable<std::optional<std::string>> ask_lost(SandboxBackend& backend, std::string id,
                                                     bool failure_counts) {
  std::string failure;
  try {
    auto asking = backend.lost(std::move(id));
    co_return co_await std::move(asking);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure_counts)
    co_return std::nullopt;
  co_return failure;
}

}  // namespace

SandboxRuntime::SandboxRuntime(asio::any_io_executor executor,
                               std::shared_ptr<SandboxBackend> backend, std::string id,
                               std::string url, std::unique_ptr<RemoteRuntime> inner)
    : executor_(std::move(executor)),
      backend_(std::move(backend)),
      id_(std::move(id)),
      url_(std::move(url)),
      inner_(std::move(inner)) {}

asio::awaitable<IsAliveResponse> SandboxRuntime::is_alive() {
  {
    auto looking = ask_lost(*backend_, id_, true);
    if (const std::optional<std::string> why = co_await std::move(looking))
      co_return IsAliveResponse{false, *why};
  }
  {
    auto refreshing = backend_->refresh_client(url_);
    co_await std::move(refreshing);
  }
  auto answering = inner_->is_alive();
  IsAliveResponse answer = co_await std::move(answering);
  if (answer.is_alive)
    co_return answer;
  // The server stopped answering: the sandbox may have ended since the backend was asked, and
  // then the backend says how.
  auto again = ask_lost(*backend_, id_, true);
  if (const std::optional<std::string> why = co_await std::move(again))
    co_return IsAliveResponse{false, *why};
  co_return answer;
}

asio::awaitable<std::optional<std::string>> SandboxRuntime::lost_patiently() {
  asio::steady_timer pause(executor_);
  for (int attempt = 0;; ++attempt) {
    auto asking = ask_lost(*backend_, id_, false);
    std::optional<std::string> why = co_await std::move(asking);
    if (why || attempt == kLostChecks)
      co_return why;
    pause.expires_after(kLostCheckPause);
    co_await pause.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> SandboxRuntime::explain(std::exception_ptr failure) {
  if (!may_be_lost(failure))
    co_return;
  auto looking = lost_patiently();
  const std::optional<std::string> why = co_await std::move(looking);
  if (!why)
    co_return;
  json::object info{
      {"sandbox", fmt::format("{} {}", backend_->name(), id_)}, {"reason", *why}, {"error", ""}};
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    info["error"] = e.what();
  }
  // The backend's reason names the sandbox (its conformance suite checks that).
  throw SandboxLostError(fmt::format("the sandbox is gone: {}", *why), std::move(info));
}

template <class T>
asio::awaitable<T> SandboxRuntime::guarded(std::function<asio::awaitable<T>()> call) {
  {
    auto refreshing = backend_->refresh_client(url_);
    co_await std::move(refreshing);
  }
  std::exception_ptr failure;
  try {
    co_return co_await call();
  } catch (...) {
    failure = std::current_exception();
  }
  if (refused(failure) && backend_->renew_client(url_)) {
    auto refreshing = backend_->refresh_client(url_);
    co_await std::move(refreshing);
    co_return co_await call();
  }
  auto explaining = explain(failure);
  co_await std::move(explaining);
  std::rethrow_exception(failure);
}

asio::awaitable<void> SandboxRuntime::guarded_void(std::function<asio::awaitable<void>()> call) {
  {
    auto refreshing = backend_->refresh_client(url_);
    co_await std::move(refreshing);
  }
  std::exception_ptr failure;
  try {
    co_await call();
    co_return;
  } catch (...) {
    failure = std::current_exception();
  }
  auto explaining = explain(failure);
  co_await std::move(explaining);
  std::rethrow_exception(failure);
}

asio::awaitable<CreateBashSessionResponse> SandboxRuntime::create_session(
    CreateBashSessionRequest r) {
  return guarded<CreateBashSessionResponse>([this, r] { return inner_->create_session(r); });
}
asio::awaitable<BashObservation> SandboxRuntime::run_in_session(Action a) {
  return guarded<BashObservation>([this, a] { return inner_->run_in_session(a); });
}
asio::awaitable<BashObservation> SandboxRuntime::run_in_session_streaming(Action a,
                                                                          OutputListener l) {
  return guarded<BashObservation>([this, a, l] { return inner_->run_in_session_streaming(a, l); });
}
asio::awaitable<CloseBashSessionResponse> SandboxRuntime::close_session(CloseBashSessionRequest r) {
  return guarded<CloseBashSessionResponse>([this, r] { return inner_->close_session(r); });
}
asio::awaitable<CommandResponse> SandboxRuntime::execute(Command c) {
  return guarded<CommandResponse>([this, c] { return inner_->execute(c); });
}
asio::awaitable<ReadFileResponse> SandboxRuntime::read_file(ReadFileRequest r) {
  return guarded<ReadFileResponse>([this, r] { return inner_->read_file(r); });
}
asio::awaitable<WriteFileResponse> SandboxRuntime::write_file(WriteFileRequest r) {
  return guarded<WriteFileResponse>([this, r] { return inner_->write_file(r); });
}
asio::awaitable<UploadResponse> SandboxRuntime::upload(UploadRequest r) {
  return guarded<UploadResponse>([this, r] { return inner_->upload(r); });
}
asio::awaitable<DownloadResponse> SandboxRuntime::download(DownloadRequest r) {
  return guarded<DownloadResponse>([this, r] { return inner_->download(r); });
}
asio::awaitable<CloseResponse> SandboxRuntime::close() {
  return guarded<CloseResponse>([this] { return inner_->close(); });
}
asio::awaitable<std::optional<ProcessEnd>> SandboxRuntime::start_process(ProcessConfig c,
                                                                         ProcessListener l) {
  return guarded<std::optional<ProcessEnd>>([this, c, l] { return inner_->start_process(c, l); });
}
asio::awaitable<std::optional<ProcessEnd>> SandboxRuntime::connect_process(ProcessSelector w,
                                                                           ProcessListener l) {
  return guarded<std::optional<ProcessEnd>>([this, w, l] { return inner_->connect_process(w, l); });
}
asio::awaitable<ProcessListResponse> SandboxRuntime::list_processes() {
  return guarded<ProcessListResponse>([this] { return inner_->list_processes(); });
}
asio::awaitable<void> SandboxRuntime::send_process_input(ProcessInput i) {
  return guarded_void([this, i] { return inner_->send_process_input(i); });
}
asio::awaitable<void> SandboxRuntime::send_session_input(SessionInput i) {
  return guarded_void([this, i] { return inner_->send_session_input(i); });
}
asio::awaitable<void> SandboxRuntime::signal_process(ProcessSignal s) {
  return guarded_void([this, s] { return inner_->signal_process(s); });
}
asio::awaitable<void> SandboxRuntime::resize_process(ProcessResize r) {
  return guarded_void([this, r] { return inner_->resize_process(r); });
}
asio::awaitable<std::optional<ProcessEnd>> SandboxRuntime::attach_session(SessionAttach a,
                                                                          ProcessListener l) {
  return guarded<std::optional<ProcessEnd>>([this, a, l] { return inner_->attach_session(a, l); });
}
asio::awaitable<void> SandboxRuntime::resize_session(SessionResize r) {
  return guarded_void([this, r] { return inner_->resize_session(r); });
}
void SandboxRuntime::retarget(std::string id, std::string url,
                              std::unique_ptr<RemoteRuntime> inner) {
  inner_->close_idle_connections();
  retired_.push_back(std::move(inner_));
  inner_ = std::move(inner);
  id_ = std::move(id);
  url_ = std::move(url);
}

asio::awaitable<CaptureSessionsResponse> SandboxRuntime::capture_sessions(
    CaptureSessionsRequest r) {
  return guarded<CaptureSessionsResponse>([this, r] { return inner_->capture_sessions(r); });
}
asio::awaitable<RestoreSessionsResponse> SandboxRuntime::restore_sessions(
    RestoreSessionsRequest r) {
  return guarded<RestoreSessionsResponse>([this, r] { return inner_->restore_sessions(r); });
}

}  // namespace rex::detail
