// The HTTP client: a pool of type-erased connections (TCP, TLS over TCP, unix socket), one
// deadline per request enforced by a watchdog timer that closes the connection, and the retry
// loop. Each exchange is a template over the stream type, instantiated here only.
#include <rex/core/outcome.hpp>
#include <rex/core/text.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/protocol/exceptions.hpp>

#include "http/client_failures.hpp"

#include <fmt/format.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/file_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/object.hpp>

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <exception>
#include <random>
#include <variant>

namespace rex::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using UnixSocket = asio::local::stream_protocol::socket;
using TlsStream = ssl::stream<tcp::socket>;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;
using OutgoingRequest = bhttp::request<bhttp::string_body>;

constexpr std::size_t kHeaderLimit = 64 * 1024;
// An idle connection used this recently is taken again without asking the kernel whether the
// server closed it.
constexpr auto kRecentlyUsed = std::chrono::milliseconds(500);
// Far enough to mean "no limit" without overflowing time_point arithmetic.
constexpr auto kLongestTimeout = std::chrono::hours(24 * 365 * 10);

tcp::socket& lowest_layer(tcp::socket& s) {
  return s;
}
tcp::socket& lowest_layer(TlsStream& s) {
  return s.next_layer();
}
UnixSocket& lowest_layer(UnixSocket& s) {
  return s;
}

// One connection to the server. The stream kind is fixed by the base URL's scheme.
struct Connection {
  using Stream = std::variant<tcp::socket, TlsStream, UnixSocket>;

  template <class S, class... Args>
  explicit Connection(std::in_place_type_t<S> kind, Args&&... args)
      : stream(kind, std::forward<Args>(args)...) {}

  int native_handle() {
    return std::visit([](auto& s) { return lowest_layer(s).native_handle(); }, stream);
  }

  // Closes the socket: every pending operation on it completes with an error.
  void abort() {
    if (resolver)
      resolver->cancel();
    error_code ignored;
    std::visit([&](auto& s) { lowest_layer(s).close(ignored); }, stream);
  }

  // True when the connection can carry a new request: open, nothing unread, and the server has
  // neither closed it nor sent anything unasked.
  bool looks_reusable() {
    if (buffer.size() != 0)
      return false;
    // Used a moment ago: a server that closes an idle connection has not done so yet, and one
    // that closed it at its last answer said so (that connection was not kept). Failing that,
    // a request on it that gets no answer is tried again on a new connection.
    if (Clock::now() - idle_since < kRecentlyUsed)
      return true;
    const int fd = native_handle();
    if (fd < 0)
      return false;
    char byte = 0;
    const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  Stream stream;
  std::optional<tcp::resolver> resolver{};
  beast::flat_buffer buffer{};
  Clock::time_point idle_since{};
};

// What one attempt produced: an answer, or the error and how far it got.
struct AttemptResult {
  std::optional<ClientResponse> response{};
  bool keep_alive = false;
  error_code error{};
  const char* stage = "";  // what failed: "connecting", "sending the request", ...
  bool answered = false;   // some byte of an answer arrived
  bool timed_out = false;
};

bool no_answer_failure(const AttemptResult& r) {
  if (r.answered || r.timed_out)
    return false;
  return is_connection_failure(r.error) || r.error == bhttp::error::end_of_stream ||
         r.error == ssl::error::stream_truncated;
}

// Closes the connection when the deadline passes. The handler may run after the attempt ended
// (its timer expired just before being cancelled): `armed` tells it the attempt is over.
class Watchdog {
 public:
  Watchdog(const asio::any_io_executor& ex, Clock::time_point deadline,
           std::shared_ptr<Connection> connection)
      : timer_(ex, deadline) {
    timer_.async_wait([armed = armed_, fired = fired_, connection](const error_code& ec) {
      if (ec || !*armed)
        return;
      *fired = true;
      connection->abort();
    });
  }
  ~Watchdog() {
    *armed_ = false;
    timer_.cancel();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  bool fired() const { return *fired_; }

 private:
  std::shared_ptr<bool> armed_ = std::make_shared<bool>(true);
  std::shared_ptr<bool> fired_ = std::make_shared<bool>(false);
  asio::steady_timer timer_;
};

// A body that keeps nothing: each piece the parser yields goes to the request's on_body as it is
// parsed. An exception from the callback is kept and stops the parse; exchange() rethrows it.
struct CallbackBody {
  struct value_type {
    const std::function<void(std::string_view)>* sink = nullptr;
    std::exception_ptr failure{};
  };

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>&, error_code& ec) { ec = {}; }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, error_code& ec) {
      ec = {};
      std::size_t used = 0;
      for (const auto piece : beast::buffers_range_ref(buffers)) {
        const std::string_view bytes(static_cast<const char*>(piece.data()), piece.size());
        const Outcome<void> passed = capture([&] { (*body_.sink)(bytes); });
        if (!passed) {
          body_.failure = passed.error();
          ec = boost::system::errc::make_error_code(boost::system::errc::operation_canceled);
          return used;
        }
        used += piece.size();
      }
      return used;
    }

