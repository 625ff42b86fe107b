#include "server/swerex_routes.hpp"

#include <rex/core/async_mutex.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/temp_file.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/http/multipart.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/runtime/archive.hpp>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <filesystem>
#include <map>
#include <system_error>
#include <type_traits>
#include <utility>

#include "core/file_system.hpp"
#include "core/offload.hpp"

namespace rex::server {

using http::multipart_boundary;
using http::MultipartError;
using http::MultipartParser;
using http::MultipartPartHeaders;

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;

namespace {

// --- Answers -------------------------------------------------------------------------------

Answer exception_answer(const SwerexException& e) {
  json::object body;
  body["swerexception"] = to_wire(e);
  return json_answer(511, body);
}

// FastAPI's shape for a request that does not validate:
// {"detail":[{"type":..., "loc":["body", field...], "msg":..., "input":null}]}.
Answer validation_answer(std::string_view message) {
  json::array loc;
  loc.emplace_back("body");
  std::string type = "value_error";
  std::string msg(message);
  if (message.starts_with("invalid JSON")) {
    type = "json_invalid";
    msg = "JSON decode error";
  } else if (const auto colon = message.find(": "); colon != std::string_view::npos) {
    // "BashAction.timeout: expected ..." -> loc ["body", "timeout"]
    std::string_view path = message.substr(0, colon);
    if (const auto dot = path.find('.'); dot != std::string_view::npos) {
      path.remove_prefix(dot + 1);
      while (!path.empty()) {
        const auto next = path.find('.');
        loc.emplace_back(path.substr(0, next));
        path = next == std::string_view::npos ? std::string_view{} : path.substr(next + 1);
      }
    }
    if (message.ends_with("required field missing")) {
      type = "missing";
      msg = "Field required";
    }
  }
  json::object error;
  error["type"] = type;
  error["loc"] = std::move(loc);
  error["msg"] = utf8_backslashreplace(msg);  // it may quote the request's bytes
  error["input"] = nullptr;
  json::array errors;
  errors.emplace_back(std::move(error));
  json::object body;
  body["detail"] = std::move(errors);
  return json_answer(422, body);
}

Answer error_answer(std::exception_ptr error) {
  return swerex_error_answer(std::move(error));
}

// FastAPI's reading of a boolean form field.
std::optional<bool> form_bool(std::string_view v) {
  const std::string s = ascii_lower(v);
  if (s == "true" || s == "1" || s == "yes" || s == "on" || s == "y" || s == "t")
    return true;
  if (s == "false" || s == "0" || s == "no" || s == "off" || s == "n" || s == "f")
    return false;
  return std::nullopt;
}

// --- The routes' shared state --------------------------------------------------------------

struct State {
  State(asio::any_io_executor executor, Runtime& rt, const ServerConfig& config,
        asio::thread_pool* shared_files)
      : ex(std::move(executor)),
        runtime(rt),
        upload_dir_setting(config.upload_dir),
        own_files(shared_files != nullptr ? 0 : std::max<std::size_t>(config.file_threads, 1)),
        files(shared_files != nullptr ? *shared_files : own_files) {}
  ~State() { own_files.join(); }

  std::filesystem::path upload_dir() const {
    return upload_dir_setting.empty() ? std::filesystem::temp_directory_path()
                                      : std::filesystem::path(upload_dir_setting);
  }

  asio::awaitable<BashObservation> run_in_lane(Action action, Runtime::OutputListener on_output);

