// Admission: what the service does with a request once its header has arrived, decided by a
// pure function of the header, the route table and the settings (no I/O, unit-tested apart).
//
// The order of the decisions is part of the protocol: authentication first, for every target
// (403 without X-API-Key, 401 with a wrong one); then the route: the interceptor's when it
// takes the request (RouteTable::intercept), else the table's (404 unknown, 405 wrong method);
// then the body: a body too large to hold is refused with 413 before a byte of it is
// read, and the body of a request already refused is read (so the connection can serve the
// next one) only when it is small.
#pragma once

#include <rex/server/answer.hpp>
#include <rex/server/route_table.hpp>
#include <rex/server/server_config.hpp>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::server {

/// What to do with the body.
enum class BodyPlan {
  none,     // the request has none
  read,     // read it whole, up to max_json_body_bytes (413 past it), then answer
  receive,  // the route's BodyReceiver takes it as it arrives (UploadRoute)
  unread,   // leave it: the answer is known and the connection closes after it
};

struct Admission {
  /// The route that answers; null when `answer` is already decided.
  const Route* route = nullptr;
  /// The route's path parameters.
  std::vector<std::pair<std::string, std::string>> params;
  /// The answer decided here (a refusal); the body, when read, is then thrown away.
  std::optional<Answer> answer;
  BodyPlan body = BodyPlan::none;
  /// Answer "100 Continue" before reading the body (the client sent Expect: 100-continue).
  bool send_continue = false;
  /// The connection may serve another request after this one (as far as the header tells).
  bool keep_alive = false;
  /// HEAD: the headers of the GET answer and no body.
  bool head_only = false;
  /// Non-empty when the request carries an X-Request-ID: its key in the replay store.
  std::string replay_key;
};

/// Admits a request whose header has arrived (`header`: the message as parsed so far, without
/// its body). `content_length` and `has_body` are what the parser read of the body's framing
/// (has_body: the message is not complete with its header).
Admission admit(const boost::beast::http::request<boost::beast::http::empty_body>& header,
                std::optional<std::uint64_t> content_length, bool has_body,
                const RouteTable& routes, const ServerConfig& config);

/// The answer to a request whose header could not be read, or none when the connection just
/// ends (the peer left, went quiet, or the service is stopping).
std::optional<Answer> header_error_answer(const boost::system::error_code& ec);

/// Constant-time comparison: the time taken does not depend on where the strings differ.
bool same_token(std::string_view a, std::string_view b);

}  // namespace rex::server
