// ServerConfig: the settings of an HTTP service (Service, and Server, SWE-ReX's routes on it):
// where it listens, who may call it, and the limits that keep one client from holding it.
// A plain aggregate with defaults; rex-server's flags map onto it one to one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace rex::server {

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

}  // namespace rex::server
