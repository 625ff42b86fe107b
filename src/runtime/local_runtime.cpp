#include <rex/runtime/local_runtime.hpp>

#include <rex/core/bounded.hpp>
#include <rex/core/temp_file.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/runtime/file_ops.hpp>
#include <rex/runtime/process_runner.hpp>
#include <rex/session/session_state.hpp>

#include "core/offload.hpp"
#include "runtime/process_table.hpp"

#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <type_traits>
#include <unordered_map>

namespace rex {
namespace {
// Sessions closed at once by close(): each is a kill and a wait for processes to go, cheap for
// the machine; the limit keeps a runtime with thousands of sessions from opening thousands of
// descriptors for the waits at the same moment.
constexpr std::size_t kConcurrentCloses = 256;
}  // namespace

struct LocalRuntime::Impl {
  Impl(asio::any_io_executor executor, LocalRuntimeConfig config)
      : ex(std::move(executor)),
        cfg(std::move(config)),
        files(std::max<std::size_t>(cfg.file_threads, 1)),
        processes(ex) {}

  ~Impl() {
    sessions.clear();  // each session kills its processes as it goes
    files.join();
  }

  // Runs blocking work on the file pool and resumes the caller on its own executor.
  template <class F>
  asio::awaitable<std::invoke_result_t<F>> offload(F work) {
    return detail::offload(files, ex, std::move(work));
  }

  std::shared_ptr<BashSession> find(const std::string& name) {
    auto session = lookup(name);
    if (!session)
      throw SessionDoesNotExistError("session " + python_repr(name) + " does not exist");
    return session;
  }

  // The open session of that name; null when there is none (or it is still starting).
  std::shared_ptr<BashSession> lookup(const std::string& name) const {
    auto it = sessions.find(name);
    return it == sessions.end() ? nullptr : it->second;
  }

  asio::any_io_executor ex;
  LocalRuntimeConfig cfg;
  asio::thread_pool files;
  // A null entry reserves a name while its session starts. Hashed: every command looks its
  // session up, and a tree of many sessions costs a cache miss per level.
  std::unordered_map<std::string, std::shared_ptr<BashSession>> sessions;
  detail::ProcessTable processes;
};

LocalRuntime::LocalRuntime(asio::any_io_executor executor, LocalRuntimeConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(config))) {}

LocalRuntime::~LocalRuntime() = default;

asio::awaitable<IsAliveResponse> LocalRuntime::is_alive() {
  co_return IsAliveResponse{true, ""};
}

asio::awaitable<CreateBashSessionResponse> LocalRuntime::create_session(
    CreateBashSessionRequest request) {
  if (request.session_type != "bash")
    throw ValueError("unknown session type: " + request.session_type);
  if (impl_->sessions.contains(request.session))
    throw SessionExistsError("session " + request.session + " already exists");
  const std::string name = request.session;
  impl_->sessions.emplace(name, nullptr);
  auto session = std::make_shared<BashSession>(impl_->ex, impl_->cfg.session);
  try {
    auto response = co_await session->start(std::move(request));
    impl_->sessions[name] = std::move(session);
    co_return response;
  } catch (...) {
    impl_->sessions.erase(name);
    throw;
  }
}

namespace {

// Keeps the session object alive while its operation runs, as a caller's own reference would.
// Its frame is small enough for asio to recycle, where a coroutine holding the whole action is
// allocated and freed with every command.
asio::awaitable<BashObservation> holding(std::shared_ptr<BashSession> session,
                                         asio::awaitable<BashObservation> operation) {
  BashObservation observation = co_await std::move(operation);
  session.reset();
  co_return observation;
}

asio::awaitable<BashObservation> no_such_session(std::string name) {
  throw SessionDoesNotExistError("session " + python_repr(name) + " does not exist");
  co_return BashObservation{};
}

}  // namespace

// Neither is a coroutine of its own: a command costs a frame and a resumption fewer. The session
// is looked up at the call; a missing one is reported when the operation is awaited, as before.
asio::awaitable<BashObservation> LocalRuntime::run_in_session(Action action) {
  return run_in_session_streaming(std::move(action), OutputListener{});
}

