#include <rex/core/log.hpp>
#include <rex/server/service.hpp>

#include <rex/core/event.hpp>
#include <rex/core/timeout.hpp>
#include <rex/http/url.hpp>
#include <rex/server/admission.hpp>
#include <rex/version.hpp>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <malloc.h>

#include <filesystem>
#include <functional>
#include <list>
#include <system_error>
#include <vector>

#include "server/replay_cache.hpp"

namespace rex::server {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;
using namespace std::chrono_literals;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

const std::string& server_name() {
  static const std::string name = fmt::format("rex-server/{}", rex::version());
  return name;
}

template <class Protocol>
using Stream = beast::basic_stream<Protocol, asio::any_io_executor, beast::unlimited_rate_policy>;

// Runs a streamed answer's producer to its end, then ends the stream whatever happened.
asio::awaitable<void> produce(EventProducer producer, std::shared_ptr<EventStream> events) {
  try {
    co_await producer(events);
  } catch (const std::exception& e) {
    logging::error("rex-server: an event stream ended with an error: {}", e.what());
  }
  events->finish();
}

// The head of an answer whose body is written after it (events, a relayed answer); whether it
// went out within `timeout`.
template <class S>
asio::awaitable<bool> write_head(S& stream, bhttp::response<bhttp::empty_body>& res,
                                 std::chrono::steady_clock::duration timeout) {
  bhttp::response_serializer<bhttp::empty_body> head(res);
  stream.expires_after(timeout);
  auto [ec, n] = co_await bhttp::async_write_header(stream, head, use_tuple);
  (void)n;
  co_return !ec;
}

// Writes a serialized answer piece by piece, each under its own deadline: a large body to a
// slow reader (a relay that passes it on as its own client takes it) is not cut off while it
// moves. Whether all of it went out.
template <class S, class Serializer>
asio::awaitable<bool> write_in_pieces(S& stream, Serializer& writer,
                                      std::chrono::steady_clock::duration timeout) {
  while (!writer.is_done()) {
    stream.expires_after(timeout);
    auto [ec, n] = co_await bhttp::async_write_some(stream, writer, use_tuple);
    (void)n;
    if (ec)
      co_return false;
  }
  co_return true;
}

// Completes when the client of a connection that waits for its answer has left: its side has
// ended or failed (or stop() closed the connection). A client that sends its next request
// meanwhile is still there: this then waits until it is cancelled.
template <class S>
asio::awaitable<void> client_gone(S& stream) {
  auto& socket = stream.socket();
  auto [ec] = co_await socket.async_wait(asio::socket_base::wait_read, use_tuple);
  if (ec)
    co_return;
  char byte = 0;
  boost::system::error_code peek_ec;
  const std::size_t n =
      socket.receive(asio::buffer(&byte, 1), asio::socket_base::message_peek, peek_ec);
  if (peek_ec || n == 0)
    co_return;
  asio::steady_timer never(socket.get_executor(), asio::steady_timer::time_point::max());
  auto [never_ec] = co_await never.async_wait(use_tuple);
  (void)never_ec;
}

// Parses what `buffer` already holds into `parser`, as far as it goes: a request that came in one
// piece (the usual case) is taken without another trip through the event loop. Whether the
// parser needs no more (`header_only`: of its header); an error that is not "need more" in `ec`.
template <class Parser>
bool parse_buffered(Parser& parser, beast::flat_buffer& buffer, bool header_only,
                    boost::system::error_code& ec) {
  auto enough = [&] { return header_only ? parser.is_header_done() : parser.is_done(); };
  while (!enough() && buffer.size() > 0) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == bhttp::error::need_more) {
      ec = {};
      break;
    }
    if (ec || used == 0)
      break;
  }
  return !ec && enough();
}

// How reading a whole body ended.
enum class BodyRead {
  done,
  too_large,  // past max_json_body_bytes: 413, and the connection closes
  cut_off,    // the peer left or went quiet: the connection just ends
};

}  // namespace

struct Service::Impl : std::enable_shared_from_this<Service::Impl> {
  Impl(asio::any_io_executor executor, RouteTable table, ServerConfig config)
      : ex(std::move(executor)),
        routes(std::move(table)),
        cfg(std::move(config)),
        replay(cfg.request_id_cache),
        tcp_acceptor(ex),
        unix_acceptor(ex),
        drained(ex),
        trim(ex) {}