    void finish(error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

void copy_headers(const bhttp::fields& fields, ClientResponse& out) {
  for (const auto& field : fields)
    out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
}

}  // namespace

std::optional<std::string_view> ClientResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (beast::iequals(key, name))
      return std::string_view(value);
  }
  return std::nullopt;
}

struct detail::ClientState {
  ClientState(asio::any_io_executor executor, Url base, ClientConfig config)
      : ex(std::move(executor)), url(std::move(base)), cfg(std::move(config)) {
    if (url.scheme == Url::Scheme::https)
      tls.emplace(make_tls_context(cfg));
  }

  static ssl::context make_tls_context(const ClientConfig& cfg) {
    ssl::context ctx(ssl::context::tls_client);
    error_code ec;
    ctx.set_default_verify_paths(ec);  // no system store is not an error when ca_file is given
    if (!cfg.ca_file.empty()) {
      ctx.load_verify_file(cfg.ca_file, ec);
      if (ec) {
        throw std::invalid_argument(
            fmt::format("cannot load the CA file '{}': {}", cfg.ca_file, ec.message()));
      }
    }
    if (!cfg.ca_pem.empty()) {
      ctx.add_certificate_authority(asio::buffer(cfg.ca_pem), ec);
      if (ec)
        throw std::invalid_argument(
            fmt::format("cannot load the CA certificates given as text: {}", ec.message()));
    }
    if (!cfg.cert_pem.empty() || !cfg.key_pem.empty()) {
      if (cfg.cert_pem.empty() || cfg.key_pem.empty() || !cfg.cert_file.empty() ||
          !cfg.key_file.empty())
        throw std::invalid_argument(
            "a TLS client certificate given as text needs its key as text, and no files");
      ctx.use_certificate_chain(asio::buffer(cfg.cert_pem), ec);
      if (ec)
        throw std::invalid_argument(
            fmt::format("cannot load the TLS client certificate given as text: {}", ec.message()));
      ctx.use_private_key(asio::buffer(cfg.key_pem), ssl::context::pem, ec);
      if (ec)
        throw std::invalid_argument(
            fmt::format("cannot load the TLS client key given as text: {}", ec.message()));
      if (SSL_CTX_check_private_key(ctx.native_handle()) != 1)
        throw std::invalid_argument("the TLS client key given does not match the certificate");
    }
    if (cfg.cert_file.empty() != cfg.key_file.empty()) {
      throw std::invalid_argument(fmt::format(
          "a TLS client certificate needs both a certificate file and a key file (got '{}' and "
          "'{}')",
          cfg.cert_file, cfg.key_file));
    }
    if (!cfg.cert_file.empty()) {
      ctx.use_certificate_chain_file(cfg.cert_file, ec);
      if (ec) {
        throw std::invalid_argument(fmt::format("cannot load the TLS client certificate '{}': {}",
                                                cfg.cert_file, ec.message()));
      }
      ctx.use_private_key_file(cfg.key_file, ssl::context::pem, ec);
      if (ec) {
        throw std::invalid_argument(
            fmt::format("cannot load the TLS client key '{}': {}", cfg.key_file, ec.message()));
      }
      if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
        throw std::invalid_argument(
            fmt::format("the TLS client key '{}' does not match the certificate '{}'", cfg.key_file,
                        cfg.cert_file));
      }
    }
    ctx.set_verify_mode(cfg.verify_peer ? ssl::verify_peer : ssl::verify_none);
    return ctx;
  }

  std::shared_ptr<Connection> make_connection() {
    ++opened;
    switch (url.scheme) {
      case Url::Scheme::http:
        return std::make_shared<Connection>(std::in_place_type<tcp::socket>, ex);
      case Url::Scheme::https:
        return std::make_shared<Connection>(std::in_place_type<TlsStream>, ex, *tls);
      case Url::Scheme::http_unix:
        break;
    }
    return std::make_shared<Connection>(std::in_place_type<UnixSocket>, ex);
  }

  // An idle connection that still looks usable, or a new one (`reused` says which).
  std::shared_ptr<Connection> acquire(bool force_new, bool& reused) {
    while (!force_new && !idle.empty()) {
      auto c = std::move(idle.back());
      idle.pop_back();
      if (Clock::now() - c->idle_since < cfg.idle_timeout && c->looks_reusable()) {
        reused = true;
        return c;
      }
      c->abort();
    }
    reused = false;
    return make_connection();
  }

  void release(std::shared_ptr<Connection> c) {
    if (idle.size() >= cfg.max_idle_connections) {
      c->abort();
      return;
    }
    c->resolver.reset();
    c->idle_since = Clock::now();
    idle.push_back(std::move(c));
  }

  double random01() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

  asio::any_io_executor ex;
  Url url;
  ClientConfig cfg;
  std::optional<ssl::context> tls{};
  std::vector<std::shared_ptr<Connection>> idle{};  // most recently used last
  std::uint64_t opened = 0;
  std::mt19937_64 rng{std::random_device{}()};
};

