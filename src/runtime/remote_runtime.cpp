#include <rex/runtime/remote_runtime.hpp>

#include <rex/core/random.hpp>
#include <rex/core/temp_file.hpp>
#include <rex/core/text.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/multipart.hpp>
#include <rex/http/retry_policy.hpp>
#include <rex/http/sse.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/file_ops.hpp>

#include "core/file_system.hpp"
#include "core/offload.hpp"
#include "runtime/forward_link.hpp"

#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <optional>

namespace rex {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

constexpr std::size_t kBodyExcerpt = 1000;  // of an error body, in a message
constexpr auto kDownloadKindHeader = "X-Rex-Download-Kind";

// A duration in seconds from the wire (a double), clamped to what a timer can hold.
Milliseconds from_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0)
    return Milliseconds(0);
  constexpr double kMax = 10.0 * 365 * 24 * 3600;
  return Milliseconds(static_cast<std::int64_t>(std::ceil(std::min(seconds, kMax) * 1000.0)));
}

std::string excerpt(std::string_view body) {
  if (body.size() <= kBodyExcerpt)
    return std::string(body);
  return fmt::format("{}... ({} bytes)", body.substr(0, kBodyExcerpt), body.size());
}

// Creates an empty file beside `target` (its parent directories first), named so that it is
// hidden and cannot collide: the download lands there before it is moved into place.
TempFile create_temp_beside(const std::string& target) {
  detail::reject_nul(target);
  const std::string path = detail::normalize_path(target);
  detail::make_dirs(detail::split_path(path).first);
  std::error_code error;
  TempFile file = TempFile::create_beside(path, "rex-download", error);
  if (error)
    throw_os_error(error.value(), path);
  file.close();  // the HTTP client opens it by name
  return file;
}

struct PreparedUpload {
  TempDir scratch{};
  std::string body_path{};
  std::string content_type{};
};

// Builds the multipart body SWE-ReX's server expects: a file as is, a directory zipped.
PreparedUpload prepare_upload(const UploadRequest& request) {
  detail::reject_nul(request.source_path);
  struct stat st {};
  if (::stat(request.source_path.c_str(), &st) != 0)
    throw_os_error(errno, request.source_path);
  const bool directory = S_ISDIR(st.st_mode);
  if (!directory && !S_ISREG(st.st_mode)) {
    throw ValueError(
        fmt::format("Source path {} is not a file or directory", python_repr(request.source_path)));
  }
  PreparedUpload out;
  out.scratch =
      TempDir::create_in(std::filesystem::temp_directory_path().string(), "rex-transfer-");
  http::MultipartFile file;
  file.name = "file";
  if (directory) {
    const std::string zip = detail::join_path(out.scratch.path(), "zipped_transfer.zip");
    create_archive(request.source_path, zip, ArchiveFormat::zip);
    file.filename = "zipped_transfer.zip";
    file.path = zip;
    file.content_type = "application/zip";
  } else {
    file.filename = detail::split_path(detail::normalize_path(request.source_path)).second;
    file.path = request.source_path;
    file.content_type = "application/octet-stream";
  }
  const bool unzip = directory || request.unzip;
  const std::vector<http::MultipartField> fields{
      {.name = "target_path", .value = request.target_path},
      {.name = "unzip", .value = unzip ? "true" : "false"}};
  out.body_path = detail::join_path(out.scratch.path(), "body");
  out.content_type = http::write_multipart_body(out.body_path, fields, file);
  return out;
}

void move_into_place(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw_os_error(errno, to);
}

// The "error" event of a stream: the same body a 511 (a runtime exception) or 422 (a bad
// request) answer would carry, thrown as that answer would be.
[[noreturn]] void throw_stream_error(const json::value& error, const std::string& url) {
  const json::object* o = error.if_object();
  const json::value* transfer = o ? o->if_contains("swerexception") : nullptr;
  if (transfer != nullptr && transfer->is_object())
    throw_wire(transfer->as_object());
  const std::string text = json::serialize(error);
  throw http::HttpError(fmt::format("POST {} reported an error: {}", url, excerpt(text)), 422, url,
                        text);
}

}  // namespace

