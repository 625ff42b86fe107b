#include <rex/http/client_errors.hpp>
#include <rex/protocol/python_text.hpp>

#include <boost/json/object.hpp>

namespace rex::http {

HttpError::HttpError(const std::string& message, unsigned status, std::string url, std::string body)
    // extra_info must stay valid JSON text even when the body is not UTF-8.
    : SwerexException(message, boost::json::object{{"url", utf8_backslashreplace(url)},
                                                   {"status", status},
                                                   {"body", utf8_backslashreplace(body)}}),
      status_(status),
      url_(std::move(url)),
      body_(std::move(body)) {}

}  // namespace rex::http