asio::awaitable<BashObservation> LocalRuntime::run_in_session_streaming(Action action,
                                                                        OutputListener on_output) {
  std::shared_ptr<BashSession> session = impl_->lookup(session_of(action));
  if (!session)
    return no_such_session(session_of(action));
  auto operation = [&] {
    if (auto* bash = std::get_if<BashAction>(&action))
      return session->run(std::move(*bash), std::move(on_output));
    return session->interrupt(std::get<BashInterruptAction>(std::move(action)));
  }();
  return holding(std::move(session), std::move(operation));
}

asio::awaitable<CloseBashSessionResponse> LocalRuntime::close_session(
    CloseBashSessionRequest request) {
  auto session = impl_->find(request.session);
  impl_->sessions.erase(request.session);
  co_await session->close();
  co_return CloseBashSessionResponse{};
}

asio::awaitable<CommandResponse> LocalRuntime::execute(Command command) {
  co_return co_await run_command(std::move(command));
}

asio::awaitable<ReadFileResponse> LocalRuntime::read_file(ReadFileRequest request) {
  auto work = [r = std::move(request)] { return read_file_sync(r); };
  co_return co_await impl_->offload(std::move(work));
}

asio::awaitable<WriteFileResponse> LocalRuntime::write_file(WriteFileRequest request) {
  auto work = [r = std::move(request)] {
    write_file_sync(r);
    return WriteFileResponse{};
  };
  co_return co_await impl_->offload(std::move(work));
}

asio::awaitable<UploadResponse> LocalRuntime::upload(UploadRequest request) {
  auto work = [r = std::move(request)] {
    upload_sync(r);
    return UploadResponse{};
  };
  co_return co_await impl_->offload(std::move(work));
}

asio::awaitable<DownloadResponse> LocalRuntime::download(DownloadRequest request) {
  // The same copy as an upload, in the other direction: both sides are this file system.
  auto work = [r = std::move(request)] {
    upload_sync(UploadRequest{.source_path = r.path, .target_path = r.target_path, .unzip = false});
    return DownloadResponse{};
  };
  co_return co_await impl_->offload(std::move(work));
}

namespace {
asio::awaitable<void> close_one(std::shared_ptr<BashSession> session) {
  co_await session->close();
}
}  // namespace

asio::awaitable<CloseResponse> LocalRuntime::close() {
  impl_->processes.kill_all();  // the runtime's close ends what it runs in the background too
  auto sessions = std::move(impl_->sessions);
  impl_->sessions.clear();
  std::vector<std::shared_ptr<BashSession>> started;
  for (auto& [name, session] : sessions) {
    if (session)
      started.push_back(std::move(session));
  }
  // Side by side: the whole takes about as long as the slowest close.
  co_await for_each_bounded(std::move(started), kConcurrentCloses, close_one);
  co_return CloseResponse{};
}

asio::awaitable<std::optional<ProcessEnd>> LocalRuntime::start_process(ProcessConfig config,
                                                                       ProcessListener on_event) {
  return impl_->processes.start(std::move(config), std::move(on_event));
}

asio::awaitable<std::optional<ProcessEnd>> LocalRuntime::connect_process(ProcessSelector which,
                                                                         ProcessListener on_event) {
  return impl_->processes.connect(std::move(which), std::move(on_event));
}

asio::awaitable<ProcessListResponse> LocalRuntime::list_processes() {
  co_return impl_->processes.list();
}

asio::awaitable<void> LocalRuntime::send_process_input(ProcessInput input) {
  return impl_->processes.input(std::move(input));
}

asio::awaitable<void> LocalRuntime::signal_process(ProcessSignal signal) {
  impl_->processes.signal(signal);
  co_return;
}

asio::awaitable<void> LocalRuntime::resize_process(ProcessResize resize) {
  impl_->processes.resize(resize);
  co_return;
}

asio::awaitable<void> LocalRuntime::send_session_input(SessionInput input) {
  // Held for the write: a close_session meanwhile does not free it under us.
  const std::shared_ptr<BashSession> session = impl_->find(input.session);
  co_await session->send_input(std::move(input.input));
}

