#include "gateway/api_error.hpp"

#include <rex/core/text.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>

namespace rex::gateway {

namespace json = boost::json;

server::Answer error_answer(const ApiError& error, std::string_view request_id) {
  json::object detail{{"code", error.code()},
                      {"message", error.what()},
                      {"retryable", error.retryable()},
                      {"request_id", request_id}};
  auto answer = server::json_answer(error.status(), json::object{{"error", std::move(detail)}});
  if (const auto after = error.retry_after())
    answer.headers.emplace_back(
        "Retry-After", fmt::format("{}", std::max<long>(1, std::lround(std::ceil(*after)))));
  return answer;
}

json::object parse_body(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return {};
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec)
    throw ApiError(400, "request.invalid_json",
                   fmt::format("the body is not valid JSON: {}", ec.message()));
  if (!v.is_object())
    throw ApiError(422, "request.invalid", "the body must be a JSON object");
  return std::move(v.get_object());
}

void only_fields(const json::object& o, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : o) {
    if (std::find(allowed.begin(), allowed.end(), std::string_view(key)) == allowed.end())
      throw ApiError(422, "request.unknown_field",
                     fmt::format("unknown field {:?}; expected one of: {}", std::string_view(key),
                                 fmt::join(allowed, ", ")));
  }
}

std::optional<std::string> string_field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (v == nullptr || v->is_null())
    return std::nullopt;
  if (!v->is_string())
    throw ApiError(422, "request.invalid", fmt::format("{}: expected a string", name));
  return std::string(v->get_string());
}

std::optional<double> seconds_field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (v == nullptr || v->is_null())
    return std::nullopt;
  if (!v->is_number())
    throw ApiError(422, "request.invalid", fmt::format("{}: expected a number of seconds", name));
  const double d = v->to_number<double>();
  if (!std::isfinite(d) || d < 0 || d > 1e9)
    throw ApiError(422, "request.invalid",
                   fmt::format("{}: expected a number of seconds from 0 to 1e9", name));
  return d;
}

std::optional<json::object> object_field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (v == nullptr || v->is_null())
    return std::nullopt;
  if (!v->is_object())
    throw ApiError(422, "request.invalid", fmt::format("{}: expected an object", name));
  return v->get_object();
}

std::string decode_base64(std::string_view text) {
  Base64Decoded decoded = base64_decode(text);
  if (!decoded.error.empty())
    throw ApiError(422, "request.invalid_base64", "content: " + decoded.error);
  return std::move(decoded.bytes);
}

}  // namespace rex::gateway
