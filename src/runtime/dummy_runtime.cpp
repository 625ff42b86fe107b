#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/runtime/dummy_runtime.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace rex {

namespace fs = std::filesystem;

DummyRuntime::DummyRuntime(std::vector<BashObservation> run_in_session_outputs) {
  default_.exit_code = 0;
  for (auto& o : run_in_session_outputs)
    queue(std::move(o));
}

void DummyRuntime::queue(BashObservation observation) {
  queue_.push_back(Scripted{std::move(observation), nullptr});
}

void DummyRuntime::queue_error(std::exception_ptr error) {
  queue_.push_back(Scripted{BashObservation{}, std::move(error)});
}

void DummyRuntime::set_default(BashObservation observation) {
  default_ = std::move(observation);
}
void DummyRuntime::set_alive(bool alive) {
  alive_ = alive;
}
const std::vector<Action>& DummyRuntime::received() const noexcept {
  return received_;
}
const std::vector<Command>& DummyRuntime::executed() const noexcept {
  return executed_;
}
const std::map<std::string, std::string>& DummyRuntime::files() const noexcept {
  return files_;
}

asio::awaitable<IsAliveResponse> DummyRuntime::is_alive() {
  IsAliveResponse r;
  r.is_alive = alive_;
  if (!alive_)
    r.message = "the dummy runtime is set to not alive";
  co_return r;
}

asio::awaitable<CreateBashSessionResponse> DummyRuntime::create_session(
    CreateBashSessionRequest request) {
  if (!sessions_.insert(request.session).second)
    throw SessionExistsError("session '" + request.session + "' already exists");
  co_return CreateBashSessionResponse{};
}

asio::awaitable<BashObservation> DummyRuntime::run_in_session(Action action) {
  const std::string& session = session_of(action);
  if (!sessions_.contains(session))
    throw SessionDoesNotExistError("session '" + session + "' does not exist");
  received_.push_back(std::move(action));
  if (queue_.empty())
    co_return default_;
  Scripted next = std::move(queue_.front());
  queue_.pop_front();
  if (next.error)
    std::rethrow_exception(next.error);
  co_return next.observation;
}

asio::awaitable<CloseBashSessionResponse> DummyRuntime::close_session(
    CloseBashSessionRequest request) {
  if (sessions_.erase(request.session) == 0)
    throw SessionDoesNotExistError("session '" + request.session + "' does not exist");
  co_return CloseBashSessionResponse{};
}

asio::awaitable<CommandResponse> DummyRuntime::execute(Command command) {
  executed_.push_back(std::move(command));
  CommandResponse r;
  r.exit_code = 0;
  co_return r;
}

asio::awaitable<ReadFileResponse> DummyRuntime::read_file(ReadFileRequest request) {
  auto it = files_.find(request.path);
  if (it == files_.end())
    throw FileNotFoundError("no such file: '" + request.path + "'");
  // As a real runtime reads a file: its bytes decoded as the request asks, so that what goes
  // back is text (uploaded bytes need not be).
  ReadFileResponse r;
  r.content = translate_newlines(decode_text(it->second, request.encoding.value_or("utf-8"),
                                             request.errors.value_or("strict")));
  co_return r;
}

asio::awaitable<WriteFileResponse> DummyRuntime::write_file(WriteFileRequest request) {
  files_[request.path] = std::move(request.content);
  co_return WriteFileResponse{};
}

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw FileNotFoundError("cannot read '" + path.string() + "'");
  std::ostringstream out;
  out << in.rdbuf();
  return std::move(out).str();
}

void spill(const fs::path& path, const std::string& content) {
  if (path.has_parent_path())
    fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out)
    throw OSError("cannot write '" + path.string() + "'");
}

}  // namespace

asio::awaitable<UploadResponse> DummyRuntime::upload(UploadRequest request) {
  const fs::path source(request.source_path);
  std::error_code ec;
  if (fs::is_directory(source, ec)) {
    for (const auto& entry : fs::recursive_directory_iterator(source)) {
      if (entry.is_regular_file()) {
        const auto rel = fs::relative(entry.path(), source).generic_string();
        files_[request.target_path + "/" + rel] = slurp(entry.path());
      }
    }
  } else {
    files_[request.target_path] = slurp(source);
  }
  co_return UploadResponse{};
}

asio::awaitable<DownloadResponse> DummyRuntime::download(DownloadRequest request) {
  auto it = files_.find(request.path);
  if (it != files_.end()) {
    spill(request.target_path, it->second);
    co_return DownloadResponse{};
  }
  const std::string prefix = request.path + (request.path.ends_with('/') ? "" : "/");
  bool any = false;
  for (auto f = files_.lower_bound(prefix); f != files_.end() && f->first.starts_with(prefix);
       ++f) {
    spill(fs::path(request.target_path) / f->first.substr(prefix.size()), f->second);
    any = true;
  }
  if (!any)
    throw FileNotFoundError("no such file or directory: '" + request.path + "'");
  co_return DownloadResponse{};
}

asio::awaitable<CloseResponse> DummyRuntime::close() {
  sessions_.clear();
  co_return CloseResponse{};
}

}  // namespace rex
