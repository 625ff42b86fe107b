// RemoteRuntime and the HTTP client against a small scripted HTTP server written here (a test
// fixture, not a stand-in for rex's server): connection failures, retries, timeouts, kept-alive
// connections the server drops, error answers, unix sockets, transfers.
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;
using test::TempDir;

// ---------------------------------------------------------------------------------------------
// The scripted server.

struct Reply {
  enum class Act {
    answer,  // send the response
    drop,    // close the connection without answering
    hang,    // never answer; note when the client closes the connection
  };
  Act act = Act::answer;
  unsigned status = 200;
  std::string body = "{}";
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers{};
  bool close_after = false;  // close the connection after answering (without saying so)
  std::chrono::milliseconds delay{0};
  // When set, the body is sent chunked: these pieces, `chunk_delay` apart, then (unless
  // `hang_after_chunks`) the last chunk. A hanging answer waits for the client to close.
  std::vector<std::string> chunks{};
  std::chrono::milliseconds chunk_delay{0};
  bool hang_after_chunks = false;

  static Reply json_body(std::string body) {
    Reply r;
    r.body = std::move(body);
    return r;
  }
  static Reply of(Act act) {
    Reply r;
    r.act = act;
    return r;
  }
};

struct Seen {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::size_t connection = 0;     // index of the connection it came on
  std::size_t on_connection = 0;  // index of the request on that connection
};

class ScriptedServer {
 public:
  using Script = std::function<Reply(const Seen&)>;

  ScriptedServer(asio::io_context& io, Script script) : io_(io), script_(std::move(script)) {}

  // Listens on 127.0.0.1 on a free port; returns the base URL.
  std::string listen_tcp() {
    tcp_.emplace(io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    asio::co_spawn(io_, accept_tcp(this), on_done);
    return "http://127.0.0.1:" + std::to_string(tcp_->local_endpoint().port());
  }

  // Listens with TLS on `address`; returns the base URL (with `host` as the host name).
  std::string listen_tls(asio::ssl::context& tls, const std::string& host,
                         const std::string& address = "127.0.0.1") {
    tls_ = &tls;
    tcp_.emplace(io_, asio::ip::tcp::endpoint(asio::ip::make_address(address), 0));
    asio::co_spawn(io_, accept_tls(this), on_done);
    return "https://" + host + ":" + std::to_string(tcp_->local_endpoint().port());
  }

  // Listens on a unix socket at `path`.
  void listen_unix(const std::string& path) {
    unix_.emplace(io_, asio::local::stream_protocol::endpoint(path));
    asio::co_spawn(io_, accept_unix(this), on_done);
  }

  ~ScriptedServer() {
    boost::system::error_code ignored;
    if (tcp_)
      tcp_->close(ignored);
    if (unix_)
      unix_->close(ignored);
  }

  std::vector<Seen> requests;
  std::size_t connections = 0;
  std::size_t closed_by_client = 0;  // hanging connections the client closed
  std::size_t closed_between = 0;    // connections the client closed between requests
  std::size_t failed_handshakes = 0;

 private:
  static void on_done(std::exception_ptr e) {
    if (!e)
      return;
    try {
      std::rethrow_exception(e);
    } catch (const boost::system::system_error& error) {
      if (error.code() != asio::error::operation_aborted)
        ADD_FAILURE() << "scripted server: " << error.what();
    } catch (const std::exception& error) {
      ADD_FAILURE() << "scripted server: " << error.what();
    }
  }

  static asio::awaitable<void> accept_tcp(ScriptedServer* self) {
    while (true) {
      auto socket = co_await self->tcp_->async_accept(asio::use_awaitable);
      asio::co_spawn(self->io_, serve(self, std::move(socket), self->connections++), on_done);
    }
  }

  static asio::awaitable<void> accept_tls(ScriptedServer* self) {
    while (true) {
      auto socket = co_await self->tcp_->async_accept(asio::use_awaitable);
      asio::co_spawn(self->io_, handshake_then_serve(self, std::move(socket), self->connections++),
                     on_done);
    }
  }

  static asio::awaitable<void> handshake_then_serve(ScriptedServer* self,
                                                    asio::ip::tcp::socket socket,
                                                    std::size_t index) {
    asio::ssl::stream<asio::ip::tcp::socket> stream(std::move(socket), *self->tls_);
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    co_await stream.async_handshake(asio::ssl::stream_base::server, token);
    if (ec) {
      ++self->failed_handshakes;
      co_return;
    }
    co_await serve(self, std::move(stream), index);
  }

  static asio::awaitable<void> accept_unix(ScriptedServer* self) {
    while (true) {
      auto socket = co_await self->unix_->async_accept(asio::use_awaitable);
      asio::co_spawn(self->io_, serve(self, std::move(socket), self->connections++), on_done);
    }
  }

  template <class Socket>
  static asio::awaitable<void> serve(ScriptedServer* self, Socket socket, std::size_t index) {
    beast::flat_buffer buffer;
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    for (std::size_t n = 0;; ++n) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.body_limit(boost::none);
      co_await bhttp::async_read(socket, buffer, parser, token);
      if (ec) {
        ++self->closed_between;
        co_return;  // the client closed the connection
      }
      Seen seen;
      const auto& message = parser.get();
      seen.method = std::string(message.method_string());
      seen.target = std::string(message.target());
      for (const auto& field : message) {
        std::string name(field.name_string());
        for (auto& c : name)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        seen.headers[name] = std::string(field.value());
      }
      seen.body = message.body();
      seen.connection = index;
      seen.on_connection = n;
      self->requests.push_back(seen);
      const Reply reply = self->script_(seen);
      if (reply.delay.count() > 0) {
        asio::steady_timer pause(socket.get_executor(), reply.delay);
        co_await pause.async_wait(token);
      }
      if (reply.act == Reply::Act::drop)
        co_return;
      if (reply.act == Reply::Act::hang) {
        char byte = 0;
        auto one = asio::buffer(&byte, 1);
        co_await socket.async_read_some(one, token);
        ++self->closed_by_client;
        co_return;
      }
      if (!reply.chunks.empty()) {
        if (!co_await send_chunked(self, socket, reply))
          co_return;
        continue;
      }
      bhttp::response<bhttp::string_body> response(static_cast<bhttp::status>(reply.status), 11);
      response.set(bhttp::field::content_type, reply.content_type);
      for (const auto& [name, value] : reply.headers)
        response.set(name, value);
      response.body() = reply.body;
      response.keep_alive(true);
      response.prepare_payload();
      co_await bhttp::async_write(socket, response, token);
      if (ec || reply.close_after)
        co_return;
    }
  }

