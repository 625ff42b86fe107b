#include <rex/core/text.hpp>
#include <rex/http/url.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/hex.hpp"

namespace rex::http {
namespace {

constexpr std::size_t kMaxSocketPath = 107;  // sun_path holds 108 bytes with the final NUL

[[noreturn]] void fail(std::string_view url, std::string_view problem) {
  throw InvalidUrlError(fmt::format("invalid URL '{}': {}", url, problem));
}

std::string percent_decode(std::string_view url, std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const int hi = i + 2 < s.size() ? rex::detail::hex_value(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? rex::detail::hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      fail(url, fmt::format("bad percent-encoding at '{}'", s.substr(i, 3)));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// The prefix as it goes before targets: no trailing slashes, "" for the root.
std::string clean_prefix(std::string_view url, std::string_view path) {
  if (path.find_first_of("?#") != std::string_view::npos)
    fail(url, "a base URL cannot have a query or a fragment");
  while (!path.empty() && path.back() == '/')
    path.remove_suffix(1);
  return std::string(path);
}

std::uint16_t parse_port(std::string_view url, std::string_view digits) {
  unsigned value = 0;
  const auto* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || ec != std::errc() || ptr != end || value == 0 || value > 65535)
    fail(url, fmt::format("bad port '{}' (expected 1-65535)", digits));
  return static_cast<std::uint16_t>(value);
}

void parse_tcp(std::string_view url, std::string_view rest, Url& out) {
  const std::size_t end = std::min(rest.find('/'), rest.find_first_of("?#"));
  const std::string_view authority = rest.substr(0, end);
  out.prefix = clean_prefix(url, end == std::string_view::npos ? "" : rest.substr(end));
  if (authority.find('@') != std::string_view::npos)
    fail(url, "user information in the URL is not supported");
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos)
      fail(url, "unterminated '[' in the host");
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':'))
      fail(url, "unexpected text after ']'");
    if (!after.empty())
      port = after.substr(1);
    if (after == ":")
      fail(url, "empty port");
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty())
      fail(url, "empty port");
    if (host.find(':') != std::string_view::npos)
      fail(url, "an IPv6 address must be written in brackets, e.g. http://[::1]:8000");
  }
  if (host.empty())
    fail(url, "no host");
  out.host = std::string(host);
  out.port = !port.empty() ? parse_port(url, port) : (out.scheme == Url::Scheme::https ? 443 : 80);
}

void parse_unix(std::string_view url, std::string_view rest, Url& out) {
  if (rest.find_first_of("?#") != std::string_view::npos)
    fail(url, "a base URL cannot have a query or a fragment");
  if (!rest.starts_with('/')) {
    // Percent-encoded socket path as the host: http+unix://%2Frun%2Frex.sock/prefix
    const std::size_t slash = rest.find('/');
    out.socket_path = percent_decode(url, rest.substr(0, slash));
    out.prefix = clean_prefix(url, slash == std::string_view::npos ? "" : rest.substr(slash));
  } else {
    // The plain form: the socket ends with the first component named *.sock.
    std::size_t end = rest.size();
    for (std::size_t pos = 0; pos < rest.size();) {
      std::size_t next = rest.find('/', pos + 1);
      if (next == std::string_view::npos)
        next = rest.size();
      if (rest.substr(pos, next - pos).ends_with(".sock")) {
        end = next;
        break;
      }
      pos = next;
    }
    std::string_view socket = rest.substr(0, end);
    while (socket.size() > 1 && socket.back() == '/')
      socket.remove_suffix(1);
    out.socket_path = std::string(socket);
    out.prefix = clean_prefix(url, rest.substr(end));
  }
  if (out.socket_path.empty() || out.socket_path == "/")
    fail(url, "no unix socket path");
  if (std::count(out.socket_path.begin(), out.socket_path.end(), '\0') != 0)
    fail(url, "the unix socket path contains a NUL byte");
  if (out.socket_path.size() > kMaxSocketPath) {
    fail(url, fmt::format("the unix socket path is {} bytes long; the system allows at most {}",
                          out.socket_path.size(), kMaxSocketPath));
  }
}

}  // namespace

std::string Url::host_header() const {
  if (scheme == Scheme::http_unix)
    return "localhost";
  if (host.find(':') != std::string::npos)
    return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Url parse_url(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      fail(text, "it contains a space or a control character");
  }
  const auto sep = text.find("://");
  if (sep == std::string_view::npos)
    fail(text, "no scheme (expected http://, https:// or http+unix://)");
  const std::string scheme = ascii_lower(text.substr(0, sep));
  Url out;
  if (scheme == "http") {
    out.scheme = Url::Scheme::http;
  } else if (scheme == "https") {
    out.scheme = Url::Scheme::https;
  } else if (scheme == "http+unix") {
    out.scheme = Url::Scheme::http_unix;
  } else {
    fail(text, fmt::format("unsupported scheme '{}' (expected http, https or http+unix)",
                           text.substr(0, sep)));
  }
  const std::string_view rest = text.substr(sep + 3);
  if (out.scheme == Url::Scheme::http_unix)
    parse_unix(text, rest, out);
  else
    parse_tcp(text, rest, out);
  std::string_view trimmed = text;
  while (trimmed.ends_with('/') && trimmed.size() > sep + 3)
    trimmed.remove_suffix(1);
  out.text = std::string(trimmed);
  return out;
}

std::string url_encode(std::string_view text, std::string_view keep) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool unreserved = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
                            (u >= '0' && u <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || keep.find(c) != std::string_view::npos)
      out += c;
    else
      out += fmt::format("%{:02X}", u);
  }
  return out;
}

std::string unix_socket_url(std::string_view socket_path) {
  return "http+unix://" + url_encode(socket_path);
}

}  // namespace rex::http