  asio::any_io_executor ex;
  Runtime& runtime;
  std::string upload_dir_setting;
  asio::thread_pool own_files;  // unused (no threads) when the pool is shared
  asio::thread_pool& files;     // blocking file work
  // Requests to one session queue here; the map drops a lane nobody uses.
  std::map<std::string, std::shared_ptr<AsyncMutex>> lanes;
};

asio::awaitable<BashObservation> State::run_in_lane(Action action,
                                                    Runtime::OutputListener on_output) {
  const std::string name = session_of(action);
  auto& slot = lanes[name];
  if (!slot)
    slot = std::make_shared<AsyncMutex>(ex);
  auto lane = slot;
  struct Release {
    State& state;
    const std::string& name;
    std::shared_ptr<AsyncMutex> lane;
    AsyncMutex::Guard turn{};
    ~Release() {
      turn.unlock();
      auto it = state.lanes.find(name);
      if (it != state.lanes.end() && it->second == lane && lane->idle())
        state.lanes.erase(it);
    }
  } release{*this, name, lane};
  release.turn = co_await lane->lock();
  co_return co_await runtime.run_in_session_streaming(std::move(action), std::move(on_output));
}

// --- JSON routes ---------------------------------------------------------------------------

using JsonCall = asio::awaitable<json::value> (*)(State&, std::string body);

asio::awaitable<json::value> hello(State&, std::string) {
  json::object message;
  message["message"] = "hello world";
  co_return message;
}

asio::awaitable<json::value> is_alive(State& s, std::string) {
  co_return to_json(co_await s.runtime.is_alive());
}

asio::awaitable<json::value> create_session(State& s, std::string body) {
  auto request = parse_json<CreateBashSessionRequest>(body);
  co_return to_json(co_await s.runtime.create_session(std::move(request)));
}

asio::awaitable<json::value> run_in_session(State& s, std::string body) {
  auto action = parse_json<Action>(body);
  // Interrupts must reach the command they interrupt, so they skip the session's queue.
  if (std::holds_alternative<BashInterruptAction>(action))
    co_return to_json(co_await s.runtime.run_in_session(std::move(action)));
  Runtime::OutputListener none;
  co_return to_json(co_await s.run_in_lane(std::move(action), std::move(none)));
}

asio::awaitable<json::value> close_session(State& s, std::string body) {
  auto request = parse_json<CloseBashSessionRequest>(body);
  co_return to_json(co_await s.runtime.close_session(std::move(request)));
}

asio::awaitable<json::value> execute(State& s, std::string body) {
  auto command = parse_json<Command>(body);
  co_return to_json(co_await s.runtime.execute(std::move(command)));
}

asio::awaitable<json::value> read_file(State& s, std::string body) {
  auto request = parse_json<ReadFileRequest>(body);
  co_return to_json(co_await s.runtime.read_file(std::move(request)));
}

asio::awaitable<json::value> write_file(State& s, std::string body) {
  auto request = parse_json<WriteFileRequest>(body);
  co_return to_json(co_await s.runtime.write_file(std::move(request)));
}

asio::awaitable<json::value> close_runtime(State& s, std::string) {
  co_return to_json(co_await s.runtime.close());
}

asio::awaitable<Answer> answer_json(std::shared_ptr<State> state, JsonCall call, std::string body) {
  auto called = capture(call(*state, std::move(body)));
  const Outcome<json::value> value = co_await std::move(called);
  if (!value)
    co_return error_answer(value.error());
  co_return json_answer(200, *value);
}

// The handler holds the state; the coroutine it starts holds it too, so a handler copy that
// goes away mid-request takes nothing with it.
JsonRoute json_route(const std::shared_ptr<State>& state, JsonCall call) {
  return
      [state, call](Request request) { return answer_json(state, call, std::move(request.body)); };
}

// --- /run_in_session_stream ----------------------------------------------------------------

// Runs the action for a streamed answer: output events while it runs, then one "observation"
// event, or an "error" event carrying the same body a 511 (or 422) answer would.
asio::awaitable<void> run_for_stream(std::shared_ptr<State> state, Action action,
                                     std::shared_ptr<EventStream> events) {
  std::exception_ptr failure;
  try {
    Runtime::OutputListener listener = [events](std::string_view text) {
      json::object event;
      event["output"] = text;
      events->send("output", json::serialize(event));
    };
    BashObservation observation;
    if (std::holds_alternative<BashInterruptAction>(action)) {
      observation = co_await state->runtime.run_in_session(std::move(action));
    } else {
      observation = co_await state->run_in_lane(std::move(action), std::move(listener));
    }
    events->send("observation", json::serialize(to_json(observation)));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure)
    events->send("error", error_answer(failure).body);
}

StreamRoute stream_route(const std::shared_ptr<State>& state) {
  return [state](Request request) -> std::variant<Answer, EventProducer> {
    Action action;
    try {
      action = parse_json<Action>(request.body);
    } catch (...) {
      return error_answer(std::current_exception());
    }
    return EventProducer([state, action](std::shared_ptr<EventStream> events) mutable {
      return run_for_stream(state, std::move(action), std::move(events));
    });
  };
}

// --- /processes (a rex addition) ---------------------------------------------------------------

asio::awaitable<json::value> list_processes(State& s, std::string) {
  co_return to_json(co_await s.runtime.list_processes());
}

asio::awaitable<json::value> process_input(State& s, std::string body) {
  auto input = parse_json<ProcessInput>(body);
  Base64Decoded decoded = base64_decode(input.data);
  if (!decoded.error.empty())
    throw ValueError("data: " + decoded.error);
  input.data = std::move(decoded.bytes);
  co_await s.runtime.send_process_input(std::move(input));
  co_return json::object{};
}

asio::awaitable<json::value> process_signal(State& s, std::string body) {
  auto signal = parse_json<ProcessSignal>(body);
  co_await s.runtime.signal_process(std::move(signal));
  co_return json::object{};
}

asio::awaitable<json::value> process_resize(State& s, std::string body) {
  auto resize = parse_json<ProcessResize>(body);
  co_await s.runtime.resize_process(std::move(resize));
  co_return json::object{};
}

// Input for a session's running command: like an interrupt, it skips the session's queue (the
// run it feeds holds it).
asio::awaitable<json::value> session_input(State& s, std::string body) {
  auto input = parse_json<SessionInput>(body);
  co_await s.runtime.send_session_input(std::move(input));
  co_return json::object{};
}

asio::awaitable<json::value> capture_sessions(State& s, std::string body) {
  auto request = parse_json<CaptureSessionsRequest>(body);
  co_return to_json(co_await s.runtime.capture_sessions(std::move(request)));
}

asio::awaitable<json::value> restore_sessions(State& s, std::string body) {
  auto request = parse_json<RestoreSessionsRequest>(body);
  co_return to_json(co_await s.runtime.restore_sessions(std::move(request)));
}

asio::awaitable<json::value> resize_session(State& s, std::string body) {
  auto resize = parse_json<SessionResize>(body);
  co_await s.runtime.resize_session(std::move(resize));
  co_return json::object{};
}

// A terminal attached to a session while its client is there: a client that leaves detaches it
// at once, so the session's commands need not wait for the next keepalive to find out.
asio::awaitable<std::optional<ProcessEnd>> attached(State& s, SessionAttach attach,
                                                    Runtime::ProcessListener listener,
                                                    EventStream& events) {
  auto lent = s.runtime.attach_session(std::move(attach), std::move(listener));
  auto gone = events.wait_closed();
  auto race = first_of(std::move(lent), std::move(gone));
  auto raced = co_await std::move(race);
  if (raced.index() == 1)
    co_return std::nullopt;
  co_return std::get<0>(std::move(raced));
}

// A process's events as Server-Sent Events: "start" {"pid"} (first, for a connect too),
// "stdout" and "stderr" {"data": base64}, "keepalive" {} while quiet, then "end" (how it
// ended), or "error" with the body a 511 answer would carry.
bool send_process_event(EventStream& events, const ProcessEvent& e) {
  if (events.closed())
    return false;  // the client left: stop listening, the process runs on
  switch (e.kind) {
    case ProcessEvent::Kind::started:
      events.send("start", json::serialize(json::object{{"pid", e.pid}}));
      break;
    case ProcessEvent::Kind::stdout_data:
      events.send("stdout", json::serialize(json::object{{"data", base64_encode(e.data)}}));
      break;
    case ProcessEvent::Kind::stderr_data:
      events.send("stderr", json::serialize(json::object{{"data", base64_encode(e.data)}}));
      break;
    case ProcessEvent::Kind::keepalive:
      events.send("keepalive", "{}");
      break;
  }
  return true;
}

template <class Selection>
asio::awaitable<void> follow_process(std::shared_ptr<State> state, Selection selection,
                                     std::shared_ptr<EventStream> events) {
  std::exception_ptr failure;
  try {
    Runtime::ProcessListener listener = [events](const ProcessEvent& e) {
      return send_process_event(*events, e);
    };
    std::optional<ProcessEnd> end;
    if constexpr (std::is_same_v<Selection, ProcessConfig>)
      end = co_await state->runtime.start_process(std::move(selection), std::move(listener));
    else if constexpr (std::is_same_v<Selection, SessionAttach>)
      end = co_await attached(*state, std::move(selection), std::move(listener), *events);
    else
      end = co_await state->runtime.connect_process(std::move(selection), std::move(listener));
    if (end)
      events->send("end", json::serialize(to_json(*end)));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure)
    events->send("error", error_answer(failure).body);
}

template <class Selection>
StreamRoute process_stream_route(const std::shared_ptr<State>& state) {
  return [state](Request request) -> std::variant<Answer, EventProducer> {
    Selection selection;
    try {
      selection = parse_json<Selection>(request.body);
    } catch (...) {
      return error_answer(std::current_exception());
    }
    return EventProducer([state, selection](std::shared_ptr<EventStream> events) mutable {
      return follow_process(state, std::move(selection), std::move(events));
    });
  };
}

// --- /upload -------------------------------------------------------------------------------

// The multipart form of an upload, taken as it arrives: the file part goes to a temporary file
// in pieces, the text fields are kept (each bounded); at the end the runtime gets the file.
class UploadReceiver final : public BodyReceiver {
 public:
  UploadReceiver(std::shared_ptr<State> state, std::string_view boundary)
      : state_(std::move(state)),
        data_(TempFile::create_in(state_->upload_dir().string(), "rex-upload-")) {
    MultipartParser::Handlers handlers;
    handlers.on_part_begin = [this](const MultipartPartHeaders& h) {
      part_ = h.name;
      in_file_ = h.name == "file";
      if (in_file_ && have_file_)
        throw MultipartError("more than one part named 'file'");
      have_file_ = have_file_ || in_file_;
      field_.clear();
    };
    handlers.on_part_data = [this](std::string_view bytes) {
      if (in_file_) {
        pending_.append(bytes);
      } else if (field_.size() + bytes.size() > kFieldLimit) {
        throw MultipartError(
            fmt::format("form field '{}' is larger than {} bytes", part_, kFieldLimit));
      } else {
        field_.append(bytes);
      }
    };
    handlers.on_part_end = [this] {
      if (!in_file_)
        fields_[part_] = field_;
      in_file_ = false;
    };
    form_.emplace(std::string(boundary), std::move(handlers));
  }