struct RemoteRuntime::Impl {
  Impl(asio::any_io_executor executor, RemoteRuntimeConfig config)
      : ex(std::move(executor)), cfg(std::move(config)), client(ex, cfg.url, cfg.client) {}

  ~Impl() {
    if (files)
      files->join();
  }

  // forward()'s own connection, made at its first use where a link can serve the URL.
  detail::ForwardLink* forward_link() {
    if (!link_checked) {
      link_checked = true;
      if (detail::ForwardLink::serves(client.base_url(), cfg.client)) {
        detail::ForwardLink::Headers fixed;
        if (!cfg.auth_token.empty())
          fixed.emplace_back("X-API-Key", cfg.auth_token);
        fixed.emplace_back("Accept", "application/json");
        link.emplace(ex, client.base_url(), cfg.client, std::move(fixed));
      }
    }
    return link ? &*link : nullptr;
  }

  template <class F>
  asio::awaitable<std::invoke_result_t<F>> offload(F work) {
    // Started on first use: most runtimes never transfer a file, and a harness may hold
    // hundreds of them.
    if (!files)
      files.emplace(std::max<std::size_t>(cfg.file_threads, 1));
    return detail::offload(*files, ex, std::move(work));
  }

  // A fresh id in a UUID's form, from a generator seeded once per thread (ids, not secrets):
  // a runtime costs no seeding of its own.
  static std::string request_id() {
    std::string id = unique_hex(16);
    for (const std::size_t at : {20, 16, 12, 8})
      id.insert(at, 1, '-');
    return id;
  }

