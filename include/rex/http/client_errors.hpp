// The errors of rex's HTTP client. All derive from SwerexException, so code that catches the
// runtime's errors also catches a lost server; each message names the method and URL.
#pragma once

#include <rex/protocol/exceptions.hpp>

#include <string>

namespace rex::http {

/// The server could not be reached, or the connection broke before it answered, on every
/// attempt the retry policy allowed. extra_info: "url", "attempts", "error".
class ConnectionError : public SwerexException {
 public:
  using SwerexException::SwerexException;
};

/// No complete answer arrived within the request's timeout; the request was abandoned and its
/// connection closed. extra_info: "url", "timeout" (seconds).
class RequestTimeoutError : public SwerexException {
 public:
  using SwerexException::SwerexException;
};

/// The server answered with an error status that carries no transferred exception, or with a
/// body that does not fit the protocol. extra_info: "url", "status", "body".
class HttpError : public SwerexException {
 public:
  HttpError(const std::string& message, unsigned status, std::string url, std::string body);

  unsigned status() const noexcept { return status_; }
  const std::string& url() const noexcept { return url_; }
  const std::string& body() const noexcept { return body_; }

 private:
  unsigned status_;
  std::string url_;
  std::string body_;
};

}  // namespace rex::http