  // False when the connection is done (an error, or a hanging answer the client closed).
  template <class Socket>
  static asio::awaitable<bool> send_chunked(ScriptedServer* self, Socket& socket,
                                            const Reply& reply) {
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    bhttp::response<bhttp::empty_body> head(static_cast<bhttp::status>(reply.status), 11);
    head.set(bhttp::field::content_type, reply.content_type);
    head.chunked(true);
    head.keep_alive(true);
    bhttp::response_serializer<bhttp::empty_body> serializer(head);
    co_await bhttp::async_write_header(socket, serializer, token);
    for (std::size_t i = 0; i < reply.chunks.size() && !ec; ++i) {
      if (i > 0 && reply.chunk_delay.count() > 0) {
        asio::steady_timer pause(socket.get_executor(), reply.chunk_delay);
        co_await pause.async_wait(token);
      }
      auto chunk = bhttp::make_chunk(asio::buffer(reply.chunks[i]));
      co_await asio::async_write(socket, chunk, token);
    }
    if (ec)
      co_return false;
    if (reply.hang_after_chunks) {
      char byte = 0;
      auto one = asio::buffer(&byte, 1);
      co_await socket.async_read_some(one, token);
      ++self->closed_by_client;
      co_return false;
    }
    auto last = bhttp::make_chunk_last();
    co_await asio::async_write(socket, last, token);
    co_return !ec;
  }

  asio::io_context& io_;
  Script script_;
  std::optional<asio::ip::tcp::acceptor> tcp_;
  std::optional<asio::local::stream_protocol::acceptor> unix_;
  asio::ssl::context* tls_ = nullptr;
};

// A port nothing listens on.
unsigned short closed_port(asio::io_context& io) {
  asio::ip::tcp::acceptor probe(io,
                                asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return probe.local_endpoint().port();
}

// Runs the io_context until `done` holds (for the server's side of things), under a deadline.
void run_until(asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds deadline = 3000ms) {
  const auto until = Clock::now() + deadline;
  io.restart();
  while (!done() && Clock::now() < until)
    io.run_one_for(10ms);
  EXPECT_TRUE(done()) << "condition not reached within the deadline";
}

RemoteRuntimeConfig config_for(std::string url) {
  RemoteRuntimeConfig cfg;
  cfg.url = std::move(url);
  cfg.client.retry = http::RetryPolicy{
      .max_retries = 3, .initial_delay = 20ms, .max_delay = 1s, .multiplier = 2.0, .jitter = 0.0};
  return cfg;
}

BashAction command(std::string text, std::optional<double> timeout = 5.0) {
  BashAction a;
  a.command = std::move(text);
  a.timeout = timeout;
  return a;
}

std::string observation_json(std::string output) {
  BashObservation o;
  o.output = std::move(output);
  o.exit_code = 0;
  return json::serialize(to_json(o));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------------------------
// Connection failures, retries and timeouts.

TEST(RemoteRuntime, RefusedConnectionMakesIsAliveFalse) {
  asio::io_context io;
  const auto port = closed_port(io);
  RemoteRuntime rt(io.get_executor(), config_for("http://127.0.0.1:" + std::to_string(port)));
  const auto start = Clock::now();
  const IsAliveResponse alive = test::run_async(io, rt.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_THAT(alive.message, HasSubstr("/is_alive"));
  EXPECT_THAT(alive.message, HasSubstr("refused"));
  EXPECT_LT(seconds_since(start), 1.0) << "is_alive must not retry";
}

TEST(RemoteRuntime, RefusedConnectionIsRetriedThenFailsClearly) {
  asio::io_context io;
  const auto port = closed_port(io);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  RemoteRuntime rt(io.get_executor(), config_for(url));
  const auto start = Clock::now();
  try {
    test::run_async(io, rt.run_in_session(command("echo hi")));
    ADD_FAILURE() << "no exception";
  } catch (const http::ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("POST " + url + "/run_in_session"));
    EXPECT_THAT(e.what(), HasSubstr("refused"));
    EXPECT_THAT(e.what(), HasSubstr("4 attempts"));
    EXPECT_EQ(e.extra_info().at("attempts").as_int64(), 4);
  }
  // Three retries after 20, 40 and 80 ms (no jitter).
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.14);
  EXPECT_LT(elapsed, 2.0);
}

TEST(RemoteRuntime, ServerThatComesUpLateIsReachedByRetries) {
  asio::io_context io;
  TempDir dir;
  const std::string socket_path = dir.path() + "/late.sock";
  ScriptedServer server(io, [](const Seen&) { return Reply::json_body(observation_json("hi\n")); });
  auto cfg = config_for("http+unix://" + socket_path);
  cfg.client.retry.initial_delay = 100ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  // The socket appears 50 ms after the first attempt found nothing.
  asio::steady_timer later(io, 50ms);
  later.async_wait([&](boost::system::error_code) { server.listen_unix(socket_path); });
  const BashObservation obs = test::run_async(io, rt.run_in_session(command("echo hi")));
  EXPECT_EQ(obs.output, "hi\n");
  EXPECT_EQ(server.requests.size(), 1u);
}

TEST(RemoteRuntime, StreamingFallsBackWhenTheServerLacksTheEndpoint) {
  asio::io_context io;
  // SWE-ReX's server: no /run_in_session_stream.
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.target == "/run_in_session_stream") {
      Reply r = Reply::json_body(R"({"detail":"Not Found"})");
      r.status = 404;
      return r;
    }
    return Reply::json_body(observation_json("whole\n"));
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  std::vector<std::string> pieces;
  auto listener = [&](std::string_view text) { pieces.emplace_back(text); };
  for (int i = 0; i < 2; ++i) {
    const BashObservation obs =
        test::run_async(io, rt.run_in_session_streaming(command("echo whole"), listener));
    EXPECT_EQ(obs.output, "whole\n");
  }
  EXPECT_TRUE(pieces.empty());
  // Asked once; the second call went straight to /run_in_session.
  ASSERT_EQ(server.requests.size(), 3u);
  EXPECT_EQ(server.requests[0].target, "/run_in_session_stream");
  EXPECT_EQ(server.requests[1].target, "/run_in_session");
  EXPECT_EQ(server.requests[2].target, "/run_in_session");
}