  // Headers of every call: the token, and an idempotency key that retries reuse.
  std::vector<std::pair<std::string, std::string>> headers(std::string id = request_id()) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!cfg.auth_token.empty())
      out.emplace_back("X-API-Key", cfg.auth_token);
    out.emplace_back("X-Request-ID", std::move(id));
    return out;
  }

  // A call of the protocol with `body` (JSON text; none when empty).
  http::ClientRequest json_request(const char* method, std::string target, std::string body,
                                   Clock::duration timeout, std::string id = request_id()) {
    http::ClientRequest r;
    r.method = method;
    r.target = std::move(target);
    r.headers = headers(std::move(id));
    r.headers.emplace_back("Accept", "application/json");
    if (!body.empty())
      r.headers.emplace_back("Content-Type", "application/json");
    r.body = std::move(body);
    r.timeout = timeout;
    return r;
  }

  http::ClientRequest post(const char* target, const json::value* body, Clock::duration timeout) {
    return json_request("POST", target, body != nullptr ? json::serialize(*body) : std::string(),
                        timeout);
  }

  // Raises what a non-2xx answer means: the transferred exception of a 511, else HttpError.
  void check(const http::ClientRequest& request, const http::ClientResponse& response) const {
    if (response.status / 100 == 2)
      return;
    const std::string url = client.url_of(request.target);
    if (response.status == 511) {
      json::error_code ec;
      const json::value body = json::parse(response.body, ec);
      const json::object* wire = nullptr;
      if (!ec && body.is_object()) {
        if (const auto* transfer = body.as_object().if_contains("swerexception"))
          wire = transfer->if_object();
      }
      if (wire != nullptr)
        throw_wire(*wire);
    }
    throw http::HttpError(fmt::format("{} {} answered HTTP {}: {}", request.method, url,
                                      response.status, excerpt(response.body)),
                          response.status, url, response.body);
  }

  template <class T>
  T decode(const http::ClientRequest& request, const http::ClientResponse& response) const {
    try {
      return parse_json<T>(response.body);
    } catch (const ProtocolError& e) {
      const std::string url = client.url_of(request.target);
      throw http::HttpError(
          fmt::format("{} {} answered HTTP {} with an invalid body ({}): {}", request.method, url,
                      response.status, e.what(), excerpt(response.body)),
          response.status, url, response.body);
    }
  }

  // `target` is a literal: no string temporaries around co_await (g++ 12).
  template <class T>
  asio::awaitable<T> call_raw(const char* target, const json::value* body,
                              Clock::duration timeout) {
    http::ClientRequest request = post(target, body, timeout);
    const http::ClientResponse response = co_await client.request(request);
    check(request, response);
    co_return decode<T>(request, response);
  }

  template <class T, class Request>
  asio::awaitable<T> call(const char* target, const Request& body, Clock::duration timeout) {
    const json::value encoded = to_json(body);
    co_return co_await call_raw<T>(target, &encoded, timeout);
  }

  // A call whose answer carries nothing but success.
  asio::awaitable<void> call_void(const char* target, json::value body) {
    http::ClientRequest request = post(target, &body, cfg.request_timeout);
    const http::ClientResponse response = co_await client.request(request);
    check(request, response);
  }

  // `what` names the feature for a server without the route ("background processes").
  asio::awaitable<std::optional<ProcessEnd>> follow_process(const char* target, json::value body,
                                                            ProcessListener on_event,
                                                            std::string_view what);

  // A command's own timeout plus the margin, or the long limit when it has none.
  Clock::duration command_timeout(const std::optional<double>& seconds) const {
    if (!seconds)
      return cfg.unbounded_command_timeout;
    return from_seconds(*seconds) + cfg.timeout_margin;
  }

  // An interrupt waits up to `timeout` after each of its attempts, then may kill.
  Clock::duration interrupt_timeout(double timeout, int n_retry) const {
    const double attempts = std::max(n_retry, 0) + 1.0;
    return from_seconds(timeout * attempts) + cfg.timeout_margin;
  }

  // A session's start: its startup timeout and the margin.
  Clock::duration startup_timeout(double seconds) const {
    return from_seconds(seconds) + cfg.timeout_margin;
  }

  asio::awaitable<IsAliveResponse> check_alive(Clock::duration timeout) {
    http::ClientRequest request;
    request.method = "GET";
    request.target = "/is_alive";
    request.headers = headers();
    request.timeout = timeout;
    request.retry = http::RetryPolicy{.max_retries = 0};
    std::string failure;
    try {
      const http::ClientResponse response = co_await client.request(request);
      if (response.status == 200)
        co_return decode<IsAliveResponse>(request, response);
      if (response.status == 511)
        check(request, response);
      json::error_code ec;
      const json::value body = json::parse(response.body, ec);
      const json::value* detail =
          !ec && body.is_object() ? body.as_object().if_contains("detail") : nullptr;
      const std::string message =
          detail != nullptr
              ? (detail->is_string() ? std::string(detail->as_string()) : json::serialize(*detail))
              : excerpt(response.body);
      failure = fmt::format("Status code {} from {}. Message: {}", response.status,
                            client.url_of(request.target), message);
    } catch (const http::ConnectionError& e) {
      failure = e.what();
    } catch (const http::RequestTimeoutError& e) {
      failure = e.what();
    }
    co_return IsAliveResponse{.is_alive = false, .message = std::move(failure)};
  }

  asio::any_io_executor ex;
  RemoteRuntimeConfig cfg;
  http::Client client;
  std::optional<asio::thread_pool> files;
  bool streaming_unsupported = false;  // the server answered 404 to /run_in_session_stream
  bool link_checked = false;
  std::optional<detail::ForwardLink> link;
};

RemoteRuntime::RemoteRuntime(asio::any_io_executor executor, RemoteRuntimeConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(config))) {}

RemoteRuntime::~RemoteRuntime() = default;

const RemoteRuntimeConfig& RemoteRuntime::config() const noexcept {
  return impl_->cfg;
}

const http::Client& RemoteRuntime::client() const noexcept {
  return impl_->client;
}

void RemoteRuntime::close_idle_connections() noexcept {
  impl_->client.close_idle_connections();
  if (impl_->link && !impl_->link->busy())
    impl_->link->close();
}

asio::awaitable<IsAliveResponse> RemoteRuntime::is_alive() {
  co_return co_await impl_->check_alive(impl_->cfg.is_alive_timeout);
}

