#include <rex/core/text.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/protocol/python_text.hpp>

#include "http/client_failures.hpp"

#include <fmt/format.h>
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

namespace detail {

RequestTimeoutError timed_out(std::string_view method, const std::string& url,
                              std::chrono::steady_clock::duration timeout) {
  return RequestTimeoutError(
      fmt::format("{} {} timed out after {}", method, url, seconds_text(timeout)),
      boost::json::object{{"url", url},
                          {"timeout", std::chrono::duration<double>(timeout).count()}});
}

void throw_failed(std::string_view method, const std::string& url, std::string_view stage,
                  const std::string& why, const std::string& error, unsigned attempts,
                  bool malformed) {
  const std::string text = fmt::format("{} {}: failed {}: {} ({} attempt{})", method, url, stage,
                                       why, attempts, attempts == 1 ? "" : "s");
  boost::json::object info{
      {"url", url}, {"attempts", static_cast<std::int64_t>(attempts)}, {"error", error}};
  if (malformed)
    throw SwerexException(text, std::move(info));
  throw ConnectionError(text, std::move(info));
}

void refuse_large_answer(const std::string& url, std::optional<std::uint64_t> length,
                         std::uint64_t limit) {
  if (length && *length > limit) {
    throw SwerexException(fmt::format("the answer of {} has {} bytes, more than the {} allowed",
                                      url, *length, limit));
  }
  throw SwerexException(
      fmt::format("the answer of {} is larger than the {} bytes allowed", url, limit));
}

}  // namespace detail

}  // namespace rex::http