asio::awaitable<std::optional<ProcessEnd>> LocalRuntime::attach_session(SessionAttach attach,
                                                                        ProcessListener on_event) {
  const std::shared_ptr<BashSession> session = impl_->find(attach.session);
  co_return co_await session->attach(std::move(attach), std::move(on_event));
}

asio::awaitable<void> LocalRuntime::resize_session(SessionResize resize) {
  const std::shared_ptr<BashSession> session = impl_->find(resize.session);
  co_await session->resize(std::move(resize));
}

namespace {

// A file for a state to pass through, readable and writable by this process (and the sessions,
// which run as its user).
TempFile state_file() {
  return TempFile::create_in(std::filesystem::temp_directory_path().string(), "rex-state-");
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_whole(TempFile& file, std::string_view text) {
  std::ofstream out(file.path(), std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out.flush())
    throw_os_error(errno, file.path());
}

}  // namespace

asio::awaitable<CaptureSessionsResponse> LocalRuntime::capture_sessions(
    CaptureSessionsRequest request) {
  std::vector<std::string> names = std::move(request.sessions);
  if (names.empty()) {
    for (const auto& entry : impl_->sessions)
      names.push_back(entry.first);
  } else {
    for (const auto& name : names) {
      if (!impl_->sessions.contains(name))
        throw SessionDoesNotExistError("session " + python_repr(name) + " does not exist");
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  CaptureSessionsResponse response;
  for (const auto& name : names) {
    std::shared_ptr<BashSession> session = impl_->lookup(name);
    if (!session) {
      response.not_carried.push_back({name, "the session is still starting or was closed"});
      continue;
    }
    TempFile file = co_await impl_->offload(state_file);
    file.close();
    BashAction action{.command = capture_state_command(file.path()),
                      .session = name,
                      .timeout = request.timeout,
                      .check = "silent"};
    std::string failure;
    try {
      BashObservation observation = co_await session->run(std::move(action));
      if (observation.exit_code.value_or(0) != 0)
        failure = "capturing its state failed: " + observation.output;
    } catch (const SessionBusyError& e) {
      failure = e.what();
    } catch (const SwerexException& e) {
      failure = std::string("capturing its state failed: ") + e.what();
    }
    if (!failure.empty()) {
      response.not_carried.push_back({name, std::move(failure)});
      continue;
    }
    std::string state = co_await impl_->offload([&file] { return read_whole(file.path()); });
    std::string cwd = captured_cwd(state);
    response.sessions.push_back({name, std::move(cwd), std::move(state)});
  }
  co_return response;
}

asio::awaitable<RestoreSessionsResponse> LocalRuntime::restore_sessions(
    RestoreSessionsRequest request) {
  std::set<std::string> names;
  for (const auto& state : request.sessions) {
    if (impl_->sessions.contains(state.session) || !names.insert(state.session).second)
      throw SessionExistsError("session " + state.session + " already exists");
  }
  RestoreSessionsResponse response;
  std::vector<std::string> started;
  std::exception_ptr failure;
  try {
    for (auto& state : request.sessions) {
      CreateBashSessionRequest create{.session = state.session, .startup_timeout = request.timeout};
      co_await create_session(std::move(create));
      started.push_back(state.session);
      TempFile file = co_await impl_->offload(state_file);
      co_await impl_->offload([&file, &state] { write_whole(file, state.state); });
      file.close();
      BashAction action{.command = restore_state_command(file.path()),
                        .session = state.session,
                        .timeout = request.timeout,
                        .check = "ignore"};
      BashObservation observation = co_await run_in_session(std::move(action));
      response.sessions.push_back({state.session, std::move(observation.output)});
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    for (const auto& name : started) {
      if (auto session = impl_->lookup(name)) {
        impl_->sessions.erase(name);
        co_await session->close();
      }
    }
    std::rethrow_exception(failure);
  }
  co_return response;
}

std::size_t LocalRuntime::session_count() const noexcept {
  return impl_->sessions.size();
}

}  // namespace rex
