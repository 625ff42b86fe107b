#include <rex/server/server.hpp>

#include <rex/http/multipart.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/file_ops.hpp>
#include <rex/session/output.hpp>
#include <rex/version.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <deque>
#include <filesystem>
#include <list>
#include <map>
#include <system_error>

#include "core/file_system.hpp"
#include "core/offload.hpp"
#include "server/replay_cache.hpp"

namespace rex::server {

using http::multipart_boundary;
using http::MultipartError;
using http::MultipartParser;
using http::MultipartPartHeaders;

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;
using namespace std::chrono_literals;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

const std::string& server_name() {
  static const std::string name = fmt::format("rex-server/{}", rex::version());
  return name;
}

// --- Routes --------------------------------------------------------------------------------

enum class Route {
  root,
  is_alive,
  create_session,
  run_in_session,
  run_stream,
  close_session,
  execute,
  read_file,
  write_file,
  upload,
  download,
  close,
};

struct RouteInfo {
  std::string_view path;
  Route route;
  bhttp::verb method;
};

constexpr RouteInfo kRoutes[] = {
    {"/", Route::root, bhttp::verb::get},
    {"/is_alive", Route::is_alive, bhttp::verb::get},
    {"/create_session", Route::create_session, bhttp::verb::post},
    {"/run_in_session", Route::run_in_session, bhttp::verb::post},
    {"/run_in_session_stream", Route::run_stream, bhttp::verb::post},
    {"/close_session", Route::close_session, bhttp::verb::post},
    {"/execute", Route::execute, bhttp::verb::post},
    {"/read_file", Route::read_file, bhttp::verb::post},
    {"/write_file", Route::write_file, bhttp::verb::post},
    {"/upload", Route::upload, bhttp::verb::post},
    {"/download", Route::download, bhttp::verb::post},
    {"/close", Route::close, bhttp::verb::post},
};

const RouteInfo* find_route(std::string_view target) {
  const auto query = target.find('?');
  if (query != std::string_view::npos)
    target = target.substr(0, query);
  for (const auto& r : kRoutes) {
    if (r.path == target)
      return &r;
  }
  return nullptr;
}

// --- Answers -------------------------------------------------------------------------------

StoredResponse json_answer(unsigned status, const json::value& body) {
  StoredResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = json::serialize(body);
  return r;
}

StoredResponse detail_answer(unsigned status, std::string_view detail) {
  json::object body;
  body["detail"] = detail;
  return json_answer(status, body);
}

StoredResponse exception_answer(const SwerexException& e) {
  json::object body;
  body["swerexception"] = to_wire(e);
  return json_answer(511, body);
}

// FastAPI's shape for a request that does not validate:
// {"detail":[{"type":..., "loc":["body", field...], "msg":..., "input":null}]}.
StoredResponse validation_answer(std::string_view message) {
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

// The answer for an exception a request raised: 422 for a body that does not fit its type, 511
// (exception transfer) for everything else.
StoredResponse error_answer(std::exception_ptr error) {
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

// A file in the upload directory, removed when this goes away.
class TempFile {
 public:
  explicit TempFile(const std::filesystem::path& dir, const char* prefix) {
    std::string pattern = (dir / (std::string(prefix) + "XXXXXX")).string();
    fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
    if (fd_ < 0)
      throw_os_error(errno, dir.string());
    path_ = pattern;
  }
  ~TempFile() {
    close();
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const noexcept { return fd_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  void close() noexcept {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// FastAPI's reading of a boolean form field.
std::optional<bool> form_bool(std::string_view v) {
  std::string s(v);
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "true" || s == "1" || s == "yes" || s == "on" || s == "y" || s == "t")
    return true;
  if (s == "false" || s == "0" || s == "no" || s == "off" || s == "n" || s == "f")
    return false;
  return std::nullopt;
}

// A file to send as the answer's body (downloads).
struct FileAnswer {
  bhttp::file_body::value_type body;
  std::string kind;  // "file" or "directory"
  std::string content_type;
};

// One Server-Sent Event.
std::string sse_event(std::string_view name, const json::value& data) {
  return fmt::format("event: {}\ndata: {}\n\n", name, json::serialize(data));
}

// Events of a streamed run, from the command (producer) to the connection (consumer).
struct EventQueue {
  explicit EventQueue(asio::any_io_executor ex) : wake(std::move(ex)) {
    wake.expires_at(asio::steady_timer::time_point::max());
  }
  void push(std::string event) {
    events.push_back(std::move(event));
    wake.cancel();
  }
  std::deque<std::string> events;
  bool finished = false;
  asio::steady_timer wake;  // cancelled on every push
};

// Constant-time comparison: the time taken does not depend on where the strings differ.
bool same_token(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const auto y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// --- A mutex for coroutines: FIFO, single-threaded ------------------------------------------

class AsyncMutex {
 public:
  asio::awaitable<void> lock() {
    if (!locked_) {
      locked_ = true;
      co_return;
    }
    Waiter w(co_await asio::this_coro::executor);
    waiters_.push_back(&w);
    // If this coroutine is destroyed while queued, the waiter leaves the queue.
    struct Leave {
      AsyncMutex& m;
      Waiter& w;
      ~Leave() {
        if (!w.granted)
          std::erase(m.waiters_, &w);
      }
    } leave{*this, w};
    while (!w.granted)
      co_await w.timer.async_wait(use_tuple);
  }

  void unlock() {
    if (waiters_.empty()) {
      locked_ = false;
      return;
    }
    Waiter* next = waiters_.front();
    waiters_.pop_front();
    next->granted = true;  // ownership passes on; locked_ stays true
    next->timer.cancel();
  }

  bool idle() const noexcept { return !locked_ && waiters_.empty(); }

 private:
  struct Waiter {
    explicit Waiter(asio::any_io_executor ex) : timer(std::move(ex)) {
      timer.expires_at(asio::steady_timer::time_point::max());
    }
    asio::steady_timer timer;
    bool granted = false;
  };
  bool locked_ = false;
  std::deque<Waiter*> waiters_;
};

template <class Protocol>
using Stream = beast::basic_stream<Protocol, asio::any_io_executor, beast::unlimited_rate_policy>;

}  // namespace

// --- The server ----------------------------------------------------------------------------

struct Server::Impl : std::enable_shared_from_this<Server::Impl> {
  Impl(asio::any_io_executor executor, Runtime& rt, ServerConfig config)
      : ex(std::move(executor)),
        runtime(rt),
        cfg(std::move(config)),
        replay(cfg.request_id_cache),
        files(std::max<std::size_t>(cfg.file_threads, 1)),
        tcp_acceptor(ex),
        unix_acceptor(ex),
        drained(ex),
        trim(ex) {
    drained.expires_at(asio::steady_timer::time_point::max());
  }

  ~Impl() { files.join(); }

  // One open connection, as stop() sees it.
  struct Connection {
    std::function<void()> close;  // cancels its I/O
    bool busy = false;            // a request is being answered
  };

  void listen();
  void stop();

  template <class Protocol>
  static asio::awaitable<void> accept_loop(
      std::shared_ptr<Impl> self,
      asio::basic_socket_acceptor<Protocol, asio::any_io_executor>& acc);

  template <class Protocol>
  static asio::awaitable<void> serve(std::shared_ptr<Impl> self, typename Protocol::socket socket);

  template <class Protocol>
  static asio::awaitable<void> refuse(std::shared_ptr<Impl> self, typename Protocol::socket socket);

  template <class S>
  asio::awaitable<bool> serve_one(S& stream, beast::flat_buffer& buffer, Connection& conn);

  template <class S>
  asio::awaitable<StoredResponse> receive_upload(S& stream, beast::flat_buffer& buffer,
                                                 bhttp::request_parser<bhttp::empty_body>& head,
                                                 bool& keep_alive);
  asio::awaitable<StoredResponse> prepare_download(std::string body,
                                                   std::optional<FileAnswer>& file);
  std::filesystem::path upload_dir() const {
    return cfg.upload_dir.empty() ? std::filesystem::temp_directory_path()
                                  : std::filesystem::path(cfg.upload_dir);
  }

  asio::awaitable<StoredResponse> answer(const RouteInfo& route, std::string body);
  asio::awaitable<StoredResponse> answer_replayable(const RouteInfo& route, std::string body,
                                                    std::string request_key);
  asio::awaitable<json::value> run_route(Route route, std::string body);
  asio::awaitable<BashObservation> run_in_lane(Action action, Runtime::OutputListener on_output);
  template <class S>
  asio::awaitable<bool> stream_run(S& stream, Action action, unsigned version, bool keep_alive);
  static asio::awaitable<void> run_for_stream(std::shared_ptr<Impl> self,
                                              std::shared_ptr<EventQueue> queue, Action action);

  void connection_ended(std::list<Connection>::iterator it) {
    connections.erase(it);
    if (connections.empty()) {
      drained.cancel();
      schedule_trim();
    }
  }

  // A burst of connections leaves freed memory cached in the allocator's arenas; once the
  // server has been without connections for cfg.trim_memory_after it is handed back to the
  // system, so a long-running server's RSS returns to its idle size. At most once per period.
  void schedule_trim() {
    if (trim_pending || stopping || cfg.trim_memory_after.count() <= 0)
      return;
    trim_pending = true;
    trim.expires_after(cfg.trim_memory_after);
    trim.async_wait([w = weak_from_this()](const boost::system::error_code& ec) {
      auto self = w.lock();
      if (!self)
        return;
      self->trim_pending = false;
      if (!ec && !self->stopping && self->connections.empty())
        ::malloc_trim(0);
    });
  }

  asio::any_io_executor ex;
  Runtime& runtime;
  ServerConfig cfg;
  ReplayCache replay;
  asio::thread_pool files;
  tcp::acceptor tcp_acceptor;
  unix_socket::acceptor unix_acceptor;
  bool listening = false;
  bool stopping = false;
  std::list<Connection> connections;
  asio::steady_timer drained;  // cancelled whenever the last connection ends
  asio::steady_timer trim;     // see schedule_trim
  bool trim_pending = false;
  // Requests to one session queue here; the map drops a lane nobody uses.
  std::map<std::string, std::shared_ptr<AsyncMutex>> lanes;
};

void Server::Impl::listen() {
  if (listening)
    return;
  if (!cfg.unix_socket.empty()) {
    std::error_code ignored;
    // A socket file left by an earlier run would make bind fail.
    if (std::filesystem::is_socket(cfg.unix_socket, ignored))
      std::filesystem::remove(cfg.unix_socket, ignored);
    unix_socket::endpoint endpoint(cfg.unix_socket);
    unix_acceptor.open(endpoint.protocol());
    boost::system::error_code ec;
    unix_acceptor.bind(endpoint, ec);
    if (ec)
      throw std::system_error(ec, "cannot listen on unix socket " + cfg.unix_socket);
    unix_acceptor.listen(asio::socket_base::max_listen_connections);
  } else {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(cfg.host, ec);
    if (ec)
      throw std::system_error(ec, "invalid listen address " + cfg.host);
    tcp::endpoint endpoint(address, cfg.port);
    tcp_acceptor.open(endpoint.protocol());
    tcp_acceptor.set_option(asio::socket_base::reuse_address(true));
    tcp_acceptor.bind(endpoint, ec);
    if (ec)
      throw std::system_error(ec, fmt::format("cannot listen on {}:{}", cfg.host, cfg.port));
    tcp_acceptor.listen(asio::socket_base::max_listen_connections);
  }
  listening = true;
}

void Server::Impl::stop() {
  if (stopping)
    return;
  stopping = true;
  trim.cancel();
  boost::system::error_code ignored;
  tcp_acceptor.close(ignored);
  unix_acceptor.close(ignored);
  for (auto& c : connections) {
    if (!c.busy)
      c.close();
  }
  if (connections.empty())
    drained.cancel();
}

template <class Protocol>
asio::awaitable<void> Server::Impl::accept_loop(
    std::shared_ptr<Impl> self, asio::basic_socket_acceptor<Protocol, asio::any_io_executor>& acc) {
  while (!self->stopping) {
    auto [ec, socket] = co_await acc.async_accept(use_tuple);
    if (self->stopping)
      break;
    if (ec) {
      if (ec == asio::error::operation_aborted)
        break;
      // Out of descriptors, or the peer gave up before accept: pause briefly, carry on.
      spdlog::warn("rex-server: accept failed: {}", ec.message());
      asio::steady_timer pause(self->ex, 50ms);
      co_await pause.async_wait(use_tuple);
      continue;
    }
    auto handler = [](std::exception_ptr e) {
      if (!e)
        return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        spdlog::error("rex-server: connection ended with an error: {}", x.what());
      }
    };
    if (self->connections.size() >= self->cfg.max_connections) {
      asio::co_spawn(self->ex, refuse<Protocol>(self, std::move(socket)), handler);
    } else {
      asio::co_spawn(self->ex, serve<Protocol>(self, std::move(socket)), handler);
    }
  }
}

// Past the connection limit: a 503 with a JSON body, then close.
template <class Protocol>
asio::awaitable<void> Server::Impl::refuse(std::shared_ptr<Impl> self,
                                           typename Protocol::socket socket) {
  Stream<Protocol> stream(std::move(socket));
  stream.expires_after(5s);
  bhttp::response<bhttp::string_body> res(bhttp::status::service_unavailable, 11);
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::retry_after, "1");
  res.body() = detail_answer(503, "Too many connections").body;
  res.keep_alive(false);
  res.prepare_payload();
  auto [ec, n] = co_await bhttp::async_write(stream, res, use_tuple);
  (void)self;
  (void)n;
  if (!ec)
    stream.socket().shutdown(asio::socket_base::shutdown_both, ec);
}

template <class Protocol>
asio::awaitable<void> Server::Impl::serve(std::shared_ptr<Impl> self,
                                          typename Protocol::socket socket) {
  Stream<Protocol> stream(std::move(socket));
  if constexpr (std::is_same_v<Protocol, tcp>) {
    boost::system::error_code ignored;
    stream.socket().set_option(tcp::no_delay(true), ignored);
  }
  self->connections.emplace_back();
  auto it = std::prev(self->connections.end());
  it->close = [&stream] {
    boost::system::error_code ignored;
    stream.socket().cancel(ignored);
    stream.socket().close(ignored);
  };
  struct Untrack {
    Impl& impl;
    std::list<Connection>::iterator it;
    ~Untrack() { impl.connection_ended(it); }
  } untrack{*self, it};

  beast::flat_buffer buffer;
  while (!self->stopping) {
    const bool keep_alive = co_await self->serve_one(stream, buffer, *it);
    if (!keep_alive)
      break;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(asio::socket_base::shutdown_send, ignored);
  stream.socket().close(ignored);
}

// Reads one request and answers it. Returns whether the connection stays open.
template <class S>
asio::awaitable<bool> Server::Impl::serve_one(S& stream, beast::flat_buffer& buffer,
                                              Connection& conn) {
  bhttp::request_parser<bhttp::empty_body> head;
  head.header_limit(static_cast<std::uint32_t>(cfg.max_header_bytes));
  head.body_limit(cfg.max_body_bytes);

  // Waiting for a request: the idle timeout until its first byte, then the read timeout for the
  // whole header, so a client trickling bytes cannot hold the connection.
  if (buffer.size() == 0) {
    stream.expires_after(cfg.idle_timeout);
    auto [first_ec, first_n] = co_await stream.async_read_some(buffer.prepare(4096), use_tuple);
    if (first_ec)
      co_return false;  // the peer left, went quiet, or the server is stopping
    buffer.commit(first_n);
  }
  stream.expires_after(cfg.read_timeout);
  auto [ec, n] = co_await bhttp::async_read_header(stream, buffer, head, use_tuple);
  (void)n;
  if (ec) {
    StoredResponse error;
    if (ec == bhttp::error::header_limit) {
      error = detail_answer(431, "Request Header Fields Too Large");
    } else if (ec == bhttp::error::body_limit) {
      error = detail_answer(413, "Request Entity Too Large");
    } else if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
               ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
               ec == asio::error::eof || ec == asio::error::bad_descriptor) {
      co_return false;  // the peer left, went quiet, or the server is stopping
    } else {
      error = detail_answer(400, fmt::format("Bad Request: {}", ec.message()));
    }
    bhttp::response<bhttp::string_body> res(static_cast<bhttp::status>(error.status), 11);
    res.set(bhttp::field::content_type, error.content_type);
    res.body() = std::move(error.body);
    res.keep_alive(false);
    res.prepare_payload();
    stream.expires_after(cfg.read_timeout);
    co_await bhttp::async_write(stream, res, use_tuple);
    co_return false;
  }

  conn.busy = true;
  struct Idle {
    Connection& c;
    ~Idle() { c.busy = false; }
  } idle{conn};

  auto& req = head.get();
  const unsigned version = req.version();
  bool keep_alive = req.keep_alive();
  const RouteInfo* route = find_route(req.target());
  // HEAD is GET without the body, as FastAPI serves it.
  const bool head_request = req.method() == bhttp::verb::head;

  StoredResponse answer_value;
  bool have_answer = false;
  // Authentication comes first, for every route (known or not).
  if (!cfg.auth_token.empty()) {
    const auto key = req.find("X-API-Key");
    if (key == req.end()) {
      answer_value = detail_answer(403, "Not authenticated");
      have_answer = true;
    } else if (!same_token(key->value(), cfg.auth_token)) {
      answer_value = detail_answer(401, "Invalid API Key");
      have_answer = true;
    }
  }
  if (!have_answer && route == nullptr) {
    answer_value = detail_answer(404, "Not Found");
    have_answer = true;
  } else if (!have_answer && route->method != req.method() &&
             !(head_request && route->method == bhttp::verb::get)) {
    answer_value = detail_answer(405, "Method Not Allowed");
    answer_value.headers.emplace_back("allow", std::string(to_string(route->method)));
    have_answer = true;
  }

  std::string request_key;
  if (const auto id = req.find("X-Request-ID"); id != req.end() && !id->value().empty())
    request_key = fmt::format("{} {} {}", id->value(), req.method_string(), req.target());

  // The body, unless the answer is already known and the body is large (then the connection
  // closes instead of reading what nobody will use).
  std::string body;
  const bool has_body = !head.is_done();
  const bool upload = !have_answer && route->route == Route::upload;
  // Whether the body is read is decided here, apart from keep_alive: a client that sends
  // `Connection: close` (SWE-ReX's, on every request) still has its body read.
  bool read_body = has_body;
  if (has_body && have_answer) {
    const auto length = head.content_length();
    if (!length || *length > 64 * 1024) {
      read_body = false;
      keep_alive = false;
    }
  }
  if (read_body && req[bhttp::field::expect] == "100-continue") {
    bhttp::response<bhttp::empty_body> go_on(bhttp::status::continue_, 11);
    stream.expires_after(cfg.read_timeout);
    co_await bhttp::async_write(stream, go_on, use_tuple);
  }
  if (upload) {
    // Streamed to disk as it arrives; never held in memory.
    answer_value = co_await receive_upload(stream, buffer, head, keep_alive);
    have_answer = true;
  } else if (read_body && head.content_length() &&
             *head.content_length() > cfg.max_json_body_bytes) {
    // Refused at once: nothing of the body is read (or reserved).
    answer_value = detail_answer(413, "Request Entity Too Large");
    have_answer = true;
    keep_alive = false;
  } else if (read_body) {
    bhttp::request_parser<bhttp::string_body> full(std::move(head));
    full.body_limit(cfg.max_json_body_bytes);
    // The read timeout bounds each piece, not the whole body: a slow link that keeps sending
    // is not cut off.
    boost::system::error_code read_ec;
    while (!read_ec && !full.is_done()) {
      stream.expires_after(cfg.read_timeout);
      auto [piece_ec, piece_n] = co_await bhttp::async_read_some(stream, buffer, full, use_tuple);
      (void)piece_n;
      read_ec = piece_ec;
    }
    if (read_ec == bhttp::error::body_limit) {
      answer_value = detail_answer(413, "Request Entity Too Large");
      have_answer = true;
      keep_alive = false;
    } else if (read_ec) {
      co_return false;
    } else {
      body = std::move(full.get().body());
    }
  }

  stream.expires_never();  // a command may run for hours
  if (!have_answer && route->route == Route::run_stream) {
    Action action;
    std::exception_ptr failure;
    try {
      action = parse_json<Action>(body);
    } catch (...) {
      failure = std::current_exception();
    }
    if (!failure)
      co_return co_await stream_run(stream, std::move(action), version, keep_alive && !stopping);
    answer_value = error_answer(failure);
    have_answer = true;
  }
  std::optional<FileAnswer> file;
  if (!have_answer) {
    if (route->route == Route::download) {
      answer_value = co_await prepare_download(std::move(body), file);
    } else if (request_key.empty()) {
      answer_value = co_await answer(*route, std::move(body));
    } else {
      answer_value = co_await answer_replayable(*route, std::move(body), std::move(request_key));
    }
  }
  keep_alive = keep_alive && !stopping;

  if (file) {
    bhttp::response<bhttp::file_body> res(bhttp::status::ok, version);
    res.set(bhttp::field::server, server_name());
    res.set(bhttp::field::content_type, file->content_type);
    res.set("X-Rex-Download-Kind", file->kind);
    res.body() = std::move(file->body);
    res.keep_alive(keep_alive);
    res.prepare_payload();
    bhttp::response_serializer<bhttp::file_body> writer(res);
    while (!writer.is_done()) {
      stream.expires_after(cfg.read_timeout);  // per piece: a large file may take long in all
      auto [ec, n] = co_await bhttp::async_write_some(stream, writer, use_tuple);
      (void)n;
      if (ec)
        co_return false;
    }
    co_return keep_alive;
  }

  bhttp::response<bhttp::string_body> res(static_cast<bhttp::status>(answer_value.status), version);
  res.set(bhttp::field::server, server_name());
  res.set(bhttp::field::content_type, answer_value.content_type);
  for (const auto& [name, value] : answer_value.headers)
    res.set(name, value);
  res.body() = std::move(answer_value.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  stream.expires_after(cfg.read_timeout);
  if (head_request) {
    // The headers a GET would get (Content-Length included) and no body: a body here would be
    // read as the start of the next answer.
    bhttp::response_serializer<bhttp::string_body> head_only(res);
    auto [head_ec, head_n] = co_await bhttp::async_write_header(stream, head_only, use_tuple);
    (void)head_n;
    co_return keep_alive && !head_ec;
  }
  auto [write_ec, written] = co_await bhttp::async_write(stream, res, use_tuple);
  (void)written;
  co_return keep_alive && !write_ec;
}

asio::awaitable<StoredResponse> Server::Impl::answer_replayable(const RouteInfo& route,
                                                                std::string body,
                                                                std::string request_key) {
  auto entry = replay.find(request_key);
  if (entry) {
    // The same request is running: its answer (or its failure to produce one) wakes us.
    if (!entry->response)
      co_await entry->ready.async_wait(use_tuple);
    if (entry->response)
      co_return *entry->response;
  }
  entry = replay.begin(request_key, ex);
  struct Abandon {
    ReplayCache& cache;
    const std::string& key;
    std::shared_ptr<ReplayCache::Entry> entry;
    ~Abandon() {
      if (!entry->response)
        cache.abandon(key, entry);
    }
  } abandon{replay, request_key, entry};
  auto result = co_await answer(route, std::move(body));
  ReplayCache::complete(*entry, result);
  co_return result;
}

asio::awaitable<StoredResponse> Server::Impl::answer(const RouteInfo& route, std::string body) {
  std::exception_ptr failure;
  try {
    auto value = co_await run_route(route.route, std::move(body));
    co_return json_answer(200, value);
  } catch (...) {
    failure = std::current_exception();
  }
  co_return error_answer(failure);
}

template <class S>
asio::awaitable<StoredResponse> Server::Impl::receive_upload(
    S& stream, beast::flat_buffer& buffer, bhttp::request_parser<bhttp::empty_body>& head,
    bool& keep_alive) {
  const auto boundary = multipart_boundary(head.get()[bhttp::field::content_type]);
  if (!boundary) {
    keep_alive = keep_alive && head.is_done();
    co_return validation_answer("upload: expected a multipart/form-data body with a boundary");
  }
  bhttp::request_parser<bhttp::buffer_body> parser(std::move(head));
  parser.body_limit(cfg.max_body_bytes);

  std::optional<TempFile> data;
  std::exception_ptr failure;
  try {
    data.emplace(upload_dir(), "rex-upload-");
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    keep_alive = false;
    co_return error_answer(failure);
  }

  // What the form carries. The file's bytes collect in `pending` and go to disk in pieces.
  std::map<std::string, std::string> fields;
  std::string part;      // name of the part being read
  bool in_file = false;  // the part is the file
  bool have_file = false;
  std::string pending;  // file bytes not yet written
  std::string field;    // a text field's value so far
  constexpr std::size_t kFieldLimit = 64 * 1024;
  constexpr std::size_t kFlushBytes = 1 << 20;
  MultipartParser::Handlers handlers;
  handlers.on_part_begin = [&](const MultipartPartHeaders& h) {
    part = h.name;
    in_file = h.name == "file";
    if (in_file && have_file)
      throw MultipartError("more than one part named 'file'");
    have_file = have_file || in_file;
    field.clear();
  };
  handlers.on_part_data = [&](std::string_view bytes) {
    if (in_file) {
      pending.append(bytes);
    } else if (field.size() + bytes.size() > kFieldLimit) {
      throw MultipartError(
          fmt::format("form field '{}' is larger than {} bytes", part, kFieldLimit));
    } else {
      field.append(bytes);
    }
  };
  handlers.on_part_end = [&] {
    if (!in_file)
      fields[part] = field;
    in_file = false;
  };
  std::optional<MultipartParser> form;
  try {
    form.emplace(*boundary, std::move(handlers));
  } catch (const MultipartError& e) {
    keep_alive = false;
    co_return validation_answer(fmt::format("upload: {}", e.what()));
  }

  std::vector<char> chunk(64 * 1024);
  const int fd = data->fd();
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    stream.expires_after(cfg.read_timeout);
    auto [ec, n] = co_await bhttp::async_read_some(stream, buffer, parser, use_tuple);
    (void)n;
    if (ec == bhttp::error::need_buffer)
      ec = {};
    if (ec == bhttp::error::body_limit) {
      keep_alive = false;
      co_return detail_answer(413, "Request Entity Too Large");
    }
    if (ec) {
      keep_alive = false;
      co_return detail_answer(400, fmt::format("upload interrupted: {}", ec.message()));
    }
    const std::size_t got = chunk.size() - parser.get().body().size;
    std::string form_error;
    try {
      form->feed(std::string_view(chunk.data(), got));
      if (parser.is_done())
        form->finish();
    } catch (const MultipartError& e) {
      form_error = e.what();
    }
    if (!form_error.empty()) {
      keep_alive = keep_alive && parser.is_done();
      co_return validation_answer(fmt::format("upload: {}", form_error));
    }
    if (pending.size() >= kFlushBytes || (parser.is_done() && !pending.empty())) {
      auto piece = std::move(pending);
      pending.clear();
      auto write = [fd, piece = std::move(piece), name = data->path().string()] {
        detail::write_all(fd, piece, name);
      };
      try {
        co_await detail::offload(files, ex, std::move(write));
      } catch (...) {
        failure = std::current_exception();
      }
      if (failure) {
        keep_alive = keep_alive && parser.is_done();
        co_return error_answer(failure);
      }
    }
  }
  data->close();

  if (!have_file)
    co_return validation_answer("upload.file: required field missing");
  const auto target = fields.find("target_path");
  if (target == fields.end())
    co_return validation_answer("upload.target_path: required field missing");
  bool unzip = false;
  if (const auto u = fields.find("unzip"); u != fields.end()) {
    const auto value = form_bool(u->second);
    if (!value)
      co_return validation_answer("upload.unzip: expected a boolean, got " +
                                  python_repr(u->second));
    unzip = *value;
  }
  UploadRequest request;
  request.source_path = data->path().string();
  request.target_path = target->second;
  request.unzip = unzip;
  try {
    co_await runtime.upload(std::move(request));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure)
    co_return error_answer(failure);
  co_return json_answer(200, json::object());
}

asio::awaitable<StoredResponse> Server::Impl::prepare_download(std::string body,
                                                               std::optional<FileAnswer>& file) {
  std::exception_ptr failure;
  try {
    const auto request = json::parse(body);
    const auto* obj = request.if_object();
    if (obj == nullptr)
      throw ProtocolError("DownloadRequest: expected an object");
    const auto* path_value = obj->if_contains("path");
    if (path_value == nullptr)
      throw ProtocolError("DownloadRequest.path: required field missing");
    if (!path_value->is_string())
      throw ProtocolError("DownloadRequest.path: expected a string");
    std::string format = "tar";
    if (const auto* f = obj->if_contains("format"); f != nullptr && !f->is_null()) {
      if (!f->is_string())
        throw ProtocolError("DownloadRequest.format: expected a string");
      format = f->as_string();
    }
    const std::string path(path_value->as_string());
    auto dir = upload_dir();
    // A file goes as it is; a directory becomes an archive in the upload directory, opened and
    // then unlinked at once, so nothing is left behind whatever happens to the connection.
    auto prepare = [path, format, dir]() -> FileAnswer {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0)
        throw_os_error(errno, path);
      FileAnswer out;
      boost::system::error_code ec;
      if (S_ISREG(st.st_mode)) {
        out.kind = "file";
        out.content_type = "application/octet-stream";
        out.body.open(path.c_str(), beast::file_mode::scan, ec);
        if (ec)
          throw_os_error(ec.value(), path);
        return out;
      }
      if (!S_ISDIR(st.st_mode))
        throw ValueError(fmt::format("{} is neither a regular file nor a directory", path));
      const auto kind = parse_archive_format(format);
      TempFile archive(dir, "rex-download-");
      archive.close();
      create_archive(path, archive.path(), kind);
      out.kind = "directory";
      out.content_type = kind == ArchiveFormat::zip   ? "application/zip"
                         : kind == ArchiveFormat::tar ? "application/x-tar"
                                                      : "application/gzip";
      out.body.open(archive.path().c_str(), beast::file_mode::scan, ec);
      if (ec)
        throw_os_error(ec.value(), archive.path().string());
      return out;  // ~TempFile unlinks the name; the open file stays readable
    };
    file = co_await detail::offload(files, ex, std::move(prepare));
    co_return StoredResponse{};
  } catch (const boost::system::system_error& e) {
    failure = std::make_exception_ptr(ProtocolError(std::string("invalid JSON: ") + e.what()));
  } catch (...) {
    failure = std::current_exception();
  }
  co_return error_answer(failure);
}

asio::awaitable<BashObservation> Server::Impl::run_in_lane(Action action,
                                                           Runtime::OutputListener on_output) {
  const std::string name = session_of(action);
  auto& slot = lanes[name];
  if (!slot)
    slot = std::make_shared<AsyncMutex>();
  auto lane = slot;
  co_await lane->lock();
  struct Release {
    Impl& impl;
    const std::string& name;
    std::shared_ptr<AsyncMutex> lane;
    ~Release() {
      lane->unlock();
      auto it = impl.lanes.find(name);
      if (it != impl.lanes.end() && it->second == lane && lane->idle())
        impl.lanes.erase(it);
    }
  } release{*this, name, lane};
  co_return co_await runtime.run_in_session_streaming(std::move(action), std::move(on_output));
}

// Runs the action for a streamed answer: output events while it runs, then one "observation"
// event, or an "error" event carrying the same body a 511 (or 422) answer would.
asio::awaitable<void> Server::Impl::run_for_stream(std::shared_ptr<Impl> self,
                                                   std::shared_ptr<EventQueue> queue,
                                                   Action action) {
  std::exception_ptr failure;
  try {
    Runtime::OutputListener listener = [queue](std::string_view text) {
      json::object event;
      event["output"] = text;
      queue->push(sse_event("output", event));
    };
    BashObservation observation;
    if (std::holds_alternative<BashInterruptAction>(action)) {
      observation = co_await self->runtime.run_in_session(std::move(action));
    } else {
      observation = co_await self->run_in_lane(std::move(action), std::move(listener));
    }
    queue->push(sse_event("observation", to_json(observation)));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    const auto answer = error_answer(failure);
    queue->push(sse_event("error", json::parse(answer.body)));
  }
  queue->finished = true;
  queue->wake.cancel();
}

template <class S>
asio::awaitable<bool> Server::Impl::stream_run(S& stream, Action action, unsigned version,
                                               bool keep_alive) {
  bhttp::response<bhttp::empty_body> res(bhttp::status::ok, version);
  res.set(bhttp::field::server, server_name());
  res.set(bhttp::field::content_type, "text/event-stream");
  res.set(bhttp::field::cache_control, "no-cache");
  res.chunked(true);
  res.keep_alive(keep_alive);
  bhttp::response_serializer<bhttp::empty_body> head(res);
  stream.expires_after(cfg.read_timeout);
  auto [ec, n] = co_await bhttp::async_write_header(stream, head, use_tuple);
  (void)n;
  if (ec)
    co_return false;

  auto queue = std::make_shared<EventQueue>(ex);
  auto runner = run_for_stream(shared_from_this(), queue, std::move(action));
  asio::co_spawn(ex, std::move(runner), asio::detached);  // reports through the queue
  while (true) {
    while (!queue->events.empty()) {
      const std::string event = std::move(queue->events.front());
      queue->events.pop_front();
      auto chunk = bhttp::make_chunk(asio::buffer(event));
      stream.expires_after(cfg.read_timeout);
      auto [write_ec, written] = co_await asio::async_write(stream, chunk, use_tuple);
      (void)written;
      if (write_ec)
        co_return false;  // the client left; the command runs on and its session stays usable
    }
    if (queue->finished)
      break;
    co_await queue->wake.async_wait(use_tuple);
  }
  auto last = bhttp::make_chunk_last();
  stream.expires_after(cfg.read_timeout);
  auto [last_ec, last_n] = co_await asio::async_write(stream, last, use_tuple);
  (void)last_n;
  co_return keep_alive && !last_ec && !stopping;
}

asio::awaitable<json::value> Server::Impl::run_route(Route route, std::string body) {
  switch (route) {
    case Route::root: {
      json::object hello;
      hello["message"] = "hello world";
      co_return hello;
    }
    case Route::is_alive:
      co_return to_json(co_await runtime.is_alive());
    case Route::create_session: {
      auto request = parse_json<CreateBashSessionRequest>(body);
      co_return to_json(co_await runtime.create_session(std::move(request)));
    }
    case Route::run_in_session: {
      auto action = parse_json<Action>(body);
      // Interrupts must reach the command they interrupt, so they skip the session's queue.
      if (std::holds_alternative<BashInterruptAction>(action))
        co_return to_json(co_await runtime.run_in_session(std::move(action)));
      Runtime::OutputListener none;
      co_return to_json(co_await run_in_lane(std::move(action), std::move(none)));
    }
    case Route::close_session: {
      auto request = parse_json<CloseBashSessionRequest>(body);
      co_return to_json(co_await runtime.close_session(std::move(request)));
    }
    case Route::execute: {
      auto command = parse_json<Command>(body);
      co_return to_json(co_await runtime.execute(std::move(command)));
    }
    case Route::read_file: {
      auto request = parse_json<ReadFileRequest>(body);
      co_return to_json(co_await runtime.read_file(std::move(request)));
    }
    case Route::write_file: {
      auto request = parse_json<WriteFileRequest>(body);
      co_return to_json(co_await runtime.write_file(std::move(request)));
    }
    case Route::close:
      co_return to_json(co_await runtime.close());
    case Route::upload:
    case Route::download:
    case Route::run_stream:
      break;  // served by receive_upload, prepare_download and stream_run
  }
  throw SwerexException("unknown route");
}

// --- Server --------------------------------------------------------------------------------

Server::Server(asio::any_io_executor executor, Runtime& runtime, ServerConfig config)
    : impl_(std::make_shared<Impl>(std::move(executor), runtime, std::move(config))) {}

Server::~Server() {
  impl_->stop();
}

void Server::listen() {
  impl_->listen();
}

std::uint16_t Server::port() const {
  if (!impl_->listening || !impl_->cfg.unix_socket.empty())
    return 0;
  return impl_->tcp_acceptor.local_endpoint().port();
}

std::string Server::url() const {
  if (!impl_->cfg.unix_socket.empty()) {
    std::string encoded;
    for (const char c : impl_->cfg.unix_socket)
      encoded += c == '/' ? std::string("%2F") : std::string(1, c);
    return "http+unix://" + encoded;
  }
  std::string host = impl_->cfg.host;
  if (host == "0.0.0.0")
    host = "127.0.0.1";
  else if (host == "::")
    host = "[::1]";
  else if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  return fmt::format("http://{}:{}", host, port());
}

asio::awaitable<void> Server::run() {
  auto self = impl_;
  self->listen();
  if (!self->cfg.unix_socket.empty()) {
    co_await Impl::accept_loop<unix_socket>(self, self->unix_acceptor);
  } else {
    co_await Impl::accept_loop<tcp>(self, self->tcp_acceptor);
  }
  self->stop();
  while (!self->connections.empty())
    co_await self->drained.async_wait(use_tuple);
  if (!self->cfg.unix_socket.empty()) {
    std::error_code ignored;
    std::filesystem::remove(self->cfg.unix_socket, ignored);
  }
}

asio::awaitable<void> Server::serve_connection(unix_socket::socket socket) {
  co_await Impl::serve<unix_socket>(impl_, std::move(socket));
}

void Server::stop() {
  impl_->stop();
}

std::size_t Server::connection_count() const noexcept {
  return impl_->connections.size();
}

}  // namespace rex::server