  // One open connection, as stop() sees it.
  struct Connection {
    std::function<void()> close;  // cancels its I/O
    bool busy = false;            // a request is being answered
    bool relaying = false;        // ...by a relay, which stop() ends as it ends idle ones
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
  static asio::awaitable<void> refuse(typename Protocol::socket socket);

  template <class S>
  asio::awaitable<bool> serve_one(S& stream, beast::flat_buffer& buffer, Connection& conn);

  template <class S>
  asio::awaitable<BodyRead> read_whole_body(S& stream, beast::flat_buffer& buffer,
                                            bhttp::request_parser<bhttp::empty_body>& head,
                                            Request& request);
  template <class S>
  asio::awaitable<Answer> receive_body(S& stream, beast::flat_buffer& buffer,
                                       bhttp::request_parser<bhttp::empty_body>& head,
                                       const UploadRoute& route, const Request& request,
                                       bool& keep_alive);
  asio::awaitable<Answer> answer_replayable(const JsonRoute& route, Request request,
                                            std::string request_key);
  template <class S>
  asio::awaitable<bool> write_answer(S& stream, Answer answer, unsigned version, bool keep_alive,
                                     bool head_only);
  template <class S>
  asio::awaitable<bool> write_file(S& stream, FileAnswer file, unsigned version, bool keep_alive);
  template <class S>
  asio::awaitable<bool> write_events(S& stream, EventProducer producer,
                                     const std::string& content_type, unsigned version,
                                     bool keep_alive);
  template <class S>
  asio::awaitable<bool> relay(S& stream, const RelayRoute& route, Request request, unsigned version,
                              bool keep_alive, bool head_only, Connection& conn);
  template <class S>
  asio::awaitable<bool> write_relayed(S& stream, RelayedAnswer relayed, unsigned version,
                                      bool keep_alive, bool head_only);

  void connection_ended(std::list<Connection>::iterator it) {
    connections.erase(it);
    if (connections.empty()) {
      drained.set();
      schedule_trim();
    }
  }

  // A burst of connections leaves freed memory cached in the allocator's arenas; once the
  // service has been without connections for cfg.trim_memory_after it is handed back to the
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
  RouteTable routes;
  ServerConfig cfg;
  ReplayCache replay;
  tcp::acceptor tcp_acceptor;
  unix_socket::acceptor unix_acceptor;
  bool listening = false;
  bool stopping = false;
  std::list<Connection> connections;
  Event drained;            // set whenever the last connection ends
  asio::steady_timer trim;  // see schedule_trim
  bool trim_pending = false;
};

void Service::Impl::listen() {
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

void Service::Impl::stop() {
  if (stopping)
    return;
  stopping = true;
  trim.cancel();
  boost::system::error_code ignored;
  tcp_acceptor.close(ignored);
  unix_acceptor.close(ignored);
  for (auto& c : connections) {
    if (!c.busy || c.relaying)
      c.close();
  }
  if (connections.empty())
    drained.set();
}

template <class Protocol>
asio::awaitable<void> Service::Impl::accept_loop(
    std::shared_ptr<Impl> self, asio::basic_socket_acceptor<Protocol, asio::any_io_executor>& acc) {
  while (!self->stopping) {
    auto [ec, socket] = co_await acc.async_accept(use_tuple);
    if (self->stopping)
      break;
    if (ec) {
      if (ec == asio::error::operation_aborted)
        break;
      // Out of descriptors, or the peer gave up before accept: pause briefly, carry on.
      logging::warn("rex-server: accept failed: {}", ec.message());
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
        logging::error("rex-server: connection ended with an error: {}", x.what());
      }
    };
    if (self->connections.size() >= self->cfg.max_connections) {
      asio::co_spawn(self->ex, refuse<Protocol>(std::move(socket)), handler);
    } else {
      asio::co_spawn(self->ex, serve<Protocol>(self, std::move(socket)), handler);
    }
  }
}

// Past the connection limit: a 503 with a JSON body, then close.
template <class Protocol>
asio::awaitable<void> Service::Impl::refuse(typename Protocol::socket socket) {
  Stream<Protocol> stream(std::move(socket));
  stream.expires_after(5s);
  bhttp::response<bhttp::string_body> res(bhttp::status::service_unavailable, 11);
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::retry_after, "1");
  res.body() = detail_answer(503, "Too many connections").body;
  res.keep_alive(false);
  res.prepare_payload();
  auto [ec, n] = co_await bhttp::async_write(stream, res, use_tuple);
  (void)n;
  if (!ec)
    stream.socket().shutdown(asio::socket_base::shutdown_both, ec);
}