  asio::awaitable<std::optional<Answer>> receive(std::string_view bytes, bool last) override {
    std::string form_error;
    try {
      form_->feed(bytes);
      if (last)
        form_->finish();
    } catch (const MultipartError& e) {
      form_error = e.what();
    }
    if (!form_error.empty())
      co_return validation_answer(fmt::format("upload: {}", form_error));
    if (pending_.size() >= kFlushBytes || (last && !pending_.empty())) {
      auto piece = std::move(pending_);
      pending_.clear();
      auto write = [fd = data_.fd(), piece = std::move(piece), name = data_.path()] {
        detail::write_all(fd, piece, name);
      };
      auto written = capture(detail::offload(state_->files, state_->ex, std::move(write)));
      const Outcome<void> done = co_await std::move(written);
      if (!done)
        co_return error_answer(done.error());
    }
    co_return std::nullopt;
  }

  asio::awaitable<Answer> finish() override {
    data_.close();
    if (!have_file_)
      co_return validation_answer("upload.file: required field missing");
    const auto target = fields_.find("target_path");
    if (target == fields_.end())
      co_return validation_answer("upload.target_path: required field missing");
    bool unzip = false;
    if (const auto u = fields_.find("unzip"); u != fields_.end()) {
      const auto value = form_bool(u->second);
      if (!value)
        co_return validation_answer("upload.unzip: expected a boolean, got " +
                                    python_repr(u->second));
      unzip = *value;
    }
    UploadRequest request;
    request.source_path = data_.path();
    request.target_path = target->second;
    request.unzip = unzip;
    auto uploading = capture(state_->runtime.upload(std::move(request)));
    const Outcome<UploadResponse> uploaded = co_await std::move(uploading);
    if (!uploaded)
      co_return error_answer(uploaded.error());
    co_return json_answer(200, json::object());
  }

