// RouteTable: what a service serves, as method + path pattern -> handler. The service core
// (Service) reads requests, admits them (rex/server/admission.hpp) and hands each to its route's
// handler as a Request; the handler decides what the request means. Five kinds of handler, by
// what they take and give:
// - JsonRoute: the request with its body read whole (up to max_json_body_bytes) -> an Answer.
//   The only kind a repeated X-Request-ID replays.
// - FileRoute: the request -> a file sent as the answer's body (or an Answer when it fails).
// - StreamRoute: the request -> a producer of Server-Sent Events, or of another chunked stream
//   (or an Answer when it fails).
// - UploadRoute: the request without its body -> a BodyReceiver fed the body piece by piece as
//   it arrives, never held whole (up to max_body_bytes).
// - RelayRoute: the request with its body read whole -> an Answer, or a RelayedAnswer: another
//   server's answer, its status and headers first, then its body as it arrives. Only the
//   interceptor has one: a proxy whose requests are named by their headers, not their path, is
//   consulted before any route (intercept()).
//
// A pattern is a path whose segments may be parameters: `{name}` takes one non-empty segment,
// a last `{name...}` takes the rest of the path (one or more segments, slashes included).
// Parameters arrive percent-decoded. Routes are tried in the order they were added; a path that
// matches routes of other methods only is 405.
//
// A handler never throws to the service: every failure it has is an Answer it chose.
// Threading: built before the service starts, then only read, on the service's io_context.
#pragma once

#include <rex/server/answer.hpp>
#include <rex/server/event_stream.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/file_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rex::server {

namespace asio = boost::asio;

/// A file sent as an answer's body (status 200).
struct FileAnswer {
  boost::beast::http::file_body::value_type body;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;
};

/// Takes a request's body as it arrives (UploadRoute).
class BodyReceiver {
 public:
  virtual ~BodyReceiver() = default;
  /// The next piece of the body; `last` when the body is complete with it. An answer ends the
  /// request at once (what is left of the body is not read).
  virtual asio::awaitable<std::optional<Answer>> receive(std::string_view piece, bool last) = 0;
  /// The whole body has been received: the answer.
  virtual asio::awaitable<Answer> finish() = 0;
};

/// A request as its handler sees it: the header as sent, the path parameters of its route, and
/// the body when the route reads it whole.
struct Request {
  boost::beast::http::request_header<> header;
  std::vector<std::pair<std::string, std::string>> params;
  std::string body;

  /// The value of path parameter `name` (empty when the route has none by that name).
  std::string_view param(std::string_view name) const;
  /// The path, without the query.
  std::string_view path() const;
  /// The value of query parameter `name`, percent-decoded (`+` is a space); none when absent.
  std::optional<std::string> query(std::string_view name) const;
  /// The value of a header field; none when absent.
  std::optional<std::string_view> field(std::string_view name) const;
};

/// Produces a streamed answer's events, then returns (the service ends the answer).
using EventProducer = std::function<asio::awaitable<void>(std::shared_ptr<EventStream>)>;

/// An answer whose head its handler chose and whose body arrives piece by piece: another
/// server's answer, relayed as it comes (RelayRoute).
struct RelayedAnswer {
  unsigned status = 200;
  /// Written as they are. The handler leaves out the hop-by-hop fields (Connection,
  /// Transfer-Encoding, Keep-Alive...) and Content-Length: the service frames the body itself.
  std::vector<std::pair<std::string, std::string>> headers;
  /// The body's length when it is known beforehand (sent as Content-Length); without it the
  /// body is sent chunked, or to an HTTP/1.0 client up to the connection's end.
  std::optional<std::uint64_t> content_length;
  /// The body's next piece (possibly empty), none after its last. It throws when the body
  /// cannot be completed: the connection then ends, the answer cut off, as the client must
  /// see it. Cancelled (terminal) when the client leaves or the service stops; not called for
  /// an answer without a body (HEAD, 1xx, 204, 304).
  std::function<asio::awaitable<std::optional<std::string>>()> next;
};