namespace {

using State = detail::ClientState;

// Connects a fresh connection: resolve (names only), TCP connect trying each address, TLS
// handshake; or connect the unix socket.
asio::awaitable<AttemptResult> open_connection(State& st, Connection& c, const Watchdog& dog) {
  AttemptResult r;
  r.stage = "connecting";
  auto token = asio::redirect_error(asio::use_awaitable, r.error);
  if (auto* unix_socket = std::get_if<UnixSocket>(&c.stream)) {
    const asio::local::stream_protocol::endpoint endpoint(st.url.socket_path);
    co_await unix_socket->async_connect(endpoint, token);
    co_return r;
  }
  std::vector<tcp::endpoint> endpoints;
  error_code parse_error;
  const auto address = asio::ip::make_address(st.url.host, parse_error);
  if (!parse_error) {
    endpoints.emplace_back(address, st.url.port);
  } else {
    c.resolver.emplace(st.ex);
    const std::string port = std::to_string(st.url.port);
    const auto results = co_await c.resolver->async_resolve(st.url.host, port, token);
    if (r.error)
      co_return r;
    for (const auto& entry : results)
      endpoints.push_back(entry.endpoint());
  }
  auto* tls = std::get_if<TlsStream>(&c.stream);
  tcp::socket& socket = tls != nullptr ? tls->next_layer() : std::get<tcp::socket>(c.stream);
  for (const auto& endpoint : endpoints) {
    if (dog.fired())
      co_return r;
    error_code ignored;
    socket.close(ignored);
    co_await socket.async_connect(endpoint, token);
    if (!r.error)
      break;
  }
  if (r.error)
    co_return r;
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (tls != nullptr) {
    r.stage = "in the TLS handshake";
    const std::string& name = st.cfg.tls_server_name.empty() ? st.url.host : st.cfg.tls_server_name;
    error_code not_an_address;
    asio::ip::make_address(name, not_an_address);
    // Server name indication, for servers that host several names; not sent for addresses.
    if (not_an_address && !SSL_set_tlsext_host_name(tls->native_handle(), name.c_str())) {
      r.error = error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
      co_return r;
    }
    if (st.cfg.verify_peer)
      tls->set_verify_callback(ssl::host_name_verification(name));
    co_await tls->async_handshake(ssl::stream_base::client, token);
  }
  co_return r;
}

// The request as it goes on the wire over a plain socket: its head as text and its body, in one
// gathered write tried at once; the event loop is waited on only when the socket is full.
template <class Socket>
asio::awaitable<void> write_plain(Socket& socket, const OutgoingRequest& message, error_code& ec) {
  std::string head;
  head.reserve(256);
  head.append(message.method_string()).append(" ").append(message.target()).append(" HTTP/1.1\r\n");
  for (const auto& field : message.base())
    head.append(field.name_string()).append(": ").append(field.value()).append("\r\n");
  head.append("\r\n");
  // A chunked body goes as one chunk and the last one.
  std::string_view end_of_body;
  if (message.chunked() && !message.body().empty()) {
    fmt::format_to(std::back_inserter(head), "{:x}\r\n", message.body().size());
    end_of_body = "\r\n0\r\n\r\n";
  } else if (message.chunked()) {
    end_of_body = "0\r\n\r\n";
  }
  const std::array<asio::const_buffer, 3> pieces{
      asio::buffer(head), asio::buffer(message.body()),
      asio::buffer(end_of_body.data(), end_of_body.size())};
  if (!socket.non_blocking())  // asks the kernel each time it is set: once per connection
    socket.non_blocking(true, ec);
  std::size_t sent = 0;
  if (!ec)
    sent = socket.write_some(pieces, ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ec = {};
    sent = 0;
  }
  if (ec || sent == asio::buffer_size(pieces))
    co_return;
  beast::buffers_suffix<std::array<asio::const_buffer, 3>> rest(pieces);
  rest.consume(sent);
  co_await asio::async_write(socket, rest, asio::redirect_error(asio::use_awaitable, ec));
}

// Feeds `parser` from the connection's buffer, then from the socket as it becomes readable,
// until it has the header (`header_only`) or the whole message. Bytes already here are parsed
// without a trip through the event loop. The ends of the stream are told as Beast's reads tell
// them: end_of_stream before any byte, partial_message within one.
template <class Socket, class Parser>
asio::awaitable<void> read_plain(Socket& socket, beast::flat_buffer& buffer, Parser& parser,
                                 bool header_only, error_code& ec) {
  auto enough = [&] { return header_only ? parser.is_header_done() : parser.is_done(); };
  if (!socket.non_blocking())
    socket.non_blocking(true, ec);
  while (!ec && !enough()) {
    if (buffer.size() > 0) {
      const std::size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == bhttp::error::need_more)
        ec = {};
      if (ec || enough() || used > 0)
        continue;
    }
    const std::size_t n = socket.read_some(buffer.prepare(beast::read_size(buffer, 65536)), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      ec = {};
      co_await socket.async_wait(asio::socket_base::wait_read,
                                 asio::redirect_error(asio::use_awaitable, ec));
    } else if (ec == asio::error::eof) {
      ec = {};
      if (parser.got_some())
        parser.put_eof(ec);
      else
        ec = bhttp::error::end_of_stream;
      if (!ec && !enough())
        ec = bhttp::error::partial_message;
    } else if (!ec) {
      buffer.commit(n);
    }
  }
}

