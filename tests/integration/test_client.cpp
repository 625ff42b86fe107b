// The HTTP client against a small scripted HTTP server (support/scripted_server.hpp): kept-alive
// connections the server drops, concurrency, streamed bodies, limits, TLS and client certificates.
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/url.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "support/async_test.hpp"
#include "support/scripted_server.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using test::command;
using test::config_for;
using test::observation_json;
using test::Reply;
using test::run_until;
using test::ScriptedServer;
using test::seconds_since;
using test::Seen;
using test::TempDir;

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

// Sends a body (from memory, then from a file), then an empty one, on one connection, and
// returns what the server saw.
asio::awaitable<void> three_bodies(http::Client& client, std::string file) {
  http::ClientRequest from_memory;
  from_memory.method = "POST";
  from_memory.target = "/a";
  from_memory.body = R"({"command": "echo ok"})";
  EXPECT_EQ((co_await client.request(from_memory)).status, 200u);
  http::ClientRequest from_file;
  from_file.method = "PUT";
  from_file.target = "/b";
  from_file.body_file = std::move(file);
  EXPECT_EQ((co_await client.request(from_file)).status, 200u);
  http::ClientRequest empty;
  empty.method = "POST";
  empty.target = "/c";
  EXPECT_EQ((co_await client.request(empty)).status, 200u);
}

void expect_chunked_bodies(const std::vector<Seen>& seen, const std::string& file_body) {
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].body, R"({"command": "echo ok"})");
  EXPECT_EQ(seen[1].body, file_body);
  for (int i : {0, 1}) {
    EXPECT_EQ(seen[i].headers.count("content-length"), 0u) << seen[i].target;
    EXPECT_EQ(
        seen[i].headers.count("transfer-encoding") ? seen[i].headers.at("transfer-encoding") : "",
        "chunked")
        << seen[i].target;
  }
  // Nothing to chunk: an empty body is said to be empty.
  EXPECT_EQ(seen[2].body, "");
  EXPECT_EQ(seen[2].headers.count("transfer-encoding"), 0u);
  for (const auto& s : seen)
    EXPECT_EQ(s.connection, 0u) << "each body ended where the server found its end";
}

TEST(HttpClient, ChunkedRequestBodiesArriveWholeAndKeepTheConnection) {
  asio::io_context io;
  TempDir dir;
  const std::string file_body(200000, 'f');
  const std::string file = dir.file("body.bin", file_body);
  ScriptedServer server(io, [](const Seen&) { return Reply::json_body("{}"); });
  http::ClientConfig cfg;
  cfg.chunked_request_bodies = true;
  http::Client client(io.get_executor(), server.listen_tcp(), cfg);
  test::run_async(io, three_bodies(client, file));
  expect_chunked_bodies(server.requests, file_body);
  EXPECT_EQ(client.connections_opened(), 1u);
}

// ---------------------------------------------------------------------------------------------
// RemoteRuntime::forward: a proxy's calls on the runtime's own kept-alive connection.

asio::awaitable<http::ClientResponse> forward_run(RemoteRuntime& rt, std::string body,
                                                  std::string id) {
  co_return co_await rt.forward("POST", "/run_in_session", std::move(body), nullptr, std::move(id));
}

TEST(Forward, CallsGoAsTheyCameOnOneConnectionAndComeBackAsAnswered) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    Reply r = Reply::json_body(R"({"echo": )" + seen.body + "}");
    if (seen.on_connection == 1)
      r.status = 422;  // the protocol's own refusals come back as they are
    r.headers.emplace_back("X-Extra", "kept");
    return r;
  });
  auto cfg = config_for(server.listen_tcp());
  cfg.auth_token = "secret";
  RemoteRuntime rt(io.get_executor(), cfg);
  for (int i = 0; i < 3; ++i) {
    const auto got = test::run_async(
        io, forward_run(rt, fmt::format(R"({{"n": {}}})", i), fmt::format("id{}", i)));
    EXPECT_EQ(got.status, i == 1 ? 422u : 200u);
    EXPECT_EQ(got.body, fmt::format(R"({{"echo": {{"n": {}}}}})", i));
    EXPECT_EQ(got.header("content-type").value_or(""), "application/json");
    EXPECT_EQ(got.header("x-extra").value_or(""), "kept");
  }
  ASSERT_EQ(server.requests.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const Seen& seen = server.requests[i];
    EXPECT_EQ(seen.method, "POST");
    EXPECT_EQ(seen.target, "/run_in_session");
    EXPECT_EQ(seen.headers.at("x-api-key"), "secret");
    EXPECT_EQ(seen.headers.at("x-request-id"), fmt::format("id{}", i));
    EXPECT_EQ(seen.headers.at("content-type"), "application/json");
    EXPECT_EQ(seen.connection, 0u);
  }
  EXPECT_EQ(server.connections, 1u);
}

