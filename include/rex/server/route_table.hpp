// RouteTable: what a service serves, as method + path -> handler. The service core (Service)
// reads requests, admits them (rex/server/admission.hpp) and hands each to its route's handler;
// the handler decides what the request means. Four kinds of handler, by what they take and give:
// - JsonRoute: the body, read whole (up to max_json_body_bytes) -> an Answer. The only kind a
//   repeated X-Request-ID replays.
// - FileRoute: the body -> a file sent as the answer's body (or an Answer when it fails).
// - StreamRoute: the body -> a producer of Server-Sent Events (or an Answer when it fails).
// - UploadRoute: the header -> a BodyReceiver fed the body piece by piece as it arrives, never
//   held whole (up to max_body_bytes).
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

/// Produces a streamed answer's events, then returns (the service ends the answer).
using EventProducer = std::function<asio::awaitable<void>(std::shared_ptr<EventStream>)>;

using JsonRoute = std::function<asio::awaitable<Answer>(std::string body)>;
using FileRoute =
    std::function<asio::awaitable<std::variant<Answer, FileAnswer>>(std::string body)>;
using StreamRoute = std::function<std::variant<Answer, EventProducer>(std::string body)>;
using UploadRoute = std::function<std::variant<Answer, std::unique_ptr<BodyReceiver>>(
    const boost::beast::http::request_header<>& header)>;

struct Route {
  boost::beast::http::verb method;
  std::string path;
  std::variant<JsonRoute, FileRoute, StreamRoute, UploadRoute> handler;
};

class RouteTable {
 public:
  /// Adds a route; a GET route also answers HEAD (the headers of its answer, no body).
  void add(boost::beast::http::verb method, std::string path, JsonRoute handler);
  void add(boost::beast::http::verb method, std::string path, FileRoute handler);
  void add(boost::beast::http::verb method, std::string path, StreamRoute handler);
  void add(boost::beast::http::verb method, std::string path, UploadRoute handler);

  /// The route of a request target (its query ignored), whatever its method; null when none.
  const Route* find(std::string_view target) const;

 private:
  std::vector<Route> routes_;  // a few: a linear search is the fastest
};

}  // namespace rex::server