TEST(RemoteRuntime, StreamErrorsBecomeTheTransferredException) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.content_type = "text/event-stream";
    r.body =
        "event: output\ndata: {\"output\": \"partial\"}\n\n"
        "event: error\ndata: {\"swerexception\": {\"message\": \"too slow\", "
        "\"class_path\": \"swerex.exceptions.CommandTimeoutError\", \"traceback\": \"\", "
        "\"extra_info\": {}}}\n\n";
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  std::vector<std::string> pieces;
  auto listener = [&](std::string_view text) { pieces.emplace_back(text); };
  EXPECT_THROW(test::run_async(io, rt.run_in_session_streaming(command("sleep 9"), listener)),
               CommandTimeoutError);
  EXPECT_THAT(pieces, ::testing::ElementsAre("partial"));
}

TEST(RemoteRuntime, DroppedRequestIsRetriedWithTheSameRequestId) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    return seen.connection == 0 ? Reply::of(Reply::Act::drop)
                                : Reply::json_body(observation_json("ok\n"));
  });
  auto cfg = config_for(server.listen_tcp());
  cfg.auth_token = "secret";
  RemoteRuntime rt(io.get_executor(), cfg);
  const BashObservation obs = test::run_async(io, rt.run_in_session(command("echo ok")));
  EXPECT_EQ(obs.output, "ok\n");
  ASSERT_EQ(server.requests.size(), 2u);
  const Seen first = server.requests[0];
  const Seen second = server.requests[1];
  EXPECT_EQ(first.headers.at("x-request-id"), second.headers.at("x-request-id"));
  EXPECT_EQ(first.headers.at("x-request-id").size(), 36u);  // a UUID
  EXPECT_EQ(first.headers.at("x-api-key"), "secret");
  EXPECT_EQ(first.body, second.body);
  EXPECT_EQ(json::parse(first.body).at("action_type"), "bash");

  // The next call gets a fresh ID.
  test::run_async(io, rt.run_in_session(command("echo ok")));
  ASSERT_EQ(server.requests.size(), 3u);
  EXPECT_NE(server.requests[2].headers.at("x-request-id"), first.headers.at("x-request-id"));
}

TEST(RemoteRuntime, AnAnswerIsNeverRetried) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.status = 500;
    r.content_type = "text/html";
    r.body = "<html><body>Internal Server Error</body></html>";
    return r;
  });
  const std::string url = server.listen_tcp();
  RemoteRuntime rt(io.get_executor(), config_for(url));
  Command c;
  c.command = "true";
  try {
    test::run_async(io, rt.execute(c));
    ADD_FAILURE() << "no exception";
  } catch (const http::HttpError& e) {
    EXPECT_EQ(e.status(), 500u);
    EXPECT_EQ(e.url(), url + "/execute");
    EXPECT_THAT(e.body(), HasSubstr("Internal Server Error"));
    EXPECT_THAT(e.what(), HasSubstr("POST " + url + "/execute answered HTTP 500"));
    EXPECT_THAT(e.what(), HasSubstr("<html>"));
  }
  EXPECT_EQ(server.requests.size(), 1u);
}

TEST(RemoteRuntime, TimeoutFiresWithinBoundsAndClosesTheConnection) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) { return Reply::of(Reply::Act::hang); });
  auto cfg = config_for(server.listen_tcp());
  cfg.timeout_margin = 200ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  const auto start = Clock::now();
  try {
    test::run_async(io, rt.run_in_session(command("sleep 100", 0.1)));
    ADD_FAILURE() << "no exception";
  } catch (const http::RequestTimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/run_in_session timed out after 0.3 s"));
  }
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.29);
  EXPECT_LT(elapsed, 1.5);
  EXPECT_EQ(server.requests.size(), 1u) << "a timeout is not retried";
  run_until(io, [&] { return server.closed_by_client == 1; });
}

TEST(RemoteRuntime, IsAliveTimesOutQuicklyAndSaysSo) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) { return Reply::of(Reply::Act::hang); });
  auto cfg = config_for(server.listen_tcp());
  cfg.is_alive_timeout = 150ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  const auto start = Clock::now();
  const IsAliveResponse alive = test::run_async(io, rt.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_THAT(alive.message, HasSubstr("timed out after 0.15 s"));
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(RemoteRuntime, WaitUntilAliveReportsTheLastCheck) {
  asio::io_context io;
  const auto port = closed_port(io);
  auto cfg = config_for("http://127.0.0.1:" + std::to_string(port));
  cfg.poll_interval = 20ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  const auto start = Clock::now();
  try {
    test::run_async(io, rt.wait_until_alive(300ms));
    ADD_FAILURE() << "no exception";
  } catch (const http::RequestTimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("within 0.3 s"));
    EXPECT_THAT(e.what(), HasSubstr("refused"));
  }
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.29);
  EXPECT_LT(elapsed, 1.5);
}

TEST(RemoteRuntime, WaitUntilAliveReturnsOnceTheServerAnswers) {
  asio::io_context io;
  int checks = 0;
  ScriptedServer server(io, [&](const Seen&) {
    ++checks;
    return Reply::json_body(checks < 3 ? R"({"is_alive": false, "message": "starting"})"
                                       : R"({"is_alive": true, "message": ""})");
  });
  auto cfg = config_for(server.listen_tcp());
  cfg.poll_interval = 10ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  test::run_async(io, rt.wait_until_alive(5s));
  EXPECT_EQ(checks, 3);
  EXPECT_EQ(server.requests[0].method, "GET");
  EXPECT_EQ(server.requests[0].target, "/is_alive");
}

