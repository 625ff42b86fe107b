// A small scripted HTTP server for the tests of the HTTP client and RemoteRuntime (a test fixture,
// not a stand-in for rex's server): each request gets the Reply its script returns (an answer, a
// dropped or hanging connection, a chunked stream), and the server records what it saw.
#pragma once

#include <rex/protocol/json.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <gtest/gtest.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <cctype>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/async_test.hpp"

namespace rex::test {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

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

// Runs the io_context until `done` holds (for the server's side of things), under a deadline.
inline void run_until(asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds deadline = std::chrono::milliseconds(3000)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  io.restart();
  while (!done() && std::chrono::steady_clock::now() < until)
    io.run_one_for(10ms);
  EXPECT_TRUE(done()) << "condition not reached within the deadline";
}

inline RemoteRuntimeConfig config_for(std::string url) {
  RemoteRuntimeConfig cfg;
  cfg.url = std::move(url);
  cfg.client.retry = http::RetryPolicy{
      .max_retries = 3,
      .backoff = {.initial_delay = 20ms, .max_delay = 1s, .multiplier = 2.0, .jitter = 0.0}};
  return cfg;
}

inline BashAction command(std::string text, std::optional<double> timeout = 5.0) {
  BashAction a;
  a.command = std::move(text);
  a.timeout = timeout;
  return a;
}

inline std::string observation_json(std::string output) {
  BashObservation o;
  o.output = std::move(output);
  o.exit_code = 0;
  return boost::json::serialize(to_json(o));
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace rex::test