TEST(Forward, AConnectionTheServerClosedIsReplacedAndNoCallIsLost) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.connection == 0 && seen.on_connection == 1)
      return Reply::of(Reply::Act::drop);  // as when its idle timeout strikes
    Reply r = Reply::json_body(R"({"ok": true})");
    r.close_after = seen.connection == 1;  // says keep-alive, then closes
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  for (int i = 0; i < 4; ++i) {
    const auto got = test::run_async(io, forward_run(rt, "{}", fmt::format("id{}", i)));
    EXPECT_EQ(got.status, 200u) << i;
    EXPECT_EQ(got.body, R"({"ok": true})") << i;
    io.run_for(20ms);  // let a close arrive
  }
  // The dropped call was sent again with its id, so a server's replay store can answer it.
  ASSERT_GE(server.requests.size(), 5u);
  EXPECT_EQ(server.requests[1].headers.at("x-request-id"),
            server.requests[2].headers.at("x-request-id"));
}

TEST(Forward, AChunkedAnswerIsReadWholeAndItsConnectionKept) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    Reply r;
    if (seen.on_connection == 0 && seen.connection == 0)
      r.chunks = {R"({"out)", R"(put": ")", R"(abc"})"};
    else
      r = Reply::json_body(R"({"second": true})");
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  EXPECT_EQ(test::run_async(io, forward_run(rt, "{}", "a")).body, R"({"output": "abc"})");
  EXPECT_EQ(test::run_async(io, forward_run(rt, "{}", "b")).body, R"({"second": true})");
  EXPECT_EQ(server.connections, 1u) << "the chunked answer's end was found: the connection kept";
}

TEST(Forward, ACallPastItsTimeLimitFailsAsTheClientsDo) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) { return Reply::of(Reply::Act::hang); });
  auto cfg = config_for(server.listen_tcp());
  cfg.timeout_margin = 100ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  const auto t0 = Clock::now();
  // The command's own limit and the margin: 0.3 s.
  const json::value parsed = json::parse(R"({"command": "sleep 9", "timeout": 0.2})");
  auto call = [&]() -> asio::awaitable<void> {
    co_await rt.forward("POST", "/run_in_session", json::serialize(parsed), &parsed, "t");
  };
  try {
    test::run_async(io, call());
    FAIL() << "no timeout";
  } catch (const http::RequestTimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/run_in_session timed out after"));
  }
  const double took = seconds_since(t0);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 2.0);
  run_until(io, [&] { return server.closed_by_client == 1; });
  // The next call opens a new connection.
  ScriptedServer answering(io, [](const Seen&) { return Reply::json_body("{}"); });
  RemoteRuntime again(io.get_executor(), config_for(answering.listen_tcp()));
  EXPECT_EQ(test::run_async(io, forward_run(again, "{}", "x")).status, 200u);
}

asio::awaitable<void> two_forwards(RemoteRuntime& rt) {
  auto first = forward_run(rt, R"({"n": 1})", "one");
  auto second = forward_run(rt, R"({"n": 2})", "two");
  const auto [a, b] = co_await (std::move(first) && std::move(second));
  EXPECT_EQ(a.body, R"({"n": 1})");
  EXPECT_EQ(b.body, R"({"n": 2})");
}

TEST(Forward, ConcurrentCallsAreAllAnswered) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    Reply r = Reply::json_body(seen.body);
    r.delay = 30ms;
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  test::run_async(io, two_forwards(rt));
  test::run_async(io, two_forwards(rt));
  EXPECT_EQ(server.requests.size(), 4u);
}

