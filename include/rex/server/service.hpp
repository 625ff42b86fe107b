// Service: an HTTP/1.1 service core that serves a RouteTable, knowing nothing of what the
// routes mean. It owns the connections: accepting (TCP or a unix socket), keep-alive, the idle
// and read timeouts, the connection limit (503), admission (rex/server/admission.hpp),
// X-Request-ID replay of JSON routes, writing answers (in memory, files, Server-Sent Events,
// relayed answers of another server) and draining on stop.
//
// Guarantees:
// - Nothing blocks the io_context: each connection and each request is a coroutine.
// - A repeated `X-Request-ID` on a JSON route replays the stored answer (status, headers, body)
//   without running again; a duplicate that arrives while the first is still running waits for
//   that answer. The store is bounded (least recently used entries go first).
// - Every limit answers with a JSON error and the service goes on: header size (431), body
//   size (413), concurrent connections (503), idle or slow connections (closed after a timeout).
// - A relay (RouteTable::intercept) watches its client from the request's end to the answer's:
//   when the client leaves (its side of the connection ends, so a client that half-closes after
//   its request counts as gone) or stop() is called, what the relay waits for is cancelled.
//
// Threading: construct, run and stop from one thread that runs the executor's io_context; the
// handlers are called from there.
#pragma once

#include <rex/server/route_table.hpp>
#include <rex/server/server_config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace rex::server {

class Service {
 public:
  Service(asio::any_io_executor executor, RouteTable routes, ServerConfig config);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  /// Binds and listens; throws std::system_error naming the address when that fails.
  void listen();
  /// The TCP port listened on (after listen(); useful with port 0), 0 for a unix socket.
  std::uint16_t port() const;
  /// "http://127.0.0.1:8000" or "http+unix://%2Fpath%2Fto.sock": a base URL for clients.
  std::string url() const;

  /// Accepts and serves connections until stop(); returns once every connection has ended.
  /// Calls listen() first when that has not happened yet.
  asio::awaitable<void> run();

  /// Serves one connection that is already open exactly as an accepted one, with the same
  /// limits and timeouts; returns when it has ended. Needs no listen().
  asio::awaitable<void> serve_connection(asio::local::stream_protocol::socket socket);

  /// Stops accepting, closes idle connections at once and the others after their current
  /// request's answer. Safe to call more than once.
  void stop();

  /// Open connections (for tests and monitoring).
  std::size_t connection_count() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace rex::server