TEST(RemoteRuntime, BadUrlsAreRefusedAtConstruction) {
  asio::io_context io;
  const auto make = [&](const char* url) {
    RemoteRuntimeConfig cfg;
    cfg.url = url;
    RemoteRuntime rt(io.get_executor(), cfg);
  };
  EXPECT_THROW_MESSAGE(make("localhost:8000"), http::InvalidUrlError,
                       "invalid URL 'localhost:8000': no scheme (expected http://, https:// or "
                       "http+unix://)");
  EXPECT_THROW_MESSAGE(make("ftp://host"), http::InvalidUrlError,
                       "invalid URL 'ftp://host': unsupported scheme 'ftp' (expected http, https "
                       "or http+unix)");
  EXPECT_THROW_MESSAGE(make("http://host:99999"), http::InvalidUrlError,
                       "invalid URL 'http://host:99999': bad port '99999' (expected 1-65535)");
}

// ---------------------------------------------------------------------------------------------
// Answers.

TEST(RemoteRuntime, TransferredExceptionsKeepTheirTypeAndExtraInfo) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.status = 511;
    r.body = R"({"swerexception": {"message": "session 'x' does not exist",
                 "class_path": "swerex.exceptions.SessionDoesNotExistError",
                 "traceback": "", "extra_info": {"session": "x"}}})";
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  try {
    test::run_async(io, rt.run_in_session(command("ls")));
    ADD_FAILURE() << "no exception";
  } catch (const SessionDoesNotExistError& e) {
    EXPECT_STREQ(e.what(), "session 'x' does not exist");
    EXPECT_EQ(e.extra_info().at("session"), "x");
  }
}

TEST(RemoteRuntime, MalformedAnswersAreErrorsNamingTheUrl) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.target == "/read_file")
      return Reply::json_body("not json");
    Reply r;
    r.status = 511;
    r.body = R"({"detail": "no transfer here"})";
    return r;
  });
  const std::string url = server.listen_tcp();
  RemoteRuntime rt(io.get_executor(), config_for(url));
  ReadFileRequest read;
  read.path = "/etc/hostname";
  try {
    test::run_async(io, rt.read_file(read));
    ADD_FAILURE() << "no exception";
  } catch (const http::HttpError& e) {
    EXPECT_EQ(e.status(), 200u);
    EXPECT_THAT(e.what(), HasSubstr(url + "/read_file answered HTTP 200 with an invalid body"));
  }
  WriteFileRequest write;
  write.path = "/tmp/x";
  try {
    test::run_async(io, rt.write_file(write));
    ADD_FAILURE() << "no exception";
  } catch (const http::HttpError& e) {
    EXPECT_EQ(e.status(), 511u);
    EXPECT_THAT(e.body(), HasSubstr("no transfer here"));
  }
}

TEST(RemoteRuntime, IsAliveReportsErrorStatuses) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.status = 401;
    r.body = R"({"detail": "Invalid API Key"})";
    return r;
  });
  const std::string url = server.listen_tcp();
  RemoteRuntime rt(io.get_executor(), config_for(url));
  const IsAliveResponse alive = test::run_async(io, rt.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_EQ(alive.message, "Status code 401 from " + url + "/is_alive. Message: Invalid API Key");
}

TEST(RemoteRuntime, RequestsFollowTheProtocol) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.target == "/create_session")
      return Reply::json_body(R"({"output": "", "session_type": "bash"})");
    if (seen.target == "/close_session")
      return Reply::json_body(R"({"session_type": "bash"})");
    if (seen.target == "/execute")
      return Reply::json_body(R"({"stdout": "out", "stderr": "", "exit_code": 0})");
    return Reply::json_body("{}");
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp() + "/"));
  const auto body = [](RemoteRuntime& r) -> asio::awaitable<void> {
    CreateBashSessionRequest create;
    create.session = "s1";
    co_await r.create_session(create);
    Command c;
    c.command = std::vector<std::string>{"echo", "out"};
    EXPECT_EQ((co_await r.execute(c)).stdout_, "out");
    CloseBashSessionRequest close_one;
    close_one.session = "s1";
    co_await r.close_session(close_one);
    co_await r.close();
  };
  test::run_async(io, body(rt));
  ASSERT_EQ(server.requests.size(), 4u);
  EXPECT_EQ(server.requests[0].target, "/create_session");
  EXPECT_EQ(json::parse(server.requests[0].body).at("session"), "s1");
  EXPECT_EQ(server.requests[0].headers.at("content-type"), "application/json");
  EXPECT_EQ(server.requests[0].headers.count("x-api-key"), 0u) << "no token, no header";
  EXPECT_EQ(server.requests[1].target, "/execute");
  EXPECT_EQ(server.requests[2].target, "/close_session");
  EXPECT_EQ(server.requests[3].target, "/close");
  EXPECT_EQ(server.requests[3].method, "POST");
  EXPECT_EQ(server.requests[3].body, "");
  // One kept-alive connection carried them all.
  EXPECT_EQ(server.connections, 1u);
  EXPECT_EQ(rt.client().connections_opened(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Kept-alive connections.

TEST(HttpClient, ConnectionTheServerClosedWhileIdleIsNotReused) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r = Reply::json_body(R"({"is_alive": true, "message": ""})");
    r.close_after = true;  // says keep-alive, then closes
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  EXPECT_TRUE(test::run_async(io, rt.is_alive()).is_alive);
  run_until(io, [&] { return server.requests.size() == 1; });
  io.run_for(50ms);  // let the server's close arrive
  EXPECT_TRUE(test::run_async(io, rt.is_alive()).is_alive);
  EXPECT_EQ(server.requests.size(), 2u) << "no request was lost on the closed connection";
  EXPECT_EQ(server.connections, 2u);
}

TEST(HttpClient, ServerClosingAKeptAliveConnectionMidRequestIsRetriedOnce) {
  asio::io_context io;
  // The second request on the first connection meets a server that drops it (as when its idle
  // timeout strikes just as the request arrives).
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.connection == 0 && seen.on_connection == 1)
      return Reply::of(Reply::Act::drop);
    return Reply::json_body(observation_json("x\n"));
  });
  auto cfg = config_for(server.listen_tcp());
  cfg.client.retry.max_retries = 0;  // the stale-connection retry is not a counted retry
  RemoteRuntime rt(io.get_executor(), cfg);
  EXPECT_EQ(test::run_async(io, rt.run_in_session(command("a"))).output, "x\n");
  EXPECT_EQ(test::run_async(io, rt.run_in_session(command("b"))).output, "x\n");
  ASSERT_EQ(server.requests.size(), 3u);
  EXPECT_EQ(server.requests[1].headers.at("x-request-id"),
            server.requests[2].headers.at("x-request-id"));
  EXPECT_EQ(server.connections, 2u);
}

