// Base-URL parsing of the HTTP client: tcp, TLS and unix-socket forms, and errors that name the
// URL and the problem.
#include <rex/http/url.hpp>

#include <gtest/gtest.h>

#include <string>

#include "support/test_helpers.hpp"

namespace rex::http {
namespace {

TEST(Url, TcpForms) {
  Url u = parse_url("http://127.0.0.1:8000");
  EXPECT_EQ(u.scheme, Url::Scheme::http);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8000);
  EXPECT_EQ(u.prefix, "");
  EXPECT_EQ(u.text, "http://127.0.0.1:8000");
  EXPECT_EQ(u.host_header(), "127.0.0.1:8000");

  u = parse_url("HTTPS://sandbox.example.com/api/v1/");
  EXPECT_EQ(u.scheme, Url::Scheme::https);
  EXPECT_EQ(u.host, "sandbox.example.com");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.prefix, "/api/v1");
  EXPECT_EQ(u.text, "HTTPS://sandbox.example.com/api/v1");

  u = parse_url("http://localhost");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.prefix, "");

  u = parse_url("http://[::1]:9000/x");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 9000);
  EXPECT_EQ(u.prefix, "/x");
  EXPECT_EQ(u.host_header(), "[::1]:9000");
  EXPECT_EQ(parse_url("http://[::1]").port, 80);
}

TEST(Url, UnixSocketForms) {
  Url u = parse_url("http+unix://%2Frun%2Frex%2Fserver.sock/api");
  EXPECT_EQ(u.scheme, Url::Scheme::http_unix);
  EXPECT_EQ(u.socket_path, "/run/rex/server.sock");
  EXPECT_EQ(u.prefix, "/api");
  EXPECT_EQ(u.host_header(), "localhost");

  u = parse_url("http+unix://%2ftmp%2fa.sock");  // lower-case hex digits too
  EXPECT_EQ(u.socket_path, "/tmp/a.sock");
  EXPECT_EQ(u.prefix, "");

  // Plain: the socket ends with the first component named *.sock.
  u = parse_url("http+unix:///run/rex/server.sock/api/v1");
  EXPECT_EQ(u.socket_path, "/run/rex/server.sock");
  EXPECT_EQ(u.prefix, "/api/v1");
  u = parse_url("http+unix:///run/rex.sock.d/x.sock");
  EXPECT_EQ(u.socket_path, "/run/rex.sock.d/x.sock");
  // Without such a component, the whole path is the socket.
  u = parse_url("http+unix:///run/rex/socket/");
  EXPECT_EQ(u.socket_path, "/run/rex/socket");
  EXPECT_EQ(u.prefix, "");
}

TEST(Url, ErrorsNameTheUrlAndTheProblem) {
  const auto problem = [](const std::string& url) -> std::string {
    try {
      parse_url(url);
    } catch (const InvalidUrlError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(problem(""), "invalid URL '': no scheme (expected http://, https:// or http+unix://)");
  EXPECT_EQ(problem("127.0.0.1:8000"),
            "invalid URL '127.0.0.1:8000': no scheme (expected http://, https:// or "
            "http+unix://)");
  EXPECT_EQ(problem("ws://h"),
            "invalid URL 'ws://h': unsupported scheme 'ws' (expected http, https or http+unix)");
  EXPECT_EQ(problem("http://"), "invalid URL 'http://': no host");
  EXPECT_EQ(problem("http://:80"), "invalid URL 'http://:80': no host");
  EXPECT_EQ(problem("http://h:"), "invalid URL 'http://h:': empty port");
  EXPECT_EQ(problem("http://h:0"), "invalid URL 'http://h:0': bad port '0' (expected 1-65535)");
  EXPECT_EQ(problem("http://h:8o"), "invalid URL 'http://h:8o': bad port '8o' (expected 1-65535)");
  EXPECT_EQ(problem("http://u:p@h"),
            "invalid URL 'http://u:p@h': user information in the URL is not supported");
  EXPECT_EQ(problem("http://h/a?b=1"),
            "invalid URL 'http://h/a?b=1': a base URL cannot have a query or a fragment");
  EXPECT_EQ(problem("http://::1:80"),
            "invalid URL 'http://::1:80': an IPv6 address must be written in brackets, e.g. "
            "http://[::1]:8000");
  EXPECT_EQ(problem("http://[::1"), "invalid URL 'http://[::1': unterminated '[' in the host");
  EXPECT_EQ(problem("http://h /x"),
            "invalid URL 'http://h /x': it contains a space or a control character");
  EXPECT_EQ(problem("http+unix://"), "invalid URL 'http+unix://': no unix socket path");
  EXPECT_EQ(problem("http+unix://%2"),
            "invalid URL 'http+unix://%2': bad percent-encoding at '%2'");
  EXPECT_EQ(problem("http+unix://%2Fa%00.sock"),
            "invalid URL 'http+unix://%2Fa%00.sock': the unix socket path contains a NUL byte");
  const std::string long_path = "http+unix:///" + std::string(120, 'a') + ".sock";
  EXPECT_EQ(problem(long_path), "invalid URL '" + long_path +
                                    "': the unix socket path is 126 bytes long; the system "
                                    "allows at most 107");
}

}  // namespace
}  // namespace rex::http
