#include <rex/server/admission.hpp>

#include <fmt/format.h>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include <algorithm>

namespace rex::server {

namespace bhttp = boost::beast::http;

namespace {

// The body of a request refused before it was read is still read (and thrown away) up to this
// size, so a small refused request does not cost the client its connection.
constexpr std::uint64_t kRefusedBodyReadLimit = 64 * 1024;

}  // namespace

Admission admit(const bhttp::request<bhttp::empty_body>& header,
                std::optional<std::uint64_t> content_length, bool has_body,
                const RouteTable& routes, const ServerConfig& config) {
  Admission a;
  a.keep_alive = header.keep_alive();
  // HEAD is GET without the body, as FastAPI serves it.
  a.head_only = header.method() == bhttp::verb::head;
  // A request the interceptor takes reaches no route, whatever its path.
  const Route* claimed = routes.intercepted(header);
  RouteTable::Match match;
  if (claimed == nullptr)
    match = routes.find(header.method(), header.target());
  const Route* route = claimed != nullptr ? claimed : match.route;

  // Authentication comes first, for every route (known or not).
  if (!config.auth_token.empty()) {
    const auto key = header.find("X-API-Key");
    if (key == header.end())
      a.answer = detail_answer(403, "Not authenticated");
    else if (!same_token(key->value(), config.auth_token))
      a.answer = detail_answer(401, "Invalid API Key");
  }
  if (!a.answer && route == nullptr && match.other_methods.empty()) {
    a.answer = routes.no_route_answer(404, header);
    if (!a.answer)
      a.answer = detail_answer(404, "Not Found");
  } else if (!a.answer && route == nullptr) {
    a.answer = routes.no_route_answer(405, header);
    if (!a.answer)
      a.answer = detail_answer(405, "Method Not Allowed");
    std::string allow;
    for (const auto method : match.other_methods) {
      if (!allow.empty())
        allow += ", ";
      allow += std::string(to_string(method));
    }
    a.answer->headers.emplace_back("allow", std::move(allow));
  }
  if (!a.answer) {
    a.route = route;
    a.params = std::move(match.params);
  }

  if (const auto id = header.find("X-Request-ID"); id != header.end() && !id->value().empty())
    a.replay_key = fmt::format("{} {} {}", id->value(), header.method_string(), header.target());

  // Whether the body is read is decided apart from keep_alive: a client that sends
  // `Connection: close` (SWE-ReX's, on every request) still has its body read.
  bool read_body = has_body;
  if (has_body && a.answer && (!content_length || *content_length > kRefusedBodyReadLimit)) {
    read_body = false;  // nobody will use it: close instead of reading it
    a.keep_alive = false;
  }
  a.send_continue = read_body && header[bhttp::field::expect] == "100-continue";
  if (a.route != nullptr && std::holds_alternative<UploadRoute>(a.route->handler)) {
    a.body = BodyPlan::receive;  // streamed to disk as it arrives; never held in memory
  } else if (read_body && content_length && *content_length > config.max_json_body_bytes) {
    // Refused at once: nothing of the body is read (or reserved).
    a.answer = detail_answer(413, "Request Entity Too Large");
    a.route = nullptr;
    a.body = BodyPlan::unread;
    a.keep_alive = false;
  } else if (read_body) {
    a.body = BodyPlan::read;
  } else {
    a.body = has_body ? BodyPlan::unread : BodyPlan::none;
  }
  return a;
}

std::optional<Answer> header_error_answer(const boost::system::error_code& ec) {
  namespace asio = boost::asio;
  if (ec == bhttp::error::header_limit)
    return detail_answer(431, "Request Header Fields Too Large");
  if (ec == bhttp::error::body_limit)
    return detail_answer(413, "Request Entity Too Large");
  if (ec == bhttp::error::end_of_stream || ec == boost::beast::error::timeout ||
      ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
      ec == asio::error::eof || ec == asio::error::bad_descriptor)
    return std::nullopt;
  return detail_answer(400, fmt::format("Bad Request: {}", ec.message()));
}

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

}  // namespace rex::server