 private:
  static constexpr std::size_t kFieldLimit = 64 * 1024;
  static constexpr std::size_t kFlushBytes = 1 << 20;

  std::shared_ptr<State> state_;
  TempFile data_;
  std::optional<MultipartParser> form_;
  std::map<std::string, std::string> fields_;  // the text fields
  std::string part_;                           // name of the part being read
  bool in_file_ = false;                       // the part is the file
  bool have_file_ = false;
  std::string pending_;  // file bytes not yet written
  std::string field_;    // a text field's value so far
};

UploadRoute upload_route(const std::shared_ptr<State>& state) {
  return [state](const Request& request) -> std::variant<Answer, std::unique_ptr<BodyReceiver>> {
    const auto boundary = multipart_boundary(request.header[bhttp::field::content_type]);
    if (!boundary)
      return validation_answer("upload: expected a multipart/form-data body with a boundary");
    Answer refused;
    try {
      std::unique_ptr<BodyReceiver> receiver = std::make_unique<UploadReceiver>(state, *boundary);
      return receiver;
    } catch (const MultipartError& e) {
      refused = validation_answer(fmt::format("upload: {}", e.what()));
    } catch (...) {
      refused = error_answer(std::current_exception());
    }
    refused.close_connection = true;
    return refused;
  };
}

// --- /download -----------------------------------------------------------------------------

struct DownloadQuery {
  std::string path;
  std::string format = "tar";
};

DownloadQuery parse_download(std::string_view body) {
  const auto request = json::parse(body);
  const auto* obj = request.if_object();
  if (obj == nullptr)
    throw ProtocolError("DownloadRequest: expected an object");
  const auto* path_value = obj->if_contains("path");
  if (path_value == nullptr)
    throw ProtocolError("DownloadRequest.path: required field missing");
  if (!path_value->is_string())
    throw ProtocolError("DownloadRequest.path: expected a string");
  DownloadQuery query;
  query.path = path_value->as_string();
  if (const auto* f = obj->if_contains("format"); f != nullptr && !f->is_null()) {
    if (!f->is_string())
      throw ProtocolError("DownloadRequest.format: expected a string");
    query.format = f->as_string();
  }
  return query;
}

// Opens what the runtime copied to `copy`: a file goes as it is; a directory becomes an
// archive beside it. Both stay readable once the scratch directory is removed.
FileAnswer open_download(const std::filesystem::path& copy, const std::string& format) {
  struct stat st {};
  if (::stat(copy.c_str(), &st) != 0)
    throw_os_error(errno, copy.string());
  FileAnswer out;
  boost::system::error_code ec;
  if (S_ISREG(st.st_mode)) {
    out.content_type = "application/octet-stream";
    out.headers.emplace_back("X-Rex-Download-Kind", "file");
    out.body.open(copy.c_str(), beast::file_mode::scan, ec);
    if (ec)
      throw_os_error(ec.value(), copy.string());
    return out;
  }
  if (!S_ISDIR(st.st_mode))
    throw ValueError(fmt::format("{} is neither a regular file nor a directory", copy.string()));
  const auto kind = parse_archive_format(format);
  TempFile archive = TempFile::create_in(copy.parent_path().string(), "archive-");
  archive.close();
  create_archive(copy, archive.path(), kind);
  out.content_type = kind == ArchiveFormat::zip   ? "application/zip"
                     : kind == ArchiveFormat::tar ? "application/x-tar"
                                                  : "application/gzip";
  out.headers.emplace_back("X-Rex-Download-Kind", "directory");
  out.body.open(archive.path().c_str(), beast::file_mode::scan, ec);
  if (ec)
    throw_os_error(ec.value(), archive.path());
  return out;  // ~TempFile unlinks the name; the open file stays readable
}

// The runtime copies its file or tree into a scratch directory of the upload directory; that
// copy (or its archive) is opened and the scratch directory removed before the answer is sent,
// so nothing is left behind whatever happens to the connection.
asio::awaitable<std::variant<Answer, FileAnswer>> download(std::shared_ptr<State> state,
                                                           std::string body) {
  std::exception_ptr failure;
  DownloadQuery query;
  try {
    query = parse_download(body);
  } catch (const boost::system::system_error& e) {
    failure = std::make_exception_ptr(ProtocolError(std::string("invalid JSON: ") + e.what()));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure)
    co_return error_answer(failure);
  TempDir scratch;
  std::optional<FileAnswer> file;
  try {
    scratch = TempDir::create_in(state->upload_dir().string(), "rex-download-");
    const auto copy = std::filesystem::path(scratch.path()) / "content";
    DownloadRequest request;
    request.path = std::move(query.path);
    request.target_path = copy.string();
    co_await state->runtime.download(std::move(request));
    auto prepare = [copy, format = std::move(query.format)] { return open_download(copy, format); };
    file = co_await detail::offload(state->files, state->ex, std::move(prepare));
  } catch (...) {
    failure = std::current_exception();
  }
  if (scratch) {
    // A whole tree may be there: removed off the io_context.
    auto remove = [dir = std::move(scratch)]() mutable {
      dir.remove();
      return true;
    };
    co_await detail::offload(state->files, state->ex, std::move(remove));
  }
  if (file)
    co_return std::move(*file);
  co_return error_answer(failure);
}

FileRoute download_route(const std::shared_ptr<State>& state) {
  return [state](Request request) { return download(state, std::move(request.body)); };
}

}  // namespace

Answer swerex_error_answer(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const ProtocolError& e) {
    return validation_answer(e.what());
  } catch (const SwerexException& e) {
    return exception_answer(e);
  } catch (const std::exception& e) {
    return exception_answer(SwerexException(e.what()));
  }
}

