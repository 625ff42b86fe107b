// E2B's port routing on the gateway: a request for port P of a sandbox (a server its user
// started in it) goes to that port, whatever its method and path. E2B's SDKs name the port in
// two ways: pointed at one URL (E2B_SANDBOX_URL, the gateway), with the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers; in E2B's cloud, by the host name `P-<sandbox id>.<domain>`. envd's
// own port, 49983, stays with the gateway's routes (e2b_envd.cpp). The gateway serves both on
// one listener, so the routing is its route table's interceptor, consulted before any route.
//
// A request proves itself with its sandbox's envdAccessToken (X-Access-Token, or
// e2b-traffic-access-token), counts as activity of the session and leaves one line in its
// transcript when it ends. It is sent on once (never retried) with its method, target, body and
// headers, but the hop-by-hop and routing ones; the answer comes back as it arrives, so
// Server-Sent Events and other streams reach the caller as they are written. A caller that
// leaves closes the connection to the sandbox's port. Refusals have E2B's shape,
// {"code": status, "message"}.
//
// The connection to the port is Beast's, not rex's http::Client: a relay passes on an answer's
// status and headers before its body ends, and the client gives them with the whole answer only.
#include <rex/core/log.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/http/url.hpp>
#include <rex/server/admission.hpp>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/api_error.hpp"
#include "gateway/gateway_impl.hpp"

namespace rex::gateway {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using server::Answer;
using server::RelayedAnswer;
using server::Request;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

constexpr std::uint16_t kEnvdPort = 49983;
constexpr std::string_view kPortHeader = "E2b-Sandbox-Port";
constexpr std::string_view kIdHeader = "E2b-Sandbox-Id";
constexpr std::string_view kTokenHeader = "X-Access-Token";
constexpr std::string_view kTrafficTokenHeader = "e2b-traffic-access-token";
constexpr auto kConnectTimeout = 10s;
// Past the session's deadline its sandbox ends itself; this much later a relay gives up.
constexpr double kDeadlineSlack = 60;
constexpr std::size_t kPiece = 64 * 1024;
constexpr std::uint32_t kHeaderLimit = 64 * 1024;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string_view view(beast::string_view v) {
  return {v.data(), v.size()};
}

// A port number: decimal digits, 1 to 65535.
std::optional<std::uint16_t> port_number(std::string_view text) {
  if (text.empty() || text.size() > 5)
    return std::nullopt;
  unsigned value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535)
    return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// What a request names: a port (as written) of a sandbox. None for envd's port or no port.
struct PortTarget {
  std::string port;
  std::string sandbox_id;
  bool by_host = false;  // named by the Host `P-<id>.<domain>`, not by the headers
};

// The port and sandbox of a Host `P-<id>.<domain>[:port]`.
std::optional<PortTarget> host_form(std::string_view host) {
  const auto dot = host.find('.');
  if (dot == std::string_view::npos)
    return std::nullopt;
  const std::string_view label = host.substr(0, dot);
  const auto dash = label.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == label.size())
    return std::nullopt;
  const std::string_view port = label.substr(0, dash);
  if (port.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  return PortTarget{std::string(port), std::string(label.substr(dash + 1)), true};
}

std::optional<PortTarget> port_target(const bhttp::request_header<>& h) {
  const auto host = h.find(bhttp::field::host);
  std::optional<PortTarget> by_host;
  if (host != h.end())
    by_host = host_form(view(host->value()));
  if (const auto port = h.find(kPortHeader); port != h.end()) {
    if (port_number(view(port->value())) == kEnvdPort)
      return std::nullopt;
    PortTarget t{std::string(view(port->value())), {}, false};
    if (const auto id = h.find(kIdHeader); id != h.end())
      t.sandbox_id = view(id->value());
    else if (by_host)
      t.sandbox_id = by_host->sandbox_id;
    return t;
  }
  if (!by_host || port_number(by_host->port) == kEnvdPort)
    return std::nullopt;
  return by_host;
}

// The fields that stay on their hop (RFC 9110 7.6.1): Connection's own, those it names, and
// the proxies'.
bool hop_by_hop(std::string_view name, std::string_view connection) {
  static constexpr std::array<std::string_view, 6> kFields = {
      "connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer"};
  const std::string lower = ascii_lower(name);
  if (lower.starts_with("proxy-"))
    return true;
  for (const auto field : kFields) {
    if (lower == field)
      return true;
  }
  while (!connection.empty()) {
    const auto comma = connection.find(',');
    std::string_view token = connection.substr(0, comma);
    connection =
        comma == std::string_view::npos ? std::string_view() : connection.substr(comma + 1);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
      token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
      token.remove_suffix(1);
    if (ascii_lower(token) == lower)
      return true;
  }
  return false;
}

// What the gateway itself reads or rewrites: never sent on to the port.
bool routing_field(std::string_view name) {
  static constexpr std::array<std::string_view, 7> kFields = {
      "e2b-sandbox-id", "e2b-sandbox-port", "x-access-token", "e2b-traffic-access-token",
      "host",           "content-length",   "expect"};
  const std::string lower = ascii_lower(name);
  for (const auto field : kFields) {
    if (lower == field)
      return true;
  }
  return false;
}

// Where a session's sandbox's ports are reached from the gateway: a host, or why they are not.
struct PortHost {
  std::string host;
  std::string problem;  // set when `host` is empty
};

PortHost port_host(const SessionRecord& rec, const Environment* env) {
  // A local sandbox is processes of this host, on its network: the host's loopback.
  if (rec.provider == "local")
    return {"127.0.0.1", {}};
  if (rec.provider != "docker" && rec.provider != "podman")
    return {
        {},
        fmt::format("the {} provider does not say where its sandboxes' ports are", rec.provider)};
  // A container: its address on its network, the one its server is reached at.
  http::Url url;
  try {
    url = http::parse_url(rec.url);
  } catch (const std::exception& e) {
    return {{}, fmt::format("its server's address {:?} cannot be read: {}", rec.url, e.what())};
  }
  const std::string network = env != nullptr && !env->network.empty() ? env->network : "default";
  if (url.scheme == http::Url::Scheme::http_unix) {
    if (network == "host")
      return {"127.0.0.1", {}};  // the container shares this host's network
    return {{},
            fmt::format("the container has no network address (network mode '{}'): the "
                        "gateway reaches its server through a unix socket",
                        network)};
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(url.host, ec);
  if (ec || address.is_loopback())
    return {{},
            fmt::format("the gateway reaches the container's server through a port published "
                        "on this host ({}), and the container's own address is not known",
                        rec.url)};
  return {url.host, {}};
}

}  // namespace

// Idle connections to sandboxes' ports whose last answer allowed another request (keep-alive),
// by session and address: a relayed request takes one before it connects, and its connection
// comes back once its answer has been read whole. A connection the server has closed meanwhile
// is seen (a peek finds its end) and dropped; so are a session's once it is not ready (the
// sweeper's pass, close_idle_port_connections).
struct PortConnections {
  static constexpr std::size_t kPerAddress = 8;
  std::map<std::string, std::vector<std::unique_ptr<beast::tcp_stream>>>
      idle;  // "session address:port"

