#include "runtime/forward_link.hpp"

#include "http/client_failures.hpp"

#include <rex/http/client_errors.hpp>
#include <rex/protocol/exceptions.hpp>

#include <fmt/format.h>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/object.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <charconv>

namespace rex::detail {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;
using error_code = boost::system::error_code;
using generic_socket = asio::generic::stream_protocol::socket;

namespace {

constexpr std::size_t kHeaderLimit = 64 * 1024;
constexpr Clock::duration kTick = std::chrono::seconds(1);

bool address_literal(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

bool parse_answer_head(std::string_view text, AnswerHead& h) {
  h.size = text.size();
  const std::size_t first_end = text.find("\r\n");
  const std::string_view line = text.substr(0, first_end);
  // "HTTP/1.x NNN reason"
  if (line.size() < 12 || !line.starts_with("HTTP/1.") || line[8] != ' ' ||
      (line.size() > 12 && line[12] != ' '))
    return false;
  h.minor_version = static_cast<unsigned>(line[7] - '0');
  const auto [end, ec] = std::from_chars(line.data() + 9, line.data() + 12, h.status);
  if (ec != std::errc() || end != line.data() + 12)
    return false;
  std::size_t at = first_end + 2;
  h.headers.reserve(8);
  while (at < text.size()) {
    const std::size_t next = text.find("\r\n", at);
    if (next == std::string_view::npos || next == at)
      break;
    const std::string_view field = text.substr(at, next - at);
    at = next + 2;
    if (field.front() == ' ' || field.front() == '\t') {
      h.other_framing = true;  // a folded line (obsolete): Beast's parser reads this answer
      continue;
    }
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return false;
    const std::string_view name = field.substr(0, colon);
    const std::string_view value = trim(field.substr(colon + 1));
    if (beast::iequals(name, "content-length")) {
      std::uint64_t n = 0;
      const auto [p, e] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (e != std::errc() || p != value.data() + value.size() ||
          (h.content_length && *h.content_length != n))
        h.other_framing = true;  // a list, or lengths that differ: Beast's parser judges it
      else
        h.content_length = n;
    } else if (beast::iequals(name, "transfer-encoding")) {
      h.other_framing = true;
    } else if (beast::iequals(name, "connection")) {
      if (beast::iequals(value, "close"))
        h.close = true;
    }
    h.headers.emplace_back(std::string(name), std::string(value));
  }
  if (h.minor_version == 0)
    h.close = true;  // no keep-alive negotiated with an HTTP/1.0 server
  const bool bodyless = h.status / 100 == 1 || h.status == 204 || h.status == 304;
  if (!h.content_length && !bodyless)
    h.other_framing = true;
  return true;
}

struct ForwardLink::State : std::enable_shared_from_this<State> {
  State(asio::any_io_executor executor, http::Url base, const http::ClientConfig& cfg,
        const Headers& headers)
      : url(std::move(base)),
        max_body(cfg.max_body_in_memory),
        idle_timeout(cfg.idle_timeout),
        socket(executor),
        timer(executor) {
    Headers sent;  // a header given twice goes once, as first given
    auto add = [this, &sent](std::string_view name, std::string_view value) {
      for (const auto& [have, ignored] : sent)
        if (beast::iequals(have, name))
          return;
      sent.emplace_back(name, value);
      fixed.append(name).append(": ").append(value).append("\r\n");
    };
    for (const auto& [name, value] : headers)
      add(name, value);
    for (const auto& [name, value] : cfg.headers)
      add(name, value);
    add("Host", url.host_header());
    if (!cfg.user_agent.empty())
      add("User-Agent", cfg.user_agent);
  }

  // The call's deadline, watched by one timer that wakes at most once a second while calls
  // go on (a call costs no timer operation of its own), and stops when none is under way.
  void watch(Clock::time_point d) {
    timed_out = false;
    deadline = d;
    if (!timer_armed || timer.expiry() > d)
      arm(std::min(d, Clock::now() + kTick));
  }

  void arm(Clock::time_point at) {
    timer_armed = true;
    timer.expires_at(at);  // a wait it replaces ends as cancelled
    timer.async_wait([self = shared_from_this(), generation = ++timer_generation](error_code ec) {
      if (generation != self->timer_generation)
        return;  // replaced by a later arm()
      self->timer_armed = false;
      if (ec || !self->busy)
        return;  // closed, or no call is under way
      if (Clock::now() >= self->deadline) {
        self->timed_out = true;
        self->drop();
        return;
      }
      self->arm(std::min(self->deadline, Clock::now() + kTick));
    });
  }

  void disarm() {
    ++timer_generation;
    timer_armed = false;
    timer.cancel();
  }

  void drop() noexcept {
    error_code ignored;
    socket.close(ignored);
    buffer.clear();
  }

  asio::awaitable<bool> connect() {
    error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    if (url.scheme == http::Url::Scheme::http_unix) {
      const asio::local::stream_protocol::endpoint unix_endpoint(url.socket_path);
      const asio::generic::stream_protocol::endpoint endpoint(unix_endpoint);
      socket.open(endpoint.protocol(), ec);
      if (!ec)
        co_await socket.async_connect(endpoint, token);
    } else {
      const asio::ip::tcp::endpoint tcp_endpoint(asio::ip::make_address(url.host), url.port);
      const asio::generic::stream_protocol::endpoint endpoint(tcp_endpoint);
      socket.open(endpoint.protocol(), ec);
      if (!ec)
        co_await socket.async_connect(endpoint, token);
      if (!ec)
        socket.set_option(asio::ip::tcp::no_delay(true), ec);
    }
    if (!ec)
      socket.non_blocking(true, ec);
    if (ec)
      drop();
    co_return !ec;
  }

  // Reads more of the answer into `buffer`: what the socket holds, else waits for it. An end
  // of the stream is asio::error::eof.
  asio::awaitable<void> read_more(error_code& ec) {
    while (true) {
      const std::size_t old = buffer.size();
      buffer.resize(old + 16384);
      const std::size_t n = socket.read_some(asio::buffer(buffer.data() + old, 16384), ec);
      buffer.resize(old + (ec ? 0 : n));
      if (ec != asio::error::would_block && ec != asio::error::try_again)
        co_return;
      ec = {};
      co_await socket.async_wait(asio::socket_base::wait_read,
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec)
        co_return;
    }
  }

  http::Url url;
  std::uint64_t max_body;
  Clock::duration idle_timeout;
  generic_socket socket;
  asio::steady_timer timer;
  std::uint64_t timer_generation = 0;
  bool timer_armed = false;
  Clock::time_point deadline{};
  bool timed_out = false;
  bool busy = false;
  Clock::time_point idle_since{};
  std::string fixed;   // the header lines every request carries
  std::string head;    // the request's head, rebuilt for each call
  std::string buffer;  // bytes of the answer read and not yet used
};

bool ForwardLink::serves(const http::Url& url, const http::ClientConfig& cfg) {
  if (cfg.header_source)
    return false;
  return url.scheme == http::Url::Scheme::http_unix ||
         (url.scheme == http::Url::Scheme::http && address_literal(url.host));
}

ForwardLink::ForwardLink(asio::any_io_executor ex, http::Url url, const http::ClientConfig& cfg,
                         Headers headers)
    : st_(std::make_shared<State>(std::move(ex), std::move(url), cfg, headers)) {}

ForwardLink::~ForwardLink() {
  close();
}

bool ForwardLink::busy() const noexcept {
  return st_->busy;
}

void ForwardLink::close() noexcept {
  st_->disarm();
  st_->drop();
}

asio::awaitable<std::optional<http::ClientResponse>> ForwardLink::call(std::string_view method,
                                                                       std::string_view target,
                                                                       std::string_view request_id,
                                                                       const std::string& body,
                                                                       Clock::duration timeout) {
  const std::shared_ptr<State> st = st_;
  State& s = *st;
  s.busy = true;
  struct Done {
    State& s;
    bool ok = false;
    ~Done() {
      s.busy = false;  // the timer, at its next tick, stops
      if (!ok)
        s.drop();  // what the connection holds is not known
    }
  } done{s};
  auto url = [&] { return s.url.text + std::string(target); };
  auto timed_out = [&] { return http::detail::timed_out(method, url(), timeout); };
  error_code ec;
  // A call that cannot go on: its time ran out, it was cancelled, or its answer broke off.
  auto fail = [&](const std::string& why) {
    s.drop();
    if (s.timed_out)
      throw timed_out();
    if (ec == asio::error::operation_aborted)
      throw boost::system::system_error(ec);
    http::detail::throw_failed(method, url(), "reading the answer", why, why, 1, false);
  };
  const Clock::time_point now = Clock::now();
  s.watch(now + timeout);

  if (s.socket.is_open() && now - s.idle_since >= s.idle_timeout)
    s.drop();  // the server may be closing it: a new one costs less than a failed reuse
  if (!s.socket.is_open() && !co_await s.connect()) {
    if (s.timed_out)
      throw timed_out();
    co_return std::nullopt;
  }

  std::string& head = s.head;
  head.clear();
  head.append(method).append(" ").append(s.url.prefix).append(target).append(" HTTP/1.1\r\n");
  head.append(s.fixed).append("X-Request-ID: ").append(request_id).append("\r\n");
  if (!body.empty())
    head.append("Content-Type: application/json\r\n");
  std::array<char, 24> length{};
  const auto written = std::to_chars(length.data(), length.data() + length.size(), body.size());
  head.append("Content-Length: ").append(length.data(), written.ptr).append("\r\n\r\n");
  const std::array<asio::const_buffer, 2> pieces{asio::buffer(head), asio::buffer(body)};
  std::size_t sent = s.socket.write_some(pieces, ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ec = {};
    sent = 0;
  }
  if (!ec && sent < head.size() + body.size()) {
    beast::buffers_suffix<std::array<asio::const_buffer, 2>> rest(pieces);
    rest.consume(sent);
    co_await asio::async_write(s.socket, rest, asio::redirect_error(asio::use_awaitable, ec));
  }

  if (ec) {
    s.drop();
    if (s.timed_out)
      throw timed_out();
    co_return std::nullopt;
  }

  // The answer cannot be there yet: the read waits for it rather than try first and fail. (A
  // read, not a wait for readability: Asio re-registers the socket with epoll for each wait.)
  if (s.buffer.empty()) {
    s.buffer.resize(16384);
    const std::size_t n = co_await s.socket.async_read_some(
        asio::buffer(s.buffer), asio::redirect_error(asio::use_awaitable, ec));
    s.buffer.resize(ec ? 0 : n);
  }
  AnswerHead h;
  std::size_t head_end = std::string::npos;
  while (!ec) {
    head_end = s.buffer.find("\r\n\r\n");
    if (head_end != std::string::npos || s.buffer.size() > kHeaderLimit)
      break;
    co_await s.read_more(ec);
  }
  if (ec && s.buffer.empty() && !s.timed_out && ec != asio::error::operation_aborted) {
    s.drop();
    co_return std::nullopt;  // nothing of an answer: the connection was found closed
  }
  if (ec)
    fail(ec == asio::error::eof ? "partial message" : ec.message());
  if (head_end == std::string::npos ||
      !parse_answer_head(std::string_view(s.buffer).substr(0, head_end + 4), h)) {
    s.drop();
    throw SwerexException(fmt::format("{} {}: the answer is not HTTP", method, url()));
  }

  http::ClientResponse response;
  response.status = h.status;
  if (!h.other_framing) {
    const std::uint64_t length = h.content_length.value_or(0);
    if (length > s.max_body) {
      s.drop();
      http::detail::refuse_large_answer(url(), length, s.max_body);
    }
    while (!ec && s.buffer.size() < h.size + length)
      co_await s.read_more(ec);
    if (ec)
      fail(ec == asio::error::eof ? "partial message" : ec.message());
    response.body.assign(s.buffer, h.size, length);
    s.buffer.erase(0, h.size + length);
  } else {
    // Chunked, or up to the connection's end: Beast's parser reads it.
    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(s.max_body);
    parser.eager(true);
    while (!ec && !parser.is_done()) {
      if (!s.buffer.empty()) {
        const std::size_t used = parser.put(asio::buffer(s.buffer), ec);
        s.buffer.erase(0, used);
        if (ec == bhttp::error::need_more)
          ec = {};
        if (ec || parser.is_done() || used > 0)
          continue;
      }
      co_await s.read_more(ec);
      if (ec == asio::error::eof) {
        ec = {};
        parser.put_eof(ec);
        if (!ec && !parser.is_done())
          ec = bhttp::error::partial_message;
      }
    }
    if (ec == bhttp::error::body_limit) {
      s.drop();
      http::detail::refuse_large_answer(url(), std::nullopt, s.max_body);
    }
    if (ec)
      fail(ec.message());
    response.body = std::move(parser.get().body());
    h.close = h.close || !parser.keep_alive();
  }
  response.headers = std::move(h.headers);
  // Bytes after the answer are none of a request's: the connection cannot be trusted.
  if (h.close || !s.buffer.empty())
    s.drop();
  s.idle_since = Clock::now();
  done.ok = true;
  co_return response;
}

}  // namespace rex::detail