using JsonRoute = std::function<asio::awaitable<Answer>(Request request)>;
using FileRoute = std::function<asio::awaitable<std::variant<Answer, FileAnswer>>(Request request)>;
using StreamRoute = std::function<std::variant<Answer, EventProducer>(Request request)>;
using UploadRoute =
    std::function<std::variant<Answer, std::unique_ptr<BodyReceiver>>(const Request& request)>;
/// Runs while the service watches the client: when it leaves (or the service stops) first, the
/// handler is cancelled (terminal), so whatever it waits for is abandoned at once.
using RelayRoute =
    std::function<asio::awaitable<std::variant<Answer, RelayedAnswer>>(Request request)>;

struct Route {
  boost::beast::http::verb method;
  std::string path;
  std::variant<JsonRoute, FileRoute, StreamRoute, UploadRoute, RelayRoute> handler;
  // A StreamRoute's answer: its Content-Type, and so how its producer writes (EventStream).
  std::string stream_content_type = "text/event-stream";
};

class RouteTable {
 public:
  /// Adds a route; a GET route also answers HEAD (the headers of its answer, no body).
  void add(boost::beast::http::verb method, std::string path, JsonRoute handler);
  void add(boost::beast::http::verb method, std::string path, FileRoute handler);
  /// A stream of another content type than Server-Sent Events writes with send_bytes.
  void add(boost::beast::http::verb method, std::string path, StreamRoute handler,
           std::string content_type = "text/event-stream");
  void add(boost::beast::http::verb method, std::string path, UploadRoute handler);

  /// What a request's method and target (its query ignored) reach.
  struct Match {
    const Route* route = nullptr;  // null: no route of this method matches the path
    std::vector<std::pair<std::string, std::string>> params;
    /// When `route` is null: the methods of the routes whose pattern matches (405 with Allow).
    std::vector<boost::beast::http::verb> other_methods;
  };
  /// HEAD finds GET routes.
  Match find(boost::beast::http::verb method, std::string_view target) const;

  /// Whether the interceptor takes a request, from its header alone; cheap, and never throws.
  using Claim = std::function<bool(const boost::beast::http::request_header<>& header)>;
  /// Sends every request `claims` takes to `handler`, whatever its method and path and before
  /// any route is tried. One interceptor at most: a second replaces the first.
  void intercept(Claim claims, RelayRoute handler);
  /// The interceptor's route when it takes the request; null otherwise.
  const Route* intercepted(const boost::beast::http::request_header<>& header) const;

  /// The answer to a request no route takes (`status`: 404, or 405 when another method's route
  /// matches its path), in the shape of the API whose path it names; none: the default
  /// {"detail": "Not Found"} (or "Method Not Allowed"). Must not throw.
  using NoRoute = std::function<std::optional<Answer>(
      unsigned status, const boost::beast::http::request_header<>& header)>;
  void on_no_route(NoRoute answer) { no_route_ = std::move(answer); }
  std::optional<Answer> no_route_answer(unsigned status,
                                        const boost::beast::http::request_header<>& header) const {
    return no_route_ ? no_route_(status, header) : std::nullopt;
  }

 private:
  void added();

  std::vector<Route> routes_;
  // Each method's routes, as positions in routes_ in the order they were added: a request is
  // tried against its method's routes only, in order (a gateway has about a hundred routes, a
  // third of them POST). A few dozen per method at most: a linear search is the fastest.
  std::vector<std::pair<boost::beast::http::verb, std::vector<std::size_t>>> by_method_;
  Claim claims_;
  std::optional<Route> interceptor_;
  NoRoute no_route_;
};

/// A query string (`a=1&b=x%20y`, without the `?`) as its key/value pairs in order,
/// percent-decoded with `+` as a space; empty segments are skipped and a pair without `=` has
/// an empty value.
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view text);

/// Whether `path` matches `pattern`; appends the parameters to `params` when it does.
bool match_path(std::string_view pattern, std::string_view path,
                std::vector<std::pair<std::string, std::string>>& params);

}  // namespace rex::server