  static bool still_open(beast::tcp_stream& stream) {
    char byte = 0;
    const auto fd = stream.socket().native_handle();
    const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // nothing to read: open
  }

  std::unique_ptr<beast::tcp_stream> take(const std::string& key) {
    const auto it = idle.find(key);
    if (it == idle.end())
      return nullptr;
    while (!it->second.empty()) {
      std::unique_ptr<beast::tcp_stream> stream = std::move(it->second.back());
      it->second.pop_back();
      if (still_open(*stream))
        return stream;
    }
    idle.erase(it);
    return nullptr;
  }

  void give_back(const std::string& key, std::unique_ptr<beast::tcp_stream> stream) {
    auto& list = idle[key];
    if (list.size() < kPerAddress) {
      stream->expires_never();
      list.push_back(std::move(stream));
    }
  }

  // Those of sessions that went or are not ready: closed (their streams' destructors).
  void prune(const SessionTable& sessions) {
    std::erase_if(idle, [&](const auto& kv) {
      const Entry* e = sessions.find(kv.first.substr(0, kv.first.find(' ')));
      return e == nullptr || e->rec.state != state::ready;
    });
  }
};

void close_idle_port_connections(Gateway::Impl& s) {
  if (s.port_connections)
    s.port_connections->prune(s.sessions);
}

namespace {

// One request relayed to a sandbox's port: the connection to it, and the transcript line it
// leaves when it ends, however it ends (the answer complete, a failure, or the caller gone).
struct Relay {
  Relay(std::shared_ptr<Gateway::Impl> gateway, std::string id, Caller caller, json::object l)
      : s(std::move(gateway)),
        session_id(std::move(id)),
        who(std::move(caller)),
        line(std::move(l)),
        stream(std::make_unique<beast::tcp_stream>(s->ex)) {}
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  ~Relay() {
    // The caller's connection ends with it: the line cannot wait for anything else.
    try {
      line["bytes"] = bytes;
      if (!error.empty())
        line["error"] = error;
      else if (!parser || !parser->is_done())
        line["detached"] = true;  // the caller left before the answer's end
      if (const Entry* e = s->sessions.find(session_id))
        s->append_log(e->rec, who, std::move(line));
    } catch (const std::exception& e) {
      logging::error("gateway: cannot record a relayed request of {}: {}", session_id, e.what());
    }
  }