template <class Protocol>
asio::awaitable<void> Service::Impl::serve(std::shared_ptr<Impl> self,
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

// Reads one request and answers it. Returns whether the connection stays open. The decisions
// are admit()'s; this moves the bytes.
template <class S>
asio::awaitable<bool> Service::Impl::serve_one(S& stream, beast::flat_buffer& buffer,
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
      co_return false;  // the peer left, went quiet, or the service is stopping
    buffer.commit(first_n);
  }
  boost::system::error_code ec;
  if (!parse_buffered(head, buffer, true, ec) && !ec) {
    stream.expires_after(cfg.read_timeout);
    auto [read_ec, n] = co_await bhttp::async_read_header(stream, buffer, head, use_tuple);
    (void)n;
    ec = read_ec;
  }
  if (ec) {
    auto error = header_error_answer(ec);
    if (!error)
      co_return false;
    bhttp::response<bhttp::string_body> res(static_cast<bhttp::status>(error->status), 11);
    res.set(bhttp::field::content_type, error->content_type);
    res.body() = std::move(error->body);
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

  const unsigned version = head.get().version();
  std::optional<std::uint64_t> length;
  if (const auto parsed = head.content_length())
    length = *parsed;
  Admission admission = admit(head.get(), length, !head.is_done(), routes, cfg);
  bool keep_alive = admission.keep_alive;
  if (admission.send_continue) {
    bhttp::response<bhttp::empty_body> go_on(bhttp::status::continue_, 11);
    stream.expires_after(cfg.read_timeout);
    co_await bhttp::async_write(stream, go_on, use_tuple);
  }

  std::optional<Answer> answer = std::move(admission.answer);
  Request request;
  request.params = std::move(admission.params);
  if (admission.body == BodyPlan::receive) {
    // The parser goes on reading the body: the route gets a copy of the header.
    request.header = static_cast<const bhttp::request_header<>&>(head.get());
    const auto& upload = std::get<UploadRoute>(admission.route->handler);
    answer = co_await receive_body(stream, buffer, head, upload, request, keep_alive);
  } else if (admission.body == BodyPlan::read) {
    const BodyRead read = co_await read_whole_body(stream, buffer, head, request);
    if (read == BodyRead::cut_off)
      co_return false;
    if (read == BodyRead::too_large) {
      answer = detail_answer(413, "Request Entity Too Large");
      keep_alive = false;
    }
  } else if (!answer) {
    request.header = std::move(static_cast<bhttp::request_header<>&>(head.get()));
  }

  stream.expires_never();  // a command may run for hours
  if (!answer) {
    const auto& handler = admission.route->handler;
    if (const auto* json_route = std::get_if<JsonRoute>(&handler)) {
      if (admission.replay_key.empty())
        answer = co_await (*json_route)(std::move(request));
      else
        answer = co_await answer_replayable(*json_route, std::move(request),
                                            std::move(admission.replay_key));
    } else if (const auto* stream_route = std::get_if<StreamRoute>(&handler)) {
      auto started = (*stream_route)(std::move(request));
      if (auto* producer = std::get_if<EventProducer>(&started))
        co_return co_await write_events(stream, std::move(*producer),
                                        admission.route->stream_content_type, version,
                                        keep_alive && !stopping);
      answer = std::move(std::get<Answer>(started));
    } else if (const auto* file_route = std::get_if<FileRoute>(&handler)) {
      auto prepared = co_await (*file_route)(std::move(request));
      if (auto* file = std::get_if<FileAnswer>(&prepared))
        co_return co_await write_file(stream, std::move(*file), version, keep_alive && !stopping);
      answer = std::move(std::get<Answer>(prepared));
    } else if (const auto* relay_route = std::get_if<RelayRoute>(&handler)) {
      co_return co_await relay(stream, *relay_route, std::move(request), version,
                               keep_alive && !stopping, admission.head_only, conn);
    }
  }
  keep_alive = keep_alive && !stopping && !answer->close_connection;
  co_return co_await write_answer(stream, std::move(*answer), version, keep_alive,
                                  admission.head_only);
}

// Reads a body whole into `body`.
template <class S>
asio::awaitable<BodyRead> Service::Impl::read_whole_body(
    S& stream, beast::flat_buffer& buffer, bhttp::request_parser<bhttp::empty_body>& head,
    Request& request) {
  bhttp::request_parser<bhttp::string_body> full(std::move(head));
  full.body_limit(cfg.max_json_body_bytes);
  // The read timeout bounds each piece, not the whole body: a slow link that keeps sending is
  // not cut off.
  boost::system::error_code read_ec;
  parse_buffered(full, buffer, false, read_ec);
  while (!read_ec && !full.is_done()) {
    stream.expires_after(cfg.read_timeout);
    auto [piece_ec, piece_n] = co_await bhttp::async_read_some(stream, buffer, full, use_tuple);
    (void)piece_n;
    read_ec = piece_ec;
  }
  if (read_ec == bhttp::error::body_limit)
    co_return BodyRead::too_large;
  if (read_ec)
    co_return BodyRead::cut_off;
  auto message = full.release();
  request.body = std::move(message.body());
  request.header = std::move(static_cast<bhttp::request_header<>&>(message));
  co_return BodyRead::done;
}

// Feeds the body to an upload route's receiver as it arrives, in pieces of at most 64 KiB.
template <class S>
asio::awaitable<Answer> Service::Impl::receive_body(S& stream, beast::flat_buffer& buffer,
                                                    bhttp::request_parser<bhttp::empty_body>& head,
                                                    const UploadRoute& route,
                                                    const Request& request, bool& keep_alive) {
  auto started = route(request);
  if (auto* refused = std::get_if<Answer>(&started)) {
    keep_alive = keep_alive && head.is_done();  // the body was not read
    co_return std::move(*refused);
  }
  auto receiver = std::move(std::get<std::unique_ptr<BodyReceiver>>(started));
  bhttp::request_parser<bhttp::buffer_body> parser(std::move(head));
  parser.body_limit(cfg.max_body_bytes);
  std::vector<char> chunk(64 * 1024);
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
    const std::string_view piece(chunk.data(), got);
    auto early = co_await receiver->receive(piece, parser.is_done());
    if (early) {
      keep_alive = keep_alive && parser.is_done();
      co_return std::move(*early);
    }
  }
  co_return co_await receiver->finish();
}