asio::awaitable<void> two_at_once(http::Client& client) {
  http::ClientRequest a;
  a.target = "/slow";
  http::ClientRequest b = a;
  auto first = client.request(a);
  auto second = client.request(b);
  const auto [ra, rb] = co_await (std::move(first) && std::move(second));
  EXPECT_EQ(ra.status, 200u);
  EXPECT_EQ(rb.status, 200u);
}

TEST(HttpClient, ConcurrentRequestsUseSeparateConnectionsThenReuseThem) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.delay = 50ms;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  test::run_async(io, two_at_once(client));
  EXPECT_EQ(client.connections_opened(), 2u);
  EXPECT_EQ(client.idle_connections(), 2u);
  test::run_async(io, two_at_once(client));
  EXPECT_EQ(client.connections_opened(), 2u);
  EXPECT_EQ(server.connections, 2u);
}

TEST(HttpClient, IdleConnectionsAreBounded) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.delay = 20ms;
    return r;
  });
  http::ClientConfig cfg;
  cfg.max_idle_connections = 1;
  http::Client client(io.get_executor(), server.listen_tcp(), cfg);
  test::run_async(io, two_at_once(client));
  EXPECT_EQ(client.idle_connections(), 1u);
}

TEST(HttpClient, ClosingIdleConnectionsClosesThemAtOnceAndLaterRequestsReconnect) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.delay = 20ms;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  test::run_async(io, two_at_once(client));
  ASSERT_EQ(client.idle_connections(), 2u);
  client.close_idle_connections();
  EXPECT_EQ(client.idle_connections(), 0u);
  run_until(io, [&] { return server.closed_between == 2; });
  test::run_async(io, two_at_once(client));
  EXPECT_EQ(client.connections_opened(), 4u);
}

asio::awaitable<void> request_or_give_up(http::Client& client, std::chrono::milliseconds after) {
  http::ClientRequest request;
  asio::steady_timer give_up(client.get_executor(), after);
  auto answer = client.request(request);
  auto timer = give_up.async_wait(asio::use_awaitable);
  const auto which = co_await (std::move(answer) || std::move(timer));
  EXPECT_EQ(which.index(), 1u) << "the request should not have been answered";
}

TEST(HttpClient, CancelledRequestClosesItsConnection) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) { return Reply::of(Reply::Act::hang); });
  http::Client client(io.get_executor(), server.listen_tcp());
  const auto start = Clock::now();
  test::run_async(io, request_or_give_up(client, 100ms));
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_EQ(client.idle_connections(), 0u);
  run_until(io, [&] { return server.closed_by_client == 1; });
}

TEST(HttpClient, BodiesStreamFromAndToFiles) {
  asio::io_context io;
  TempDir dir;
  std::string big(3 << 20, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4096)
    big[i] = static_cast<char>('a' + (i / 4096) % 26);
  const std::string source = dir.file("source.bin", big);
  ScriptedServer server(io, [](const Seen& seen) {
    Reply r;
    r.body = seen.body;  // echo
    r.content_type = "application/octet-stream";
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  http::ClientRequest request;
  request.method = "PUT";
  request.target = "/echo";
  request.body_file = source;
  request.response_file = dir.path() + "/echoed.bin";
  const http::ClientResponse response = test::run_async(io, client.request(request));
  EXPECT_TRUE(response.body_in_file);
  EXPECT_TRUE(response.body.empty());
  EXPECT_EQ(server.requests.at(0).body.size(), big.size());
  std::ifstream in(request.response_file, std::ios::binary);
  const std::string echoed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(echoed == big);
  EXPECT_EQ(response.header("content-type").value_or(""), "application/octet-stream");
  EXPECT_EQ(response.header("CONTENT-TYPE").value_or(""), "application/octet-stream");
}

// Collects what on_body hands over, with the time each piece came.
struct Pieces {
  std::vector<std::string> pieces;
  std::vector<Clock::time_point> times;
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view piece) {
      pieces.emplace_back(piece);
      times.push_back(Clock::now());
    };
  }
  std::string joined() const {
    std::string all;
    for (const auto& p : pieces)
      all += p;
    return all;
  }
};

TEST(HttpClient, OnBodyGetsAChunkedAnswerPieceByPieceAsItArrives) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.chunks = {"{\"status\":\"one\"}\n", "{\"status\":\"two\"}\n", "{\"status\":\"three\"}\n"};
    r.chunk_delay = 100ms;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  Pieces got;
  http::ClientRequest request;
  request.on_body = got.sink();
  const http::ClientResponse response = test::run_async(io, client.request(request));
  EXPECT_EQ(response.status, 200u);
  EXPECT_TRUE(response.body.empty()) << "a streamed body is not kept";
  EXPECT_FALSE(response.body_in_file);
  EXPECT_EQ(got.joined(), "{\"status\":\"one\"}\n{\"status\":\"two\"}\n{\"status\":\"three\"}\n");
  ASSERT_GE(got.pieces.size(), 3u);
  // Handed over as they came (100 ms apart), not all at the end.
  EXPECT_GE(got.times.back() - got.times.front(), 150ms);
  // The connection is kept for the next request, which may read its answer whole.
  request.on_body = nullptr;
  EXPECT_EQ(test::run_async(io, client.request(request)).body, got.joined());
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClient, OnBodyGetsAnAnswerWithAContentLength) {
  asio::io_context io;
  const std::string big(1 << 20, 'y');
  ScriptedServer server(io, [&](const Seen&) {
    Reply r;
    r.body = big;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  std::size_t bytes = 0;
  std::size_t calls = 0;
  http::ClientRequest request;
  request.on_body = [&](std::string_view piece) {
    bytes += piece.size();
    ++calls;
    EXPECT_EQ(piece.find_first_not_of('y'), std::string_view::npos);
  };
  const http::ClientResponse response = test::run_async(io, client.request(request));
  EXPECT_EQ(bytes, big.size());
  EXPECT_GT(calls, 1u) << "a large body comes in several pieces";
  EXPECT_TRUE(response.body.empty());
}

TEST(HttpClient, OnBodyIsNotUsedForAnErrorAnswer) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.status = 404;
    r.body = R"({"message":"No such image"})";
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  Pieces got;
  http::ClientRequest request;
  request.on_body = got.sink();
  const http::ClientResponse response = test::run_async(io, client.request(request));
  EXPECT_EQ(response.status, 404u);
  EXPECT_EQ(response.body, R"({"message":"No such image"})");
  EXPECT_TRUE(got.pieces.empty());
}

TEST(HttpClient, OnBodyStreamObeysTheDeadlineAndKeepsWhatCame) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.chunks = {"first\n"};
    r.hang_after_chunks = true;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  Pieces got;
  http::ClientRequest request;
  request.on_body = got.sink();
  request.timeout = 300ms;
  EXPECT_THROW_CONTAINING(test::run_async(io, client.request(request)), http::RequestTimeoutError,
                          "timed out after 0.3 s");
  EXPECT_EQ(got.joined(), "first\n");
  run_until(io, [&] { return server.closed_by_client == 1; });
}