  // The relay fails with `status`: the transcript and the caller are told why.
  [[noreturn]] void fail(unsigned status, std::string code, const std::string& message) {
    line["status"] = status;
    error = message;
    throw ApiError(status, std::move(code), message);
  }

  // A long answer keeps its session alive while it flows (at most one touch a second).
  void keep_session_alive() {
    const double now = unix_now();
    if (now - touched < 1)
      return;
    touched = now;
    Entry* e = s->sessions.find(session_id);
    if (e != nullptr && e->rec.state == state::ready)
      s->touch(*e, "port " + json::serialize(line.at("port")), false);
  }

  asio::awaitable<std::optional<std::string>> next_piece() {
    auto& p = *parser;
    if (p.is_done()) {
      // Read whole: its connection may serve the next request.
      if (p.keep_alive() && !pool_key.empty() && !returned) {
        returned = true;
        if (!s->port_connections)
          s->port_connections = std::make_shared<PortConnections>();
        s->port_connections->give_back(pool_key, std::move(stream));
      }
      co_return std::nullopt;
    }
    std::string piece(kPiece, '\0');
    p.get().body().data = piece.data();
    p.get().body().size = piece.size();
    auto [ec, n] = co_await bhttp::async_read_some(*stream, buffer, p, use_tuple);
    (void)n;
    if (ec == bhttp::error::need_buffer)
      ec = {};
    if (ec == asio::error::operation_aborted)
      throw boost::system::system_error(ec);  // cancelled: the caller left
    if (ec) {
      error = ec == beast::error::timeout
                  ? std::string("the answer did not end before the session's deadline")
                  : fmt::format("the answer broke off: {}", ec.message());
      throw std::runtime_error(error);
    }
    piece.resize(kPiece - p.get().body().size);
    bytes += piece.size();
    keep_session_alive();
    co_return piece;
  }

  std::shared_ptr<Gateway::Impl> s;
  std::string session_id;
  Caller who;
  json::object line;
  std::unique_ptr<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
  std::uint64_t bytes = 0;
  double touched = 0;
  std::string error;
  std::string pool_key;   // where its connection goes back to ("session address:port")
  bool returned = false;  // its connection went back to the pool
};

struct PortRouting {
  std::shared_ptr<Gateway::Impl> s;

  // Admits the request; its session's entry, or a refusal thrown as an ApiError.
  Entry& admit(const Request& r, const PortTarget& t, std::uint16_t port) const {
    if (!s->reconciled)
      throw ApiError(503, "gateway.reconciling",
                     "the gateway is reconciling its sessions; try again shortly", true, 1.0);
    if (t.sandbox_id.empty())
      throw ApiError(400, "request.invalid",
                     fmt::format("the E2b-Sandbox-Id header is missing: it names the sandbox "
                                 "whose port {} is asked for",
                                 port));
    Entry* found = s->sessions.find(t.sandbox_id);
    if (found == nullptr)
      throw ApiError(404, "session.not_found", fmt::format("sandbox {} not found", t.sandbox_id));
    Entry& e = *found;
    if (e.rec.state == state::creating)
      throw ApiError(409, "session.not_ready",
                     fmt::format("sandbox {} is still being created; try again", t.sandbox_id),
                     true, 1.0);
    if (e.rec.state != state::ready)
      throw ApiError(
          404, "session.not_found",
          fmt::format("sandbox {} is not running (it is {})", t.sandbox_id, e.rec.state));
    if (!e.rec.paused.empty())
      throw ApiError(409, "session.paused",
                     fmt::format("sandbox {} is paused: connect to it to resume it", t.sandbox_id));
    const auto access = r.field(kTokenHeader);
    const auto traffic = r.field(kTrafficTokenHeader);
    if (!access && !traffic)
      throw ApiError(401, "auth.missing_key",
                     fmt::format("port {} of sandbox {} needs the sandbox's envdAccessToken in "
                                 "the X-Access-Token or e2b-traffic-access-token header",
                                 port, t.sandbox_id));
    const std::string expected = envd_access_token(e.rec);
    const bool valid = (access && server::same_token(*access, expected)) ||
                       (traffic && server::same_token(*traffic, expected));
    if (!valid)
      throw ApiError(401, "auth.invalid_key",
                     fmt::format("the access token is not valid for sandbox {}", t.sandbox_id));
    return e;
  }

