// Url: the base address of an HTTP server, parsed once so that a bad address fails when a client
// is configured rather than on its first request.
//
// Accepted forms (scheme case-insensitive, anything else is an InvalidUrlError naming the URL):
//   http://HOST[:PORT][/PREFIX]       HOST a name, an IPv4 address or [IPv6]; PORT defaults to 80
//   https://HOST[:PORT][/PREFIX]      PORT defaults to 443
//   http+unix://ENCODED[/PREFIX]      ENCODED is the socket path percent-encoded, as
//                                     requests-unixsocket writes it: http+unix://%2Frun%2Frex.sock
//   http+unix:///SOCKET[/PREFIX]      the socket path given plainly; it runs up to and including
//                                     the first component that ends in ".sock" and what follows
//                                     is the prefix; without such a component the whole path is
//                                     the socket and there is no prefix
// PREFIX is put before every request target; trailing slashes are dropped. User information, a
// query or a fragment in a base URL is refused.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rex::http {

/// A base URL that cannot be used; the message names the URL and the problem.
class InvalidUrlError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Url {
  enum class Scheme { http, https, http_unix };

  Scheme scheme = Scheme::http;
  std::string host{};         // TCP: name or address, IPv6 without brackets
  std::uint16_t port = 0;     // TCP: always set (the scheme's default when the URL has none)
  std::string socket_path{};  // http+unix: the decoded socket path
  std::string prefix{};       // "" or "/a/b": put before every request target
  std::string text{};         // the URL as given, without trailing slashes (for messages)

  /// The value of the Host header: "host:port" for TCP ("[::1]:8000" for IPv6), "localhost"
  /// for a unix socket.
  std::string host_header() const;
};

/// Parses a base URL (forms above). Throws InvalidUrlError.
Url parse_url(std::string_view text);

/// Percent-encodes every byte except RFC 3986's unreserved characters and those in `keep`.
std::string url_encode(std::string_view text, std::string_view keep = {});

/// The base URL of a server on the unix socket at `socket_path`: http+unix://%2Fpath%2Fto.sock.
std::string unix_socket_url(std::string_view socket_path);

}  // namespace rex::http
