// Answer: an HTTP answer held in memory (status, content type, extra headers, body), as a route
// returns it, the service writes it and X-Request-ID replay stores it.
//
// detail_answer gives the service's own refusals their one shape, FastAPI's {"detail": ...}.
#pragma once

#include <boost/json/fwd.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::server {

struct Answer {
  unsigned status = 200;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  /// The connection closes after this answer (the request left it in a state not worth reusing).
  bool close_connection = false;
};

/// `body` serialized, as application/json.
Answer json_answer(unsigned status, const boost::json::value& body);

/// {"detail": "<detail>"} as application/json.
Answer detail_answer(unsigned status, std::string_view detail);

}  // namespace rex::server