  asio::awaitable<RelayedAnswer> forward(Request r) const {
    const auto target = port_target(r.header);
    if (!target)  // the claim saw one: it cannot vanish
      throw ApiError(500, "gateway.internal", "the request names no port of a sandbox");
    const auto port = port_number(target->port);
    if (!port)
      throw ApiError(400, "request.invalid",
                     fmt::format("{}: expected a port number from 1 to 65535, got {:?}",
                                 target->by_host ? "the Host's port" : kPortHeader, target->port));
    Entry& e = admit(r, *target, *port);
    s->touch(e, fmt::format("port {}", *port));
    Caller who{e.rec.tenant, e.rec.tenant, request_id_of(r), unix_now()};
    const std::string method(view(r.header.method_string()));
    const std::string path(view(r.header.target()));
    auto relay = std::make_shared<Relay>(
        s, e.rec.id, std::move(who),
        json::object{{"call", "e2b.port"}, {"method", method}, {"path", path}, {"port", *port}});
    const std::string& id = e.rec.id;

    const PortHost where = port_host(e.rec, s->find_environment(e.rec.environment));
    if (where.host.empty())
      relay->fail(
          502, "sandbox.port_unreachable",
          fmt::format("port {} of sandbox {} cannot be reached: {}", *port, id, where.problem));
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(where.host, ec);
    if (ec)
      relay->fail(502, "sandbox.port_unreachable",
                  fmt::format("port {} of sandbox {} cannot be reached: {:?} is not an address",
                              *port, id, where.host));
    const std::string host_port = address.is_v6() ? fmt::format("[{}]:{}", where.host, *port)
                                                  : fmt::format("{}:{}", where.host, *port);

    bhttp::request<bhttp::string_body> up;
    up.version(11);
    up.method_string(r.header.method_string());
    up.target(r.header.target());
    const std::string connection(r.field("Connection").value_or(""));
    for (const auto& field : r.header) {
      const std::string_view name = view(field.name_string());
      if (!hop_by_hop(name, connection) && !routing_field(name))
        up.insert(field.name_string(), field.value());
    }
    up.set(bhttp::field::host, host_port);
    up.keep_alive(true);  // the connection serves the next request once the answer is read
    up.body() = std::move(r.body);
    up.prepare_payload();

    relay->pool_key = fmt::format("{} {}", id, host_port);
    std::unique_ptr<beast::tcp_stream> reused;
    if (s->port_connections)
      reused = s->port_connections->take(relay->pool_key);
    // From the write on, a command may run for as long as its session lives.
    const double left = std::max(e.rec.deadline() - unix_now(), 0.0) + kDeadlineSlack;
    const bool head = r.header.method() == bhttp::verb::head;
    // A kept connection the server closed as the request went out (its idle limit) fails
    // before any answer: the request goes again, once, on a new connection.
    for (int attempt = 0;; ++attempt) {
      const bool on_kept = attempt == 0 && reused != nullptr;
      boost::system::error_code connect_ec;
      if (on_kept) {
        relay->stream = std::move(reused);
      } else {
        relay->stream = std::make_unique<beast::tcp_stream>(s->ex);
        relay->buffer.clear();
        relay->stream->expires_after(kConnectTimeout);
        const tcp::endpoint endpoint(address, *port);
        auto [ec_connect] = co_await relay->stream->async_connect(endpoint, use_tuple);
        connect_ec = ec_connect;
        if (!connect_ec) {
          // The request goes in one write, but a streamed answer's pieces are small writes.
          boost::system::error_code ignored;
          relay->stream->socket().set_option(tcp::no_delay(true), ignored);
        }
      }
      if (connect_ec == asio::error::operation_aborted)
        throw boost::system::system_error(connect_ec);
      if (connect_ec == asio::error::connection_refused)
        relay->fail(
            502, "sandbox.port_unreachable",
            fmt::format("nothing listens on port {} of sandbox {} (connection refused at {})",
                        *port, id, host_port));
      if (connect_ec == beast::error::timeout)
        relay->fail(502, "sandbox.port_unreachable",
                    fmt::format("port {} of sandbox {} ({}) accepted no connection within {} s",
                                *port, id, host_port, kConnectTimeout.count()));
      if (connect_ec)
        relay->fail(502, "sandbox.port_unreachable",
                    fmt::format("cannot connect to port {} of sandbox {} at {}: {}", *port, id,
                                host_port, connect_ec.message()));

      relay->stream->expires_after(duration_from_seconds(left));
      auto [write_ec, written] = co_await bhttp::async_write(*relay->stream, up, use_tuple);
      (void)written;
      if (write_ec == asio::error::operation_aborted)
        throw boost::system::system_error(write_ec);
      if (write_ec && on_kept)
        continue;
      if (write_ec)
        relay->fail(502, "sandbox.port_unreachable",
                    fmt::format("port {} of sandbox {} did not take the request: {}", *port, id,
                                write_ec.message()));
      bool again = false;
      // Interim answers (100 Continue) are not relayed: the request went whole.
      for (int interim = 0;; ++interim) {
        auto& p = relay->parser.emplace();
        p.header_limit(kHeaderLimit);
        p.body_limit(boost::none);  // passed on as it comes, never held
        p.skip(head);
        auto [read_ec, n] =
            co_await bhttp::async_read_header(*relay->stream, relay->buffer, p, use_tuple);
        if (read_ec == asio::error::operation_aborted)
          throw boost::system::system_error(read_ec);
        if (on_kept && interim == 0 && n == 0 &&
            (read_ec == bhttp::error::end_of_stream || read_ec == asio::error::connection_reset ||
             read_ec == asio::error::broken_pipe)) {
          again = true;
          break;
        }
        if (read_ec == beast::error::timeout)
          relay->fail(504, "sandbox.port_timeout",
                      fmt::format("port {} of sandbox {} did not answer before the session's "
                                  "deadline",
                                  *port, id));
        if (read_ec == bhttp::error::end_of_stream)
          relay->fail(502, "sandbox.port_unreachable",
                      fmt::format("port {} of sandbox {} closed the connection without answering",
                                  *port, id));
        if (read_ec)
          relay->fail(502, "sandbox.port_unreachable",
                      fmt::format("port {} of sandbox {} gave no valid HTTP answer: {}", *port, id,
                                  read_ec.message()));
        const unsigned status = p.get().result_int();
        if (status / 100 != 1)
          break;
        // Upgrade is not sent on, so no server has cause to switch protocols.
        if (status == 101 || interim == 8)
          relay->fail(502, "sandbox.port_unreachable",
                      fmt::format("port {} of sandbox {} answered {} where a final answer was due",
                                  *port, id, status));
      }
      if (!again)
        break;
    }

    auto& p = *relay->parser;
    RelayedAnswer out;
    out.status = p.get().result_int();
    const std::string answer_connection(view(p.get()[bhttp::field::connection]));
    for (const auto& field : p.get()) {
      const std::string_view name = view(field.name_string());
      if (!hop_by_hop(name, answer_connection) && !beast::iequals(name, "content-length"))
        out.headers.emplace_back(std::string(name), std::string(view(field.value())));
    }
    if (const auto length = p.content_length())
      out.content_length = *length;
    relay->line["status"] = out.status;
    out.next = [relay]() { return relay->next_piece(); };
    co_return out;
  }
};

Answer e2b_refusal(Gateway::Impl& s, const ApiError& e) {
  s.metrics.count_error(e.code());
  Answer a = e2b_error(e.status(), e.what());
  if (e.retry_after())
    a.headers.emplace_back("Retry-After", fmt::format("{:g}", *e.retry_after()));
  return a;
}

}  // namespace

void add_e2b_port_routing(server::RouteTable& t, std::shared_ptr<Gateway::Impl> s) {
  t.intercept(
      [s](const bhttp::request_header<>& h) {
        const auto target = port_target(h);
        // The host form is taken only for a session of this gateway: another name of the
        // gateway that happens to look like one stays with the routes.
        return target && (!target->by_host || s->sessions.contains(target->sandbox_id));
      },
      [s](Request r) -> asio::awaitable<std::variant<Answer, RelayedAnswer>> {
        s->metrics.count_request(std::string(kPortHeader));
        std::optional<ApiError> failure;
        bool cancelled = false;
        try {
          // g++ 12 miscompiles temporaries inside co_await expressions: named locals only.
          const PortRouting routing{s};
          auto forwarded = routing.forward(std::move(r));
          co_return co_await std::move(forwarded);
        } catch (const boost::system::system_error& e) {
          cancelled = e.code() == asio::error::operation_aborted;
          failure = api_error_of(e);
        } catch (const std::exception& e) {
          failure = api_error_of(e);
        }
        if (cancelled)  // the caller has left: nobody reads this
          co_return e2b_error(503, "the request was cancelled");
        co_return e2b_refusal(*s, *failure);
      });
}

}  // namespace rex::gateway
