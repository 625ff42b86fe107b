// A proxy's own kept-alive connection to one sandbox server for the JSON calls it passes on
// (RemoteRuntime::forward): the request goes as one gathered write of a head built from a
// prefix made once and the body, the answer is read by a parser of Content-Length answers (Beast's
// parser takes over for any other framing), and the call's deadline is one timer of the link.
// Anything the link cannot do well (no plain connection, a connection found closed before any
// byte of the answer) is left to the general HTTP client, which connects and retries.
#pragma once

#include <rex/http/client.hpp>
#include <rex/http/url.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::detail {

namespace asio = boost::asio;

// What the head of an answer says: its status, headers and framing.
struct AnswerHead {
  unsigned status = 0;
  unsigned minor_version = 1;
  std::size_t size = 0;  // of the head, with its empty line
  std::optional<std::uint64_t> content_length{};
  bool other_framing = false;  // Transfer-Encoding, or no Content-Length: Beast's parser reads it
  bool close = false;          // the server closes the connection after this answer
  std::vector<std::pair<std::string, std::string>> headers{};
};

/// Parses `text`, an answer's head up to and with its empty line. False when it is not the head
/// of an HTTP/1 answer.
bool parse_answer_head(std::string_view text, AnswerHead& h);

class ForwardLink {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  /// Whether a link can reach `url` under `cfg`: a unix socket, or TCP to an address (no name
  /// to resolve, no TLS), with headers that do not change over time (no header_source).
  static bool serves(const http::Url& url, const http::ClientConfig& cfg);

  /// `headers` go with every request, besides Host, User-Agent and the client's own headers.
  ForwardLink(asio::any_io_executor ex, http::Url url, const http::ClientConfig& cfg,
              Headers headers);
  ~ForwardLink();
  ForwardLink(const ForwardLink&) = delete;
  ForwardLink& operator=(const ForwardLink&) = delete;

  /// Whether a call is under way on it (the link carries one at a time).
  bool busy() const noexcept;

  /// Sends `body` (JSON; none when empty) to `target` and returns the answer, whatever its
  /// status. Empty when nothing of an answer came because the connection could not be made or
  /// was found closed: the caller sends the request again by other means (its X-Request-ID
  /// lets the server answer a repeated call from its replay store). Throws RequestTimeoutError
  /// when `timeout` passes, ConnectionError when an answer breaks off, SwerexException for an
  /// answer larger than the client's max_body_in_memory or that is not HTTP.
  asio::awaitable<std::optional<http::ClientResponse>> call(
      std::string_view method, std::string_view target, std::string_view request_id,
      const std::string& body, std::chrono::steady_clock::duration timeout);

  /// Closes its connection (a later call opens another).
  void close() noexcept;

 private:
  struct State;
  std::shared_ptr<State> st_;
};

}  // namespace rex::detail