asio::awaitable<void> stream_then_give_up(http::Client& client, Pieces& got) {
  http::ClientRequest request;
  request.on_body = got.sink();
  request.timeout = std::chrono::hours(24);
  asio::steady_timer give_up(client.get_executor(), 200ms);
  auto answer = client.request(request);
  auto timer = give_up.async_wait(asio::use_awaitable);
  const auto which = co_await (std::move(answer) || std::move(timer));
  EXPECT_EQ(which.index(), 1u) << "the stream should not have ended";
}

TEST(HttpClient, CancellingAStreamClosesItsConnection) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.chunks = {"a\n", "b\n"};
    r.chunk_delay = 20ms;
    r.hang_after_chunks = true;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  Pieces got;
  test::run_async(io, stream_then_give_up(client, got));
  EXPECT_EQ(got.joined(), "a\nb\n");
  EXPECT_EQ(client.idle_connections(), 0u);
  run_until(io, [&] { return server.closed_by_client == 1; });
}

TEST(HttpClient, OnBodyExceptionEndsTheRequestAndPropagates) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.chunks = {"good\n", "bad\n", "never\n"};
    r.chunk_delay = 20ms;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  std::vector<std::string> seen;
  http::ClientRequest request;
  request.on_body = [&](std::string_view piece) {
    seen.emplace_back(piece);
    if (piece == "bad\n")
      throw std::runtime_error("the stream said: bad");
  };
  EXPECT_THROW_MESSAGE(test::run_async(io, client.request(request)), std::runtime_error,
                       "the stream said: bad");
  EXPECT_EQ(seen, (std::vector<std::string>{"good\n", "bad\n"}));
  EXPECT_EQ(client.idle_connections(), 0u) << "a half-read answer leaves its connection unusable";
}

TEST(HttpClient, AnswerLargerThanTheLimitIsRefused) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.body = std::string(1000, 'x');
    return r;
  });
  http::ClientConfig cfg;
  cfg.max_body_in_memory = 100;
  http::Client client(io.get_executor(), server.listen_tcp(), cfg);
  http::ClientRequest request;
  try {
    test::run_async(io, client.request(request));
    ADD_FAILURE() << "no exception";
  } catch (const SwerexException& e) {
    EXPECT_THAT(e.what(), HasSubstr("has 1000 bytes, more than the 100 allowed"));
  }
}

TEST(HttpClient, BadRequestsAreRefusedBeforeSending) {
  asio::io_context io;
  http::Client client(io.get_executor(), "http://127.0.0.1:9");
  http::ClientRequest request;
  request.method = "FETCH";
  EXPECT_THROW_MESSAGE(test::run_async(io, client.request(request)), std::invalid_argument,
                       "unknown HTTP method 'FETCH'");
  request.method = "GET";
  request.target = "is_alive";
  EXPECT_THROW_MESSAGE(test::run_async(io, client.request(request)), std::invalid_argument,
                       "request target 'is_alive' must start with '/'");
}

// ---------------------------------------------------------------------------------------------
// TLS.

// A self-signed certificate for "localhost" and 127.0.0.1, made for the test.
struct TestCertificate {
  std::string certificate_pem;
  std::string key_pem;
};

TestCertificate make_certificate() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  const std::string common_name = "rex test";
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  for (const auto& [nid, value] : {std::pair{NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1"},
                                   std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(cert, key, EVP_sha256());
  const auto to_pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<std::size_t>(size));
    BIO_free(bio);
    return pem;
  };
  TestCertificate out;
  out.certificate_pem = to_pem([&](BIO* bio) { PEM_write_bio_X509(bio, cert); });
  out.key_pem = to_pem(
      [&](BIO* bio) { PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr); });
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    certificate_ = make_certificate();
    ca_file_ = dir_.file("ca.pem", certificate_.certificate_pem);
    server_tls_.use_certificate_chain(asio::buffer(certificate_.certificate_pem));
    server_tls_.use_private_key(asio::buffer(certificate_.key_pem), asio::ssl::context::pem);
  }

  static Reply alive(const Seen&) { return Reply::json_body(R"({"is_alive": true})"); }

  asio::io_context io_;
  TempDir dir_;
  TestCertificate certificate_;
  std::string ca_file_;
  asio::ssl::context server_tls_{asio::ssl::context::tls_server};
};

TEST_F(Tls, TrustedCertificateWorksByAddressAndByName) {
  ScriptedServer server(io_, alive);
  const std::string by_address = server.listen_tls(server_tls_, "127.0.0.1");
  const std::string by_name = "https://localhost:" + by_address.substr(by_address.rfind(':') + 1);
  for (const std::string& url : {by_address, by_name}) {
    auto cfg = config_for(url);
    cfg.client.ca_file = ca_file_;
    RemoteRuntime rt(io_.get_executor(), cfg);
    const IsAliveResponse first = test::run_async(io_, rt.is_alive());
    EXPECT_TRUE(first.is_alive) << url << ": " << first.message;
    EXPECT_TRUE(test::run_async(io_, rt.is_alive()).is_alive);
    EXPECT_EQ(rt.client().connections_opened(), 1u) << "TLS connections are kept alive too";
  }
  ASSERT_EQ(server.requests.size(), 4u);
  EXPECT_EQ(server.requests[2].headers.at("host"), by_name.substr(8));
}

