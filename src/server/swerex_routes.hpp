// The SWE-ReX routes (PROTOCOL.md) over a Runtime, as one RouteTable for the service core: what
// rex-server serves. Each route decodes its request, calls the runtime and encodes the answer
// as SWE-ReX's server does: 422 in FastAPI's shape for a body that does not validate, 511 with
// the exception for a failure.
//
// Guarantees:
// - Requests to one session run one after another, in arrival order; requests to different
//   sessions run at once. Interrupts and close_session never wait behind a running command.
// - Blocking file work (uploads to disk, download archives) runs on a thread pool of
//   config.file_threads threads, never on the io_context.
// - /download goes through Runtime::download: the runtime's file or tree is copied into the
//   upload directory, then sent (a directory as an archive); nothing of it is left behind.
//
// The routes share their state (session lanes, the thread pool); it lives as long as the table
// or a streamed run that outlasts its connection. Threading: the service's io_context.
#pragma once

#include <rex/runtime/runtime.hpp>
#include <rex/server/answer.hpp>
#include <rex/server/route_table.hpp>
#include <rex/server/server_config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/thread_pool.hpp>

namespace rex::server {

/// The answer for an exception a request raised, as SWE-ReX's server gives it: 422 in FastAPI's
/// shape for a body that does not fit its type (ProtocolError), 511 (the exception transferred)
/// for everything else.
Answer swerex_error_answer(std::exception_ptr error);

/// The routes of rex-server over `runtime`, which must outlive them. Blocking file work runs
/// on `file_threads` when given (shared by many tables, it must outlive them), else on a pool
/// of the table's own with config.file_threads threads.
RouteTable swerex_routes(asio::any_io_executor executor, Runtime& runtime,
                         const ServerConfig& config, asio::thread_pool* file_threads = nullptr);

}  // namespace rex::server