asio::awaitable<void> RemoteRuntime::wait_until_alive(Clock::duration timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string last;
  while (true) {
    const auto left = std::max<Clock::duration>(deadline - Clock::now(), Milliseconds(1));
    const auto check_timeout = std::min<Clock::duration>(impl_->cfg.is_alive_timeout, left);
    const IsAliveResponse answer = co_await impl_->check_alive(check_timeout);
    if (answer.is_alive)
      co_return;
    last = answer.message;
    const auto now = Clock::now();
    if (now >= deadline)
      break;
    asio::steady_timer pause(impl_->ex,
                             std::min<Clock::duration>(impl_->cfg.poll_interval, deadline - now));
    co_await pause.async_wait(asio::use_awaitable);
  }
  const std::string url = impl_->client.url_of("/is_alive");
  throw http::RequestTimeoutError(
      fmt::format("{} did not answer is_alive=true within {}; the last check said: {}",
                  impl_->client.base_url().text, seconds_text(timeout), last),
      json::object{{"url", url}, {"timeout", std::chrono::duration<double>(timeout).count()}});
}

asio::awaitable<CreateBashSessionResponse> RemoteRuntime::create_session(
    CreateBashSessionRequest request) {
  const auto timeout = impl_->startup_timeout(request.startup_timeout);
  co_return co_await impl_->call<CreateBashSessionResponse>("/create_session", request, timeout);
}

asio::awaitable<BashObservation> RemoteRuntime::run_in_session(Action action) {
  Clock::duration timeout{};
  if (const auto* bash = std::get_if<BashAction>(&action)) {
    timeout = impl_->command_timeout(bash->timeout);
  } else {
    const auto& interrupt = std::get<BashInterruptAction>(action);
    timeout = impl_->interrupt_timeout(interrupt.timeout, interrupt.n_retry);
  }
  co_return co_await impl_->call<BashObservation>("/run_in_session", action, timeout);
}

asio::awaitable<BashObservation> RemoteRuntime::run_in_session_streaming(Action action,
                                                                         OutputListener on_output) {
  if (!on_output || impl_->streaming_unsupported ||
      std::holds_alternative<BashInterruptAction>(action))
    co_return co_await run_in_session(std::move(action));
  const auto timeout = impl_->command_timeout(std::get<BashAction>(action).timeout);
  const json::value encoded = to_json(action);
  http::ClientRequest request = impl_->post("/run_in_session_stream", &encoded, timeout);
  std::optional<BashObservation> observation;
  std::optional<json::value> error;
  std::string bad_event;
  http::SseParser parser;
  std::vector<http::SseEvent> events;  // those one piece completed
  auto handle = [&](const std::string& event, const std::string& data) {
    json::error_code ec;
    json::value value = json::parse(data, ec);
    if (ec) {
      bad_event = fmt::format("event {} with invalid JSON: {}", event, excerpt(data));
      return;
    }
    if (event == "output") {
      const json::value* text =
          value.is_object() ? value.as_object().if_contains("output") : nullptr;
      if (text != nullptr && text->is_string())
        on_output(std::string_view(text->as_string()));
    } else if (event == "observation") {
      try {
        observation = from_json<BashObservation>(value);
      } catch (const ProtocolError& e) {
        bad_event = fmt::format("observation event that does not decode: {}", e.what());
      }
    } else if (event == "error") {
      error = std::move(value);
    }
  };
  request.on_body = [&](std::string_view piece) {
    events.clear();
    parser.feed(piece, events);
    for (const auto& e : events)
      handle(e.event, e.data);
  };
  const http::ClientResponse response = co_await impl_->client.request(request);
  if (response.status == 404 || response.status == 405) {
    impl_->streaming_unsupported = true;
    co_return co_await run_in_session(std::move(action));
  }
  impl_->check(request, response);
  const std::string url = impl_->client.url_of(request.target);
  if (error)
    throw_stream_error(*error, url);
  if (!observation)
    throw http::HttpError(fmt::format("POST {} ended its event stream without an observation{}{}",
                                      url, bad_event.empty() ? "" : ": ", bad_event),
                          response.status, url, "");
  co_return std::move(*observation);
}

