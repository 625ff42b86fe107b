#include <rex/server/answer.hpp>

#include <boost/json.hpp>

namespace rex::server {

Answer json_answer(unsigned status, const boost::json::value& body) {
  Answer r;
  r.status = status;
  r.content_type = "application/json";
  r.body = boost::json::serialize(body);
  return r;
}

Answer detail_answer(unsigned status, std::string_view detail) {
  boost::json::object body;
  body["detail"] = detail;
  return json_answer(status, body);
}

}  // namespace rex::server