TEST(Forward, OverAUnixSocket) {
  asio::io_context io;
  TempDir dir;
  ScriptedServer server(io, [](const Seen& seen) { return Reply::json_body(seen.body); });
  const std::string path = dir.path() + "/s.sock";
  server.listen_unix(path);
  RemoteRuntime rt(io.get_executor(), config_for(http::unix_socket_url(path)));
  EXPECT_EQ(test::run_async(io, forward_run(rt, R"({"a": 1})", "u1")).body, R"({"a": 1})");
  EXPECT_EQ(test::run_async(io, forward_run(rt, R"({"a": 2})", "u2")).body, R"({"a": 2})");
  EXPECT_EQ(server.connections, 1u);
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

TEST(HttpClient, ChunkedAnswerLargerThanTheLimitIsRefused) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.chunks = {std::string(60, 'x'), std::string(60, 'y')};
    return r;
  });
  http::ClientConfig cfg;
  cfg.max_body_in_memory = 100;
  http::Client client(io.get_executor(), server.listen_tcp(), cfg);
  try {
    test::run_async(io, client.request(http::ClientRequest{}));
    ADD_FAILURE() << "no exception";
  } catch (const SwerexException& e) {
    EXPECT_THAT(e.what(), HasSubstr("is larger than the 100 bytes allowed"));
  }
  EXPECT_EQ(client.idle_connections(), 0u) << "a half-read answer leaves its connection unusable";
}

TEST(HttpClient, ChunkedAnswerInPiecesIsKeptWholeAndItsConnectionReused) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.chunks = {"{\"a\": ", "1}"};
    r.chunk_delay = 20ms;
    return r;
  });
  http::Client client(io.get_executor(), server.listen_tcp());
  for (int i = 0; i < 2; ++i) {
    const auto response = test::run_async(io, client.request(http::ClientRequest{}));
    EXPECT_EQ(response.status, 200u);
    EXPECT_EQ(response.body, "{\"a\": 1}");
    EXPECT_EQ(response.header("content-type"), "application/json");
  }
  EXPECT_EQ(client.connections_opened(), 1u);
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

TEST_F(Tls, ChunkedRequestBodiesArriveWhole) {
  ScriptedServer server(io_, [](const Seen&) { return Reply::json_body("{}"); });
  const std::string file_body(100000, 't');
  const std::string file = dir_.file("body.bin", file_body);
  http::ClientConfig cfg;
  cfg.ca_file = ca_file_;
  cfg.chunked_request_bodies = true;
  http::Client client(io_.get_executor(), server.listen_tls(server_tls_, "127.0.0.1"), cfg);
  test::run_async(io_, three_bodies(client, file));
  expect_chunked_bodies(server.requests, file_body);
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

TEST_F(Tls, CaGivenAsTextAndAServerNameOtherThanTheHost) {
  // 127.0.0.2's certificate names localhost and 127.0.0.1: trusted when the client is told to
  // expect localhost there (a kubeconfig's tls-server-name), with the CA given as PEM text.
  ScriptedServer server(io_, alive);
  const std::string url = server.listen_tls(server_tls_, "127.0.0.2", "127.0.0.2");
  http::ClientConfig cfg;
  cfg.ca_pem = certificate_.certificate_pem;
  cfg.retry.max_retries = 0;
  cfg.tls_server_name = "localhost";
  http::Client client(io_.get_executor(), url, cfg);
  http::ClientRequest request;
  request.target = "/is_alive";
  EXPECT_EQ(test::run_async(io_, client.request(request)).status, 200u);
  cfg.tls_server_name = "elsewhere.example";
  http::Client wrong(io_.get_executor(), url, cfg);
  try {
    test::run_async(io_, wrong.request(request));
    ADD_FAILURE() << "a certificate without the expected name was accepted";
  } catch (const http::ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("certificate verify failed"));
  }
  cfg.ca_pem = "not a certificate";
  EXPECT_THROW(http::Client(io_.get_executor(), url, cfg), std::invalid_argument);
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

TEST_F(ClientCertificate, IsPresentedWhenGivenAsText) {
  ScriptedServer server(io_, alive);
  const std::string url = server.listen_tls(server_tls_, "127.0.0.1");
  auto cfg = client_config();
  cfg.cert_pem = client_.certificate_pem;
  cfg.key_pem = client_.key_pem;
  http::Client client(io_.get_executor(), url, cfg);
  http::ClientRequest request;
  request.target = "/is_alive";
  EXPECT_EQ(test::run_async(io_, client.request(request)).status, 200u);
  cfg.key_pem = certificate_.key_pem;  // another certificate's key
  EXPECT_THROW(http::Client(io_.get_executor(), url, cfg), std::invalid_argument);
  cfg.key_pem.clear();
  EXPECT_THROW(http::Client(io_.get_executor(), url, cfg), std::invalid_argument);
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

}  // namespace
}  // namespace rex