TEST_F(Tls, UntrustedCertificateFailsWithoutRetries) {
  ScriptedServer server(io_, alive);
  const std::string url = server.listen_tls(server_tls_, "127.0.0.1");
  RemoteRuntime rt(io_.get_executor(), config_for(url));
  ReadFileRequest read;
  read.path = "/x";
  try {
    test::run_async(io_, rt.read_file(read));
    ADD_FAILURE() << "no exception";
  } catch (const http::ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("in the TLS handshake"));
    EXPECT_THAT(e.what(), HasSubstr("certificate verify failed"));
    EXPECT_THAT(e.what(), HasSubstr("(1 attempt)"));
  }
  EXPECT_EQ(server.connections, 1u);
}

TEST_F(Tls, WrongHostNameFails) {
  // A certificate for localhost and 127.0.0.1 does not vouch for 127.0.0.2.
  ScriptedServer server(io_, alive);
  auto cfg = config_for(server.listen_tls(server_tls_, "127.0.0.2", "127.0.0.2"));
  cfg.client.ca_file = ca_file_;
  RemoteRuntime rt(io_.get_executor(), cfg);
  const IsAliveResponse alive = test::run_async(io_, rt.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_THAT(alive.message, HasSubstr("certificate verify failed"));
}

TEST_F(Tls, VerificationCanBeTurnedOff) {
  ScriptedServer server(io_, alive);
  auto cfg = config_for(server.listen_tls(server_tls_, "127.0.0.1"));
  cfg.client.verify_peer = false;
  RemoteRuntime rt(io_.get_executor(), cfg);
  EXPECT_TRUE(test::run_async(io_, rt.is_alive()).is_alive);
}

TEST_F(Tls, UnreadableCaFileIsRefusedAtConstruction) {
  auto cfg = config_for("https://127.0.0.1:1");
  cfg.client.ca_file = dir_.path() + "/missing.pem";
  EXPECT_THROW(RemoteRuntime(io_.get_executor(), cfg), std::invalid_argument);
}

// A server that asks for a client certificate signed by `client_ca` (a Docker engine started
// with --tlsverify does this).
class ClientCertificate : public Tls {
 protected:
  void SetUp() override {
    Tls::SetUp();
    client_ = make_certificate();
    cert_file_ = dir_.file("cert.pem", client_.certificate_pem);
    key_file_ = dir_.file("key.pem", client_.key_pem);
    server_tls_.add_certificate_authority(asio::buffer(client_.certificate_pem));
    server_tls_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }

  http::ClientConfig client_config() const {
    http::ClientConfig cfg;
    cfg.ca_file = ca_file_;
    cfg.retry.max_retries = 0;
    return cfg;
  }

  TestCertificate client_;
  std::string cert_file_;
  std::string key_file_;
};

TEST_F(ClientCertificate, IsPresentedWhenConfigured) {
  ScriptedServer server(io_, alive);
  const std::string url = server.listen_tls(server_tls_, "127.0.0.1");
  auto cfg = client_config();
  cfg.cert_file = cert_file_;
  cfg.key_file = key_file_;
  http::Client client(io_.get_executor(), url, cfg);
  http::ClientRequest request;
  request.target = "/is_alive";
  const http::ClientResponse response = test::run_async(io_, client.request(request));
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(server.failed_handshakes, 0u);
}

TEST_F(ClientCertificate, ServerRefusesAClientWithout) {
  ScriptedServer server(io_, alive);
  const std::string url = server.listen_tls(server_tls_, "127.0.0.1");
  http::Client client(io_.get_executor(), url, client_config());
  http::ClientRequest request;
  // With TLS 1.3 the client may finish its handshake before the server refuses it: the failure
  // then shows when the answer is read. Either way no answer and a clear connection error.
  try {
    test::run_async(io_, client.request(request));
    ADD_FAILURE() << "no exception";
  } catch (const http::ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr(url));
  }
  run_until(io_, [&] { return server.failed_handshakes == 1; });
}

TEST_F(ClientCertificate, DockerEngineOverTlsUsesTheCertPath) {
  // DOCKER_CERT_PATH's layout: ca.pem vouches for the engine, cert.pem + key.pem for us.
  TempDir cert_path;
  cert_path.file("ca.pem", certificate_.certificate_pem);
  cert_path.file("cert.pem", client_.certificate_pem);
  cert_path.file("key.pem", client_.key_pem);
  ScriptedServer server(io_, [](const Seen&) {
    return Reply::json_body(R"({"ApiVersion":"1.41","Version":"scripted"})");
  });
  const std::string url = server.listen_tls(server_tls_, "localhost");
  docker::EngineConfig config;
  config.host = "tcp://localhost:" + url.substr(url.rfind(':') + 1);
  config.tls = true;
  config.cert_path = cert_path.path();
  docker::Engine engine(io_.get_executor(), config);
  EXPECT_FALSE(engine.is_local());
  EXPECT_EQ(engine.endpoint(), config.host);
  const json::object version = test::run_async(io_, engine.version());
  EXPECT_EQ(version.at("Version").as_string(), "scripted");
  ASSERT_EQ(server.requests.size(), 1u);
  EXPECT_EQ(server.requests[0].target, "/v1.41/version");
  EXPECT_EQ(server.failed_handshakes, 0u);
}

TEST_F(ClientCertificate, BadFilesAreRefusedAtConstruction) {
  const std::string url = "https://127.0.0.1:1";
  auto cfg = client_config();
  cfg.cert_file = cert_file_;
  EXPECT_THROW_CONTAINING(http::Client(io_.get_executor(), url, cfg), std::invalid_argument,
                          "needs both a certificate file and a key file");
  cfg.key_file = dir_.path() + "/missing-key.pem";
  EXPECT_THROW_CONTAINING(http::Client(io_.get_executor(), url, cfg), std::invalid_argument,
                          "cannot load the TLS client key '" + cfg.key_file + "'");
  cfg.key_file = dir_.file("other-key.pem", make_certificate().key_pem);
  EXPECT_THROW(http::Client(io_.get_executor(), url, cfg), std::invalid_argument);
  cfg.key_file = key_file_;
  cfg.cert_file = dir_.path() + "/missing-cert.pem";
  EXPECT_THROW_CONTAINING(http::Client(io_.get_executor(), url, cfg), std::invalid_argument,
                          "cannot load the TLS client certificate '" + cfg.cert_file + "'");
}

