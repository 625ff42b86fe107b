// The HTTP server's request path over Server::serve_connection: raw bytes in on one end of a
// socketpair, a DummyRuntime behind it, the raw answer out. Also holds the inputs fuzzing
// found (fuzz/fuzz_http_server.cpp) as regression tests.
#include <rex/runtime/dummy_runtime.hpp>
#include <rex/server/server.hpp>

#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <string>
#include <string_view>

#include "support/async_test.hpp"

namespace {

namespace asio = boost::asio;
using unix_socket = asio::local::stream_protocol;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

asio::awaitable<void> send_all(unix_socket::socket& socket, std::string input) {
  auto [ec, n] = co_await asio::async_write(socket, asio::buffer(input), use_tuple);
  (void)ec;
  (void)n;
  boost::system::error_code ignored;
  socket.shutdown(asio::socket_base::shutdown_send, ignored);
}

asio::awaitable<void> receive_all(unix_socket::socket& socket, std::string& out) {
  std::array<char, 4096> buffer{};
  while (true) {
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buffer), use_tuple);
    out.append(buffer.data(), n);
    if (ec)
      co_return;
  }
}

asio::awaitable<void> serve(rex::server::Server& server, unix_socket::socket socket) {
  co_await server.serve_connection(std::move(socket));
}

// Sends `input` on one connection, then end of stream; returns all the server wrote.
std::string exchange(std::string input, rex::server::ServerConfig config = {}) {
  asio::io_context io;
  rex::DummyRuntime runtime;
  config.file_threads = 1;
  rex::server::Server server(io.get_executor(), runtime, config);
  unix_socket::socket client(io);
  unix_socket::socket served(io);
  asio::local::connect_pair(client, served);
  std::string output;
  asio::co_spawn(io, send_all(client, std::move(input)), asio::detached);
  asio::co_spawn(io, receive_all(client, output), asio::detached);
  rex::test::run_async(io, serve(server, std::move(served)), std::chrono::seconds(10));
  io.restart();
  io.run_for(std::chrono::seconds(5));  // the client's last read
  return output;
}

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(ServeConnection, AnswersPipelinedRequestsUntilTheClientEnds) {
  const std::string out = exchange(
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /create_session HTTP/1.1\r\nContent-Length: 15\r\n\r\n{\"session\":\"s\"}"
      "GET /is_alive HTTP/1.1\r\n\r\n");
  EXPECT_EQ(count(out, "HTTP/1.1 200 OK\r\n"), 3u) << out;
  EXPECT_NE(out.find("{\"message\":\"hello world\"}"), std::string::npos) << out;
  EXPECT_NE(out.find("{\"is_alive\":true,\"message\":\"\"}"), std::string::npos) << out;
}

TEST(ServeConnection, AuthenticatesAndRoutesLikeAnAcceptedConnection) {
  rex::server::ServerConfig config;
  config.auth_token = "t";
  const std::string out = exchange(
      "GET / HTTP/1.1\r\n\r\n"
      "GET / HTTP/1.1\r\nX-API-Key: u\r\n\r\n"
      "GET /nowhere HTTP/1.1\r\nX-API-Key: t\r\n\r\n",
      config);
  EXPECT_NE(out.find("HTTP/1.1 403 Forbidden"), std::string::npos) << out;
  EXPECT_NE(out.find("HTTP/1.1 401 Unauthorized"), std::string::npos) << out;
  EXPECT_NE(out.find("HTTP/1.1 404 Not Found"), std::string::npos) << out;
}

// Found while writing fuzz/fuzz_http_server.cpp: an answer to HEAD carried a body, which a
// client reads as the start of the next answer. HEAD is now GET without the body (as FastAPI
// serves it), and a HEAD refused with 405 has no body either.
TEST(ServeConnection, HeadAnswersCarryHeadersOnly) {
  const std::string out = exchange(
      "HEAD /is_alive HTTP/1.1\r\n\r\n"
      "HEAD /execute HTTP/1.1\r\n\r\n"
      "GET / HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(out.starts_with("HTTP/1.1 200 OK\r\n")) << out;
  EXPECT_NE(out.find("Content-Length: 30\r\n"), std::string::npos) << out;  // as GET's
  EXPECT_EQ(out.find("is_alive\":true"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\n\r\nHTTP/1.1 405 Method Not Allowed\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\n\r\nHTTP/1.1 200 OK\r\n"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\n\r\n{\"message\":\"hello world\"}")) << out;
}

}  // namespace