RouteTable swerex_routes(asio::any_io_executor executor, Runtime& runtime,
                         const ServerConfig& config, asio::thread_pool* file_threads) {
  auto state = std::make_shared<State>(std::move(executor), runtime, config, file_threads);
  using bhttp::verb;
  RouteTable routes;
  routes.add(verb::get, "/", json_route(state, hello));
  routes.add(verb::get, "/is_alive", json_route(state, is_alive));
  routes.add(verb::post, "/create_session", json_route(state, create_session));
  routes.add(verb::post, "/run_in_session", json_route(state, run_in_session));
  routes.add(verb::post, "/run_in_session_stream", stream_route(state));
  routes.add(verb::post, "/close_session", json_route(state, close_session));
  routes.add(verb::post, "/execute", json_route(state, execute));
  routes.add(verb::post, "/read_file", json_route(state, read_file));
  routes.add(verb::post, "/write_file", json_route(state, write_file));
  routes.add(verb::post, "/upload", upload_route(state));
  routes.add(verb::post, "/download", download_route(state));
  routes.add(verb::post, "/close", json_route(state, close_runtime));
  routes.add(verb::post, "/processes/start", process_stream_route<ProcessConfig>(state));
  routes.add(verb::post, "/processes/connect", process_stream_route<ProcessSelector>(state));
  routes.add(verb::get, "/processes", json_route(state, list_processes));
  routes.add(verb::post, "/processes/input", json_route(state, process_input));
  routes.add(verb::post, "/processes/signal", json_route(state, process_signal));
  routes.add(verb::post, "/processes/resize", json_route(state, process_resize));
  routes.add(verb::post, "/session_input", json_route(state, session_input));
  routes.add(verb::post, "/sessions/attach", process_stream_route<SessionAttach>(state));
  routes.add(verb::post, "/sessions/resize", json_route(state, resize_session));
  routes.add(verb::post, "/sessions/capture", json_route(state, capture_sessions));
  routes.add(verb::post, "/sessions/restore", json_route(state, restore_sessions));
  return routes;
}

}  // namespace rex::server
