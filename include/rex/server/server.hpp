// Server: serves a Runtime over HTTP/1.1 with SWE-ReX's wire protocol (PROTOCOL.md), so
// SWE-ReX's own Python client and rex's RemoteRuntime both drive it. rex-server (alias
// swerex-remote) is this class over a LocalRuntime. It is the service core (Service) serving
// the SWE-ReX routes (src/server/swerex_routes.hpp) of one runtime.
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
// a tar, tar.gz or zip archive, of the runtime's file system, through Runtime::download) and
// POST /run_in_session_stream (the output as Server-Sent Events while the command runs, then
// the observation), and, with a Lifetime, GET and POST /lifetime (rex/server/lifetime.hpp).
//
// Threading: construct, run and stop from one thread that runs the executor's io_context;
// the runtime is only used from there.
#pragma once

#include <rex/runtime/runtime.hpp>
#include <rex/server/server_config.hpp>
#include <rex/server/service.hpp>

#include <boost/asio/any_io_executor.hpp>

namespace rex::server {

class Lifetime;

/// rex-server's service: Service's whole interface (listen, port, url, run, serve_connection,
/// stop, connection_count) over the SWE-ReX routes of `runtime`, which must outlive it, and the
/// /lifetime routes of `lifetime` when given (it must outlive the server too).
class Server : public Service {
 public:
  Server(asio::any_io_executor executor, Runtime& runtime, ServerConfig config,
         Lifetime* lifetime = nullptr);
};

}  // namespace rex::server