// An answer kept in memory, read over a plain socket by one parser, header and body alike.
template <class Socket>
asio::awaitable<AttemptResult> read_in_memory(Socket& socket, Connection& c, bool head_request,
                                              const ClientConfig& cfg, const std::string& url,
                                              AttemptResult r) {
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(cfg.max_body_in_memory);
  parser.skip(head_request);
  co_await read_plain(socket, c.buffer, parser, false, r.error);
  r.answered = parser.is_header_done() || parser.got_some() || c.buffer.size() > 0;
  if (parser.is_header_done())
    r.stage = "reading the answer";
  if (r.error == bhttp::error::body_limit) {
    std::optional<std::uint64_t> length;
    if (parser.is_header_done() && parser.content_length())
      length = *parser.content_length();
    detail::refuse_large_answer(url, length, cfg.max_body_in_memory);
  }
  if (r.error)
    co_return r;
  ClientResponse response;
  response.status = parser.get().result_int();
  copy_headers(parser.get(), response);
  response.body = std::move(parser.get().body());
  r.keep_alive = parser.keep_alive();
  r.response = std::move(response);
  co_return r;
}

// Writes the request and reads the answer on an open connection.
template <class Stream>
asio::awaitable<AttemptResult> exchange(Stream& stream, Connection& c, OutgoingRequest& message,
                                        const ClientRequest& request, const ClientConfig& cfg,
                                        const std::string& url) {
  AttemptResult r;
  auto token = asio::redirect_error(asio::use_awaitable, r.error);
  r.stage = "sending the request";
  if (!request.body_file.empty()) {
    bhttp::request<bhttp::file_body> file_message(message.base());
    error_code open_error;
    file_message.body().open(request.body_file.c_str(), beast::file_mode::scan, open_error);
    if (open_error)
      throw_os_error(open_error.value(), request.body_file);
    if (cfg.chunked_request_bodies)
      file_message.chunked(true);
    else
      file_message.prepare_payload();
    co_await bhttp::async_write(stream, file_message, token);
  } else if constexpr (std::is_same_v<Stream, TlsStream>) {
    co_await bhttp::async_write(stream, message, token);
  } else {
    co_await write_plain(stream, message, r.error);
  }
  if (r.error)
    co_return r;

  r.stage = "waiting for the answer";
  if constexpr (!std::is_same_v<Stream, TlsStream>) {
    // The answer cannot be there yet: wait for it rather than try a read bound to fail first.
    if (c.buffer.size() == 0)
      co_await stream.async_wait(asio::socket_base::wait_read, token);
    if (r.error)
      co_return r;
    if (request.response_file.empty() && !request.on_body) {
      co_return co_await read_in_memory(stream, c, message.method() == bhttp::verb::head, cfg, url,
                                        std::move(r));
    }
  }
  bhttp::response_parser<bhttp::empty_body> head;
  head.header_limit(kHeaderLimit);
  head.body_limit(boost::none);  // the real limit is set once the body's destination is known
  head.skip(message.method() == bhttp::verb::head);
  if constexpr (std::is_same_v<Stream, TlsStream>)
    co_await bhttp::async_read_header(stream, c.buffer, head, token);
  else
    co_await read_plain(stream, c.buffer, head, true, r.error);
  if (r.error) {
    r.answered = head.got_some() || c.buffer.size() > 0;
    co_return r;
  }
  r.answered = true;
  r.stage = "reading the answer";
  ClientResponse response;
  response.status = head.get().result_int();
  if (!request.response_file.empty() && response.status / 100 == 2) {
    bhttp::response_parser<bhttp::file_body> parser(std::move(head));
    error_code open_error;
    parser.get().body().open(request.response_file.c_str(), beast::file_mode::write, open_error);
    if (open_error)
      throw_os_error(open_error.value(), request.response_file);
    if (!parser.is_done())
      co_await bhttp::async_read(stream, c.buffer, parser, token);
    if (r.error)
      co_return r;
    parser.get().body().close();
    copy_headers(parser.get(), response);
    response.body_in_file = true;
    r.keep_alive = parser.keep_alive();
  } else if (request.on_body && response.status / 100 == 2) {
    bhttp::response_parser<CallbackBody> parser(std::move(head));
    parser.get().body().sink = &request.on_body;
    if (!parser.is_done())
      co_await bhttp::async_read(stream, c.buffer, parser, token);
    if (parser.get().body().failure)
      std::rethrow_exception(parser.get().body().failure);
    if (r.error)
      co_return r;
    copy_headers(parser.get(), response);
    r.keep_alive = parser.keep_alive();
  } else {
    const auto length = head.content_length();
    if (length && *length > cfg.max_body_in_memory)
      detail::refuse_large_answer(url, *length, cfg.max_body_in_memory);
    bhttp::response_parser<bhttp::string_body> parser(std::move(head));
    parser.body_limit(cfg.max_body_in_memory);
    if (!parser.is_done()) {
      if constexpr (std::is_same_v<Stream, TlsStream>)
        co_await bhttp::async_read(stream, c.buffer, parser, token);
      else
        co_await read_plain(stream, c.buffer, parser, false, r.error);
    }
    if (r.error == bhttp::error::body_limit)
      detail::refuse_large_answer(url, std::nullopt, cfg.max_body_in_memory);
    if (r.error)
      co_return r;
    copy_headers(parser.get(), response);
    response.body = std::move(parser.get().body());
    r.keep_alive = parser.keep_alive();
  }
  r.response = std::move(response);
  co_return r;
}