asio::awaitable<Answer> Service::Impl::answer_replayable(const JsonRoute& route, Request request,
                                                         std::string request_key) {
  auto entry = replay.find(request_key);
  if (entry) {
    // The same request is running: its answer (or its failure to produce one) wakes us.
    if (!entry->response)
      co_await entry->ready.wait();
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
  auto result = co_await route(std::move(request));
  ReplayCache::complete(*entry, result);
  co_return result;
}

template <class S>
asio::awaitable<bool> Service::Impl::write_answer(S& stream, Answer answer, unsigned version,
                                                  bool keep_alive, bool head_only) {
  bhttp::response<bhttp::string_body> res(static_cast<bhttp::status>(answer.status), version);
  res.set(bhttp::field::server, server_name());
  res.set(bhttp::field::content_type, answer.content_type);
  for (const auto& [name, value] : answer.headers)
    res.set(name, value);
  res.body() = std::move(answer.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  stream.expires_after(cfg.read_timeout);
  if (head_only) {
    // The headers a GET would get (Content-Length included) and no body: a body here would be
    // read as the start of the next answer.
    bhttp::response_serializer<bhttp::string_body> head_only_writer(res);
    auto [head_ec, head_n] =
        co_await bhttp::async_write_header(stream, head_only_writer, use_tuple);
    (void)head_n;
    co_return keep_alive && !head_ec;
  }
  bhttp::response_serializer<bhttp::string_body> writer(res);
  const bool written = co_await write_in_pieces(stream, writer, cfg.read_timeout);
  co_return keep_alive&& written;
}

template <class S>
asio::awaitable<bool> Service::Impl::write_file(S& stream, FileAnswer file, unsigned version,
                                                bool keep_alive) {
  bhttp::response<bhttp::file_body> res(bhttp::status::ok, version);
  res.set(bhttp::field::server, server_name());
  res.set(bhttp::field::content_type, file.content_type);
  for (const auto& [name, value] : file.headers)
    res.set(name, value);
  res.body() = std::move(file.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  bhttp::response_serializer<bhttp::file_body> writer(res);
  const bool written = co_await write_in_pieces(stream, writer, cfg.read_timeout);
  co_return keep_alive&& written;
}

// A streamed answer: the header, then each event as a chunk while the producer runs.
template <class S>
asio::awaitable<bool> Service::Impl::write_events(S& stream, EventProducer producer,
                                                  const std::string& content_type, unsigned version,
                                                  bool keep_alive) {
  bhttp::response<bhttp::empty_body> res(bhttp::status::ok, version);
  res.set(bhttp::field::server, server_name());
  res.set(bhttp::field::content_type, content_type);
  res.set(bhttp::field::cache_control, "no-cache");
  res.chunked(true);
  res.keep_alive(keep_alive);
  auto head_written = write_head(stream, res, cfg.read_timeout);
  if (!co_await std::move(head_written))
    co_return false;

  auto events = std::make_shared<EventStream>(ex);
  auto run = produce(std::move(producer), events);
  asio::co_spawn(ex, std::move(run), asio::detached);  // produce() reports its own failures
  struct Close {
    EventStream& events;
    ~Close() { events.close(); }
  } close_events{*events};
  while (true) {
    while (!events->empty()) {
      const std::string event = events->pop();
      auto chunk = bhttp::make_chunk(asio::buffer(event));
      stream.expires_after(cfg.read_timeout);
      auto [write_ec, written] = co_await asio::async_write(stream, chunk, use_tuple);
      (void)written;
      if (write_ec)
        co_return false;  // the client left; the producer runs on
    }
    if (events->finished())
      break;
    if (!events->watched()) {
      co_await events->wait();
      continue;
    }
    // A client that leaves while nothing is sent is noticed at once: the stream closes, and the
    // producer that waits for that (wait_closed) stops.
    auto more = events->wait();
    auto gone = client_gone(stream);
    auto race = first_of(std::move(more), std::move(gone));
    auto raced = co_await std::move(race);
    if (raced.index() == 1)
      co_return false;
  }
  auto last = bhttp::make_chunk_last();
  stream.expires_after(cfg.read_timeout);
  auto [last_ec, last_n] = co_await asio::async_write(stream, last, use_tuple);
  (void)last_n;
  co_return keep_alive && !last_ec && !stopping;
}

// A relayed answer: the handler runs while the client is watched (it is cancelled when the
// client leaves), then its answer is written.
template <class S>
asio::awaitable<bool> Service::Impl::relay(S& stream, const RelayRoute& route, Request request,
                                           unsigned version, bool keep_alive, bool head_only,
                                           Connection& conn) {
  if (stopping) {  // stop() has passed this connection by: a relay may last hours
    Answer refused = detail_answer(503, "the service is stopping");
    co_return co_await write_answer(stream, std::move(refused), version, false, head_only);
  }
  conn.relaying = true;
  struct Done {
    Connection& c;
    ~Done() { c.relaying = false; }
  } done{conn};
  // g++ 12 miscompiles temporaries inside co_await expressions: named locals only.
  auto handled = route(std::move(request));
  auto gone = client_gone(stream);
  auto race = first_of(std::move(handled), std::move(gone));
  auto raced = co_await std::move(race);
  if (raced.index() == 1)
    co_return false;  // the client left, or the service stops: the handler was cancelled
  auto result = std::get<0>(std::move(raced));
  if (auto* relayed = std::get_if<RelayedAnswer>(&result))
    co_return co_await write_relayed(stream, std::move(*relayed), version, keep_alive, head_only);
  Answer& answer = std::get<Answer>(result);
  const bool keep = keep_alive && !answer.close_connection;
  co_return co_await write_answer(stream, std::move(answer), version, keep, head_only);
}

// The head the handler chose, then each piece of the body as it comes: raw after a
// Content-Length, else as chunks (or, to an HTTP/1.0 client, up to the connection's end).
template <class S>
asio::awaitable<bool> Service::Impl::write_relayed(S& stream, RelayedAnswer relayed,
                                                   unsigned version, bool keep_alive,
                                                   bool head_only) {
  bhttp::response<bhttp::empty_body> res(static_cast<bhttp::status>(relayed.status), version);
  for (const auto& [name, value] : relayed.headers)
    res.insert(name, value);
  const unsigned status = relayed.status;
  const bool bodyless = head_only || status / 100 == 1 || status == 204 || status == 304;
  const bool chunked = !bodyless && !relayed.content_length && version >= 11;
  if (relayed.content_length)
    res.content_length(*relayed.content_length);
  else if (chunked)
    res.chunked(true);
  else if (!bodyless)
    keep_alive = false;  // the body ends with the connection
  res.keep_alive(keep_alive);
  auto head_written = write_head(stream, res, cfg.read_timeout);
  if (!co_await std::move(head_written))
    co_return false;
  if (bodyless)
    co_return keep_alive && !stopping;

  std::uint64_t sent = 0;
  while (true) {
    auto piece = relayed.next();
    auto gone = client_gone(stream);
    std::optional<std::string> got;
    bool cut_off = false;
    try {
      auto race = first_of(std::move(piece), std::move(gone));
      auto raced = co_await std::move(race);
      cut_off = raced.index() == 1;  // the client left, or the service stops
      if (!cut_off)
        got = std::get<0>(std::move(raced));
    } catch (const std::exception& e) {
      logging::debug("rex-server: a relayed answer was cut off: {}", e.what());
      cut_off = true;  // its body cannot be completed: the client sees it end early
    }
    if (cut_off)
      co_return false;
    if (!got)
      break;
    if (got->empty())
      continue;
    stream.expires_after(cfg.read_timeout);
    boost::system::error_code write_ec;
    if (chunked) {
      auto chunk = bhttp::make_chunk(asio::buffer(*got));
      auto [chunk_ec, written] = co_await asio::async_write(stream, chunk, use_tuple);
      (void)written;
      write_ec = chunk_ec;
    } else {
      const auto bytes = asio::buffer(*got);
      auto [raw_ec, written] = co_await asio::async_write(stream, bytes, use_tuple);
      (void)written;
      write_ec = raw_ec;
    }
    if (write_ec)
      co_return false;
    sent += got->size();
  }
  if (relayed.content_length && sent != *relayed.content_length)
    co_return false;  // shorter than announced: only the connection's end says so
  if (chunked) {
    auto last = bhttp::make_chunk_last();
    stream.expires_after(cfg.read_timeout);
    auto [last_ec, last_n] = co_await asio::async_write(stream, last, use_tuple);
    (void)last_n;
    if (last_ec)
      co_return false;
  }
  co_return keep_alive && !stopping;
}

// --- Service -------------------------------------------------------------------------------

Service::Service(asio::any_io_executor executor, RouteTable routes, ServerConfig config)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(routes), std::move(config))) {}

Service::~Service() {
  impl_->stop();
}

void Service::listen() {
  impl_->listen();
}

std::uint16_t Service::port() const {
  if (!impl_->listening || !impl_->cfg.unix_socket.empty())
    return 0;
  return impl_->tcp_acceptor.local_endpoint().port();
}

std::string Service::url() const {
  if (!impl_->cfg.unix_socket.empty())
    return http::unix_socket_url(impl_->cfg.unix_socket);
  std::string host = impl_->cfg.host;
  if (host == "0.0.0.0")
    host = "127.0.0.1";
  else if (host == "::")
    host = "[::1]";
  else if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  return fmt::format("http://{}:{}", host, port());
}

asio::awaitable<void> Service::run() {
  auto self = impl_;
  self->listen();
  if (!self->cfg.unix_socket.empty()) {
    co_await Impl::accept_loop<unix_socket>(self, self->unix_acceptor);
  } else {
    co_await Impl::accept_loop<tcp>(self, self->tcp_acceptor);
  }
  self->stop();
  while (!self->connections.empty()) {
    self->drained.reset();
    co_await self->drained.wait();
  }
  if (!self->cfg.unix_socket.empty()) {
    std::error_code ignored;
    std::filesystem::remove(self->cfg.unix_socket, ignored);
  }
}

asio::awaitable<void> Service::serve_connection(unix_socket::socket socket) {
  co_await Impl::serve<unix_socket>(impl_, std::move(socket));
}

void Service::stop() {
  impl_->stop();
}

std::size_t Service::connection_count() const noexcept {
  return impl_->connections.size();
}

}  // namespace rex::server