asio::awaitable<CloseBashSessionResponse> RemoteRuntime::close_session(
    CloseBashSessionRequest request) {
  const auto timeout = impl_->cfg.request_timeout;
  co_return co_await impl_->call<CloseBashSessionResponse>("/close_session", request, timeout);
}

asio::awaitable<CommandResponse> RemoteRuntime::execute(Command command) {
  const auto timeout = impl_->command_timeout(command.timeout);
  co_return co_await impl_->call<CommandResponse>("/execute", command, timeout);
}

asio::awaitable<ReadFileResponse> RemoteRuntime::read_file(ReadFileRequest request) {
  const auto timeout = impl_->cfg.request_timeout;
  co_return co_await impl_->call<ReadFileResponse>("/read_file", request, timeout);
}

asio::awaitable<WriteFileResponse> RemoteRuntime::write_file(WriteFileRequest request) {
  const auto timeout = impl_->cfg.request_timeout;
  co_return co_await impl_->call<WriteFileResponse>("/write_file", request, timeout);
}

asio::awaitable<UploadResponse> RemoteRuntime::upload(UploadRequest request) {
  auto work = [r = std::move(request)] { return prepare_upload(r); };
  const PreparedUpload prepared = co_await impl_->offload(std::move(work));
  http::ClientRequest post = impl_->post("/upload", nullptr, impl_->cfg.transfer_timeout);
  post.headers.emplace_back("Content-Type", prepared.content_type);
  post.body_file = prepared.body_path;
  const http::ClientResponse response = co_await impl_->client.request(post);
  impl_->check(post, response);
  co_return impl_->decode<UploadResponse>(post, response);
}

asio::awaitable<DownloadResponse> RemoteRuntime::download(DownloadRequest request) {
  auto make_temp = [target = request.target_path] { return create_temp_beside(target); };
  TempFile temp = co_await impl_->offload(std::move(make_temp));
  const json::value body{{"path", request.path}, {"format", "tar"}};
  http::ClientRequest post = impl_->post("/download", &body, impl_->cfg.transfer_timeout);
  post.response_file = temp.path();
  const http::ClientResponse response = co_await impl_->client.request(post);
  impl_->check(post, response);
  const std::string kind(response.header(kDownloadKindHeader).value_or(""));
  if (kind == "file") {
    auto work = [from = temp.path(), to = request.target_path] {
      move_into_place(from, to);
      return true;
    };
    co_await impl_->offload(std::move(work));
    temp.release();
  } else if (kind == "directory") {
    auto work = [from = temp.path(), to = request.target_path] {
      extract_archive(from, to);
      return true;
    };
    co_await impl_->offload(std::move(work));
  } else {
    const std::string url = impl_->client.url_of(post.target);
    throw http::HttpError(
        fmt::format("POST {} answered HTTP {} without a valid {} header (got '{}')", url,
                    response.status, kDownloadKindHeader, kind),
        response.status, url, "");
  }
  co_return DownloadResponse{};
}

asio::awaitable<CloseResponse> RemoteRuntime::close() {
  const auto timeout = impl_->cfg.request_timeout;
  co_return co_await impl_->call_raw<CloseResponse>("/close", nullptr, timeout);
}

// --- background processes --------------------------------------------------------------------

namespace {

// Thrown from inside a process stream's body callback when its listener stops listening: it
// ends the request (and closes its connection) without being an error.
struct StopListening {};

}  // namespace

