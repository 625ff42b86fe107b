// ApiError: the gateway's one error shape. Every refusal and failure of the API is thrown as an
// ApiError (or turned into one) and answered as
//   {"error": {"code": "quota.max_sessions", "message": "...", "retryable": false,
//              "request_id": "..."}}
// with its HTTP status (and Retry-After for 429 and 503). Codes are stable, dotted, and name the
// area first (request., auth., session., quota., environment., provider., files., sandbox.,
// idempotency., gateway.).
#pragma once

#include <rex/server/answer.hpp>

#include <boost/json/fwd.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rex::gateway {

class ApiError : public std::runtime_error {
 public:
  ApiError(unsigned status, std::string code, const std::string& message, bool retryable = false,
           std::optional<double> retry_after = std::nullopt)
      : std::runtime_error(message),
        status_(status),
        code_(std::move(code)),
        retryable_(retryable),
        retry_after_(retry_after) {}

  unsigned status() const noexcept { return status_; }
  const std::string& code() const noexcept { return code_; }
  bool retryable() const noexcept { return retryable_; }
  std::optional<double> retry_after() const noexcept { return retry_after_; }

 private:
  unsigned status_;
  std::string code_;
  bool retryable_;
  std::optional<double> retry_after_;
};

/// The answer for an error, with the request's id.
server::Answer error_answer(const ApiError& error, std::string_view request_id);

/// A request body as a JSON object: 400 request.invalid_json when it does not parse, 422
/// request.invalid when it is not an object. An empty body is an empty object.
boost::json::object parse_body(std::string_view body);

/// Checks that `o` has no keys but `allowed`: 422 request.unknown_field naming the first other.
void only_fields(const boost::json::object& o, std::initializer_list<std::string_view> allowed);

/// Typed field readers: absent gives none; a wrong type is 422 request.invalid naming the field.
std::optional<std::string> string_field(const boost::json::object& o, std::string_view name);
std::optional<double> seconds_field(const boost::json::object& o, std::string_view name);
std::optional<boost::json::object> object_field(const boost::json::object& o,
                                                std::string_view name);

/// Standard base64 (padding optional, whitespace ignored); 422 request.invalid_base64 otherwise.
std::string decode_base64(std::string_view text);

}  // namespace rex::gateway