// ---------------------------------------------------------------------------------------------
// Unix sockets.

TEST(RemoteRuntime, UnixSocketUrlsInBothFormsWithAPrefix) {
  asio::io_context io;
  TempDir dir;
  const std::string socket_path = dir.path() + "/rex.sock";
  ScriptedServer server(io, [](const Seen&) { return Reply::json_body(R"({"is_alive": true})"); });
  server.listen_unix(socket_path);
  std::string encoded;
  for (char c : socket_path)
    encoded += c == '/' ? std::string("%2F") : std::string(1, c);
  for (const std::string& url :
       {"http+unix://" + socket_path + "/api", "http+unix://" + encoded + "/api/"}) {
    RemoteRuntime rt(io.get_executor(), config_for(url));
    const IsAliveResponse alive = test::run_async(io, rt.is_alive());
    EXPECT_TRUE(alive.is_alive) << url << ": " << alive.message;
  }
  ASSERT_EQ(server.requests.size(), 2u);
  EXPECT_EQ(server.requests[0].target, "/api/is_alive");
  EXPECT_EQ(server.requests[1].target, "/api/is_alive");
  EXPECT_EQ(server.requests[0].headers.at("host"), "localhost");
}

// ---------------------------------------------------------------------------------------------
// Transfers.

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(RemoteRuntime, DownloadsAFileOrADirectory) {
  asio::io_context io;
  TempDir remote;
  TempDir local;
  remote.file("one.txt", "one\n");
  fs::create_directories(remote.path() + "/tree/sub");
  remote.file("tree/sub/two.txt", "two\n");
  const std::string tar = remote.path() + "/tree.tar";
  create_archive(remote.path() + "/tree", tar, ArchiveFormat::tar);
  ScriptedServer server(io, [&](const Seen& seen) {
    const auto path = json::parse(seen.body).at("path").as_string();
    Reply r;
    r.content_type = "application/octet-stream";
    if (path == "one") {
      r.headers.emplace_back("X-Rex-Download-Kind", "file");
      r.body = slurp(remote.path() + "/one.txt");
    } else if (path == "tree") {
      r.headers.emplace_back("X-Rex-Download-Kind", "directory");
      r.body = slurp(tar);
    } else {
      r.status = 511;
      r.content_type = "application/json";
      r.body = R"({"swerexception": {"message": "[Errno 2] No such file or directory: 'gone'",
                   "class_path": "builtins.FileNotFoundError", "traceback": "",
                   "extra_info": {}}})";
    }
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  DownloadRequest file;
  file.path = "one";
  file.target_path = local.path() + "/new/dir/one.txt";
  test::run_async(io, rt.download(file));
  EXPECT_EQ(slurp(file.target_path), "one\n");
  EXPECT_EQ(json::parse(server.requests[0].body),
            json::parse(R"({"path": "one", "format": "tar"})"));

  DownloadRequest tree;
  tree.path = "tree";
  tree.target_path = local.path() + "/tree-copy";
  test::run_async(io, rt.download(tree));
  EXPECT_EQ(slurp(local.path() + "/tree-copy/sub/two.txt"), "two\n");

  DownloadRequest gone;
  gone.path = "gone";
  gone.target_path = local.path() + "/gone.txt";
  EXPECT_THROW_MESSAGE(test::run_async(io, rt.download(gone)), FileNotFoundError,
                       "[Errno 2] No such file or directory: 'gone'");
  // Nothing half-written is left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(local.path()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"new", "tree-copy"}));
}

TEST(RemoteRuntime, UploadsAFileAsIsAndADirectoryZipped) {
  asio::io_context io;
  TempDir local;
  local.file("a.txt", "alpha\n");
  fs::create_directories(local.path() + "/dir/sub");
  local.file("dir/sub/b.txt", "beta\n");
  ScriptedServer server(io, [](const Seen&) { return Reply::json_body("{}"); });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  UploadRequest file;
  file.source_path = local.path() + "/a.txt";
  file.target_path = "/remote/a.txt";
  test::run_async(io, rt.upload(file));
  UploadRequest dir;
  dir.source_path = local.path() + "/dir";
  dir.target_path = "/remote/dir";
  test::run_async(io, rt.upload(dir));
  UploadRequest missing;
  missing.source_path = local.path() + "/missing";
  missing.target_path = "/remote/missing";
  EXPECT_THROW(test::run_async(io, rt.upload(missing)), FileNotFoundError);

  ASSERT_EQ(server.requests.size(), 2u);
  for (const auto& seen : server.requests) {
    EXPECT_EQ(seen.target, "/upload");
    EXPECT_THAT(seen.headers.at("content-type"), StartsWith("multipart/form-data; boundary="));
  }
  const std::string& first = server.requests[0].body;
  EXPECT_THAT(first, HasSubstr("name=\"file\"; filename=\"a.txt\""));
  EXPECT_THAT(first, HasSubstr("\r\n\r\nalpha\n\r\n"));
  EXPECT_THAT(first, HasSubstr("name=\"target_path\"\r\n\r\n/remote/a.txt\r\n"));
  EXPECT_THAT(first, HasSubstr("name=\"unzip\"\r\n\r\nfalse\r\n"));
  const std::string& second = server.requests[1].body;
  EXPECT_THAT(second, HasSubstr("filename=\"zipped_transfer.zip\""));
  EXPECT_THAT(second, HasSubstr("Content-Type: application/zip"));
  EXPECT_THAT(second, HasSubstr("name=\"unzip\"\r\n\r\ntrue\r\n"));
  EXPECT_THAT(second, HasSubstr("PK\x03\x04"));  // a zip's local file header
}

}  // namespace
}  // namespace rex