// A process stream of /processes/start or /processes/connect: its events to `on_event` as they
// come, until "end" (returned), "error" (thrown as the runtime's exception), or the listener
// stops (none).
asio::awaitable<std::optional<ProcessEnd>> RemoteRuntime::Impl::follow_process(
    const char* target, json::value body, ProcessListener on_event, std::string_view what) {
  // A process may run for as long as its sandbox: the stream has no limit of its own.
  http::ClientRequest request = post(target, &body, std::chrono::hours(24 * 365));
  request.retry = http::RetryPolicy{.max_retries = 0};  // a retried start would start another
  std::optional<ProcessEnd> end;
  std::optional<json::value> error;
  std::string bad_event;
  http::SseParser parser;
  std::vector<http::SseEvent> events;
  auto handle = [&](const http::SseEvent& e) {
    json::error_code ec;
    json::value value = json::parse(e.data, ec);
    if (ec || !value.is_object()) {
      bad_event = fmt::format("event {} with invalid JSON: {}", e.event, excerpt(e.data));
      return;
    }
    const json::object& o = value.as_object();
    ProcessEvent event;
    if (e.event == "start") {
      const json::value* pid = o.if_contains("pid");
      if (pid == nullptr || !pid->is_int64()) {
        bad_event = "a start event without a pid";
        return;
      }
      event.kind = ProcessEvent::Kind::started;
      event.pid = static_cast<long>(pid->as_int64());
    } else if (e.event == "stdout" || e.event == "stderr") {
      const json::value* data = o.if_contains("data");
      Base64Decoded bytes = data != nullptr && data->is_string() ? base64_decode(data->as_string())
                                                                 : Base64Decoded{{}, "no data"};
      if (!bytes.error.empty()) {
        bad_event = fmt::format("a {} event whose data is {}", e.event, bytes.error);
        return;
      }
      event.kind =
          e.event == "stdout" ? ProcessEvent::Kind::stdout_data : ProcessEvent::Kind::stderr_data;
      event.data = std::move(bytes.bytes);
    } else if (e.event == "keepalive") {
      event.kind = ProcessEvent::Kind::keepalive;
    } else if (e.event == "end") {
      try {
        end = from_json<ProcessEnd>(value);
      } catch (const ProtocolError& x) {
        bad_event = fmt::format("an end event that does not decode: {}", x.what());
      }
      return;
    } else {
      if (e.event == "error")
        error = std::move(value);
      return;
    }
    if (!on_event(event))
      throw StopListening{};
  };
  request.on_body = [&](std::string_view piece) {
    events.clear();
    parser.feed(piece, events);
    for (const auto& e : events)
      handle(e);
  };
  http::ClientResponse response;
  bool stopped = false;
  try {
    response = co_await client.request(request);
  } catch (const StopListening&) {
    stopped = true;
  }
  if (stopped)
    co_return std::nullopt;
  if (response.status == 404 || response.status == 405)
    throw ProcessesUnsupportedError(fmt::format(
        "{} has no {} (HTTP {} to {})", client.base_url().text, what, response.status, target));
  check(request, response);
  const std::string url = client.url_of(request.target);
  if (error)
    throw_stream_error(*error, url);
  if (!end)
    throw http::HttpError(fmt::format("POST {} ended its event stream without an end{}{}", url,
                                      bad_event.empty() ? "" : ": ", bad_event),
                          response.status, url, "");
  co_return end;
}

asio::awaitable<std::optional<ProcessEnd>> RemoteRuntime::start_process(ProcessConfig config,
                                                                        ProcessListener on_event) {
  json::value body = to_json(config);
  co_return co_await impl_->follow_process("/processes/start", std::move(body), std::move(on_event),
                                           "background processes");
}

asio::awaitable<std::optional<ProcessEnd>> RemoteRuntime::connect_process(
    ProcessSelector which, ProcessListener on_event) {
  json::value body = to_json(which);
  co_return co_await impl_->follow_process("/processes/connect", std::move(body),
                                           std::move(on_event), "background processes");
}

asio::awaitable<ProcessListResponse> RemoteRuntime::list_processes() {
  http::ClientRequest request;
  request.method = "GET";
  request.target = "/processes";
  request.headers = impl_->headers();
  request.timeout = impl_->cfg.request_timeout;
  const http::ClientResponse response = co_await impl_->client.request(request);
  impl_->check(request, response);
  co_return impl_->decode<ProcessListResponse>(request, response);
}

asio::awaitable<void> RemoteRuntime::send_process_input(ProcessInput input) {
  input.data = base64_encode(input.data);
  json::value body = to_json(input);
  co_await impl_->call_void("/processes/input", std::move(body));
}

asio::awaitable<void> RemoteRuntime::signal_process(ProcessSignal signal) {
  json::value body = to_json(signal);
  co_await impl_->call_void("/processes/signal", std::move(body));
}