asio::awaitable<AttemptResult> exchange_any(Connection& c, OutgoingRequest& message,
                                            const ClientRequest& request, const ClientConfig& cfg,
                                            const std::string& url) {
  if (auto* tcp_socket = std::get_if<tcp::socket>(&c.stream))
    co_return co_await exchange(*tcp_socket, c, message, request, cfg, url);
  if (auto* tls = std::get_if<TlsStream>(&c.stream))
    co_return co_await exchange(*tls, c, message, request, cfg, url);
  co_return co_await exchange(std::get<UnixSocket>(c.stream), c, message, request, cfg, url);
}

// One attempt on one connection, under the request's deadline.
asio::awaitable<AttemptResult> attempt(std::shared_ptr<State> st, std::shared_ptr<Connection> c,
                                       bool reused, OutgoingRequest& message,
                                       const ClientRequest& request, Clock::time_point deadline,
                                       const std::string& url) {
  const Watchdog dog(st->ex, deadline, c);
  AttemptResult r;
  if (!reused)
    r = co_await open_connection(*st, *c, dog);
  if (!r.error && !dog.fired())
    r = co_await exchange_any(*c, message, request, st->cfg, url);
  r.timed_out = dog.fired();
  co_return r;
}

OutgoingRequest build_message(const State& st, ClientRequest& request) {
  const auto verb = bhttp::string_to_verb(request.method);
  if (verb == bhttp::verb::unknown)
    throw std::invalid_argument(fmt::format("unknown HTTP method '{}'", request.method));
  if (!request.target.starts_with('/')) {
    throw std::invalid_argument(
        fmt::format("request target '{}' must start with '/'", request.target));
  }
  OutgoingRequest message(verb, st.url.prefix + request.target, 11);
  for (const auto& [name, value] : request.headers)
    message.insert(name, value);
  for (const auto& [name, value] : st.cfg.headers) {
    if (message.find(name) == message.end())
      message.insert(name, value);
  }
  if (st.cfg.header_source) {
    for (const auto& [name, value] : st.cfg.header_source()) {
      if (message.find(name) == message.end())
        message.insert(name, value);
    }
  }
  if (message.find(bhttp::field::host) == message.end())
    message.set(bhttp::field::host, st.url.host_header());
  if (message.find(bhttp::field::user_agent) == message.end() && !st.cfg.user_agent.empty())
    message.set(bhttp::field::user_agent, st.cfg.user_agent);
  message.keep_alive(true);
  if (request.body_file.empty()) {
    message.body() = std::move(request.body);
    if (st.cfg.chunked_request_bodies && !message.body().empty())
      message.chunked(true);
    else
      message.prepare_payload();
  }
  return message;
}

