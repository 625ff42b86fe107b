// Server: serves a Runtime over HTTP/1.1 with SWE-ReX's wire protocol (PROTOCOL.md), so
// SWE-ReX's own Python client and rex's RemoteRuntime both drive it. rex-server (alias
// swerex-remote) is this class over a LocalRuntime.
//
// Guarantees:
// - Nothing blocks the io_context: each connection and each request is a coroutine, blocking
//   file work (uploads, archives) runs on a small thread pool. `/is_alive` answers while other
//   sessions run long commands.
// - Requests to one session run one after another, in arrival order; requests to different
//   sessions run at once. Interrupts and close_session never wait behind a running command.
// - A repeated `X-Request-ID` replays the stored answer (status, headers, body) without running
//   again; a duplicate that arrives while the first is still running waits for that answer.
//   The store is bounded (least recently used entries go first).
// - Every limit answers with a JSON error and the server goes on: header size (431), body size
//   (413), concurrent connections (503), idle or slow connections (closed after a timeout).
//
// Additions to SWE-ReX's endpoints (never changes): POST /download (a file, or a directory as
// a tar, tar.gz or zip archive) and POST /run_in_session_stream (the output as Server-Sent
// Events while the command runs, then the observation).
//
// Threading: construct, run and stop from one thread that runs the executor's io_context;
// the runtime is only used from there.
#pragma once

#include <rex/runtime/runtime.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace rex::server {

namespace asio = boost::asio;

struct ServerConfig {
  std::string host = "0.0.0.0";
  std::uint16_t port = 8000;  // 0: the system picks one (see Server::port)
  /// When set, listen on this unix domain socket instead of TCP (host and port are unused).
  std::string unix_socket{};
  /// Empty: no authentication. Otherwise every route needs `X-API-Key: <token>`.
  std::string auth_token{};

  std::size_t max_header_bytes = 16 * 1024;                   // 431 past it
  std::uint64_t max_body_bytes = 16ull * 1024 * 1024 * 1024;  // uploads; 413 past it
  std::uint64_t max_json_body_bytes = 256ull * 1024 * 1024;   // JSON bodies (held in memory)
  std::size_t max_connections = 4096;                         // 503 past it
  /// A keep-alive connection with no request for this long is closed.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(120);
  /// A request's header, and each piece of its body, must arrive within this (slow clients).
  std::chrono::milliseconds read_timeout = std::chrono::seconds(60);
  std::size_t request_id_cache = 1024;  // answers kept for X-Request-ID replay
  /// Directory for uploads in transit (empty: the system's temporary directory).
  std::string upload_dir{};
  std::size_t file_threads = 2;  // threads for blocking file work
  // Freed memory cached by the allocator is handed back to the system once the server has been
  // this long without connections (the timer keeps the io_context busy meanwhile); 0: never.
  std::chrono::milliseconds trim_memory_after = std::chrono::seconds(1);
};

class Server {
 public:
  Server(asio::any_io_executor executor, Runtime& runtime, ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds and listens; throws std::system_error naming the address when that fails.
  void listen();
  /// The TCP port listened on (after listen(); useful with port 0), 0 for a unix socket.
  std::uint16_t port() const;
  /// "http://127.0.0.1:8000" or "http+unix://%2Fpath%2Fto.sock": a base URL for clients.
  std::string url() const;

  /// Accepts and serves connections until stop(); returns once every connection has ended.
  /// Calls listen() first when that has not happened yet.
  asio::awaitable<void> run();

  /// Serves one connection that is already open (one end of a socketpair, a socket handed over
  /// by a supervisor) exactly as an accepted one, with the same limits and timeouts; returns
  /// when it has ended. Needs no listen(). Lets tests and fuzzers drive the whole request path
  /// (parsing, authentication, routing, decoding, the runtime, the answer) without a listener.
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