asio::awaitable<void> RemoteRuntime::resize_process(ProcessResize resize) {
  json::value body = to_json(resize);
  co_await impl_->call_void("/processes/resize", std::move(body));
}

asio::awaitable<void> RemoteRuntime::send_session_input(SessionInput input) {
  json::value body = to_json(input);
  co_await impl_->call_void("/session_input", std::move(body));
}

asio::awaitable<std::optional<ProcessEnd>> RemoteRuntime::attach_session(SessionAttach attach,
                                                                         ProcessListener on_event) {
  json::value body = to_json(attach);
  co_return co_await impl_->follow_process("/sessions/attach", std::move(body), std::move(on_event),
                                           "terminals for its sessions");
}

asio::awaitable<void> RemoteRuntime::resize_session(SessionResize resize) {
  json::value body = to_json(resize);
  co_await impl_->call_void("/sessions/resize", std::move(body));
}

asio::awaitable<CaptureSessionsResponse> RemoteRuntime::capture_sessions(
    CaptureSessionsRequest request) {
  const auto timeout =
      request.sessions.empty()
          ? impl_->cfg.unbounded_command_timeout
          : impl_->command_timeout(request.timeout * static_cast<double>(request.sessions.size()));
  co_return co_await impl_->call<CaptureSessionsResponse>("/sessions/capture", request, timeout);
}

asio::awaitable<RestoreSessionsResponse> RemoteRuntime::restore_sessions(
    RestoreSessionsRequest request) {
  const auto timeout = impl_->command_timeout(
      request.timeout * static_cast<double>(std::max<std::size_t>(request.sessions.size(), 1)));
  co_return co_await impl_->call<RestoreSessionsResponse>("/sessions/restore", request, timeout);
}

asio::awaitable<void> RemoteRuntime::set_max_lifetime(double seconds) {
  json::object body;
  body["max_lifetime"] = seconds;
  co_await impl_->call_void("/lifetime", json::value(std::move(body)));
}

asio::awaitable<http::ClientResponse> RemoteRuntime::forward(const char* method, std::string target,
                                                             std::string body,
                                                             const json::value* parsed,
                                                             std::string request_id) {
  Impl& s = *impl_;
  // The limit the typed call sets: a command's own timeout and the margin, or the long limit.
  const json::object* fields = parsed != nullptr ? parsed->if_object() : nullptr;
  auto number = [fields](std::string_view key) -> std::optional<double> {
    const json::value* v = fields != nullptr ? fields->if_contains(key) : nullptr;
    if (v == nullptr || !v->is_number())
      return std::nullopt;
    return v->to_number<double>();
  };
  Clock::duration timeout = s.cfg.request_timeout;
  if (target == "/run_in_session" || target == "/execute") {
    timeout = s.command_timeout(number("timeout"));
    const json::value* type = fields != nullptr ? fields->if_contains("action_type") : nullptr;
    const BashInterruptAction interrupt;
    if (type != nullptr && type->is_string() && type->get_string() == interrupt.action_type) {
      const double n_retry = number("n_retry").value_or(interrupt.n_retry);
      timeout = s.interrupt_timeout(number("timeout").value_or(interrupt.timeout),
                                    static_cast<int>(std::clamp(n_retry, -1.0, 1e6)));
    }
  } else if (target == "/create_session") {
    timeout = s.startup_timeout(
        number("startup_timeout").value_or(CreateBashSessionRequest{}.startup_timeout));
  }
  // One call at a time goes on the runtime's own link; others, and one the link leaves (its
  // connection found closed), go by the client.
  if (detail::ForwardLink* link = s.forward_link(); link != nullptr && !link->busy()) {
    std::optional<http::ClientResponse> got =
        co_await link->call(method, target, request_id, body, timeout);
    if (got)
      co_return std::move(*got);
  }
  http::ClientRequest request =
      s.json_request(method, std::move(target), std::move(body), timeout, std::move(request_id));
  co_return co_await s.client.request(std::move(request));
}

}  // namespace rex