asio::awaitable<ClientResponse> perform(std::shared_ptr<State> st, ClientRequest request) {
  OutgoingRequest message = build_message(*st, request);
  const std::string url = st->url.text + request.target;
  const auto timeout =
      std::min<Clock::duration>(request.timeout.value_or(st->cfg.timeout), kLongestTimeout);
  const auto deadline = Clock::now() + timeout;
  const RetryPolicy policy = request.retry.value_or(st->cfg.retry);

  unsigned attempts = 0;
  unsigned retries = 0;
  bool stale_retry_left = true;
  bool force_new = false;
  while (true) {
    ++attempts;
    bool reused = false;
    auto connection = st->acquire(force_new, reused);
    AttemptResult r = co_await attempt(st, connection, reused, message, request, deadline, url);
    if (r.response) {
      if (r.keep_alive)
        st->release(std::move(connection));
      else
        connection->abort();
      co_return std::move(*r.response);
    }
    connection->abort();
    if (r.timed_out) {
      throw detail::timed_out(request.method, url, timeout);
    }
    // The awaiting coroutine was cancelled: report it the way Asio operations do.
    if (r.error == asio::error::operation_aborted)
      throw boost::system::system_error(r.error);
    const bool retryable = no_answer_failure(r);
    force_new = true;
    if (retryable && reused && stale_retry_left) {
      // The server closed the idle connection as we reused it: not a failure of the server.
      stale_retry_left = false;
      --attempts;
      continue;
    }
    std::string why = r.error.message();
    if (retryable && retries < policy.max_retries) {
      ++retries;
      const auto delay = retry_delay(policy, retries, st->random01());
      if (Clock::now() + delay < deadline) {
        asio::steady_timer pause(st->ex, delay);
        co_await pause.async_wait(asio::use_awaitable);
        continue;
      }
      why += fmt::format("; no time left for another attempt within the {} timeout",
                         seconds_text(timeout));
    }
    // A malformed answer is the server's fault, not the connection's.
    const bool malformed =
        r.error.category() == bhttp::make_error_code(bhttp::error::partial_message).category() &&
        r.error != bhttp::error::end_of_stream && r.error != bhttp::error::partial_message;
    detail::throw_failed(request.method, url, r.stage, why, r.error.message(), attempts, malformed);
  }
}

}  // namespace

Client::Client(asio::any_io_executor executor, std::string_view base_url, ClientConfig config)
    : state_(std::make_shared<detail::ClientState>(std::move(executor), parse_url(base_url),
                                                   std::move(config))) {}

Client::~Client() {
  close_idle_connections();
}

void Client::close_idle_connections() noexcept {
  for (auto& c : state_->idle)
    c->abort();
  state_->idle.clear();
}

asio::awaitable<ClientResponse> Client::request(ClientRequest request) {
  co_return co_await perform(state_, std::move(request));
}

const Url& Client::base_url() const noexcept {
  return state_->url;
}

std::string Client::url_of(std::string_view target) const {
  return state_->url.text + std::string(target);
}

asio::any_io_executor Client::get_executor() const noexcept {
  return state_->ex;
}

std::size_t Client::idle_connections() const noexcept {
  return state_->idle.size();
}

std::uint64_t Client::connections_opened() const noexcept {
  return state_->opened;
}

}  // namespace rex::http
