// rex's HTTP server, raw bytes in: the input is what a client sends on one connection (one or
// more pipelined requests, then end of stream). Server::serve_connection serves one end of a
// socketpair over a fresh DummyRuntime, so the real path runs — Beast's parser, the limits,
// authentication, routing, JSON decoding, the runtime, multipart uploads to disk, the error
// answers — with no listener and no shell. Each input is served twice: without authentication
// and with a token (seeds carry `X-API-Key: fuzz-token`).
//
// Properties: no crash, hang or sanitizer report; everything the server writes parses as a
// sequence of complete HTTP/1.1 responses with the statuses PROTOCOL.md allows; every JSON
// answer is valid JSON of the documented shape; no upload leaves a file behind.
//
// /download goes through the DummyRuntime, which spills the files it holds into the server's
// scratch directory; an input that also stores files (/write_file, /upload) is left out, as
// the DummyRuntime joins their names to the target unchecked ("a//etc/x" lands in /etc).
#include <rex/runtime/dummy_runtime.hpp>
#include <rex/server/lifetime.hpp>
#include <rex/server/server.hpp>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using unix_socket = asio::local::stream_protocol;
using rex::fuzz::check;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// The client's side: sends the input, then end of stream.
asio::awaitable<void> send_all(unix_socket::socket& socket, std::string_view input) {
  auto [ec, n] = co_await asio::async_write(socket, asio::buffer(input), use_tuple);
  (void)n;
  (void)ec;  // the server may close first, having answered an error
  boost::system::error_code ignored;
  socket.shutdown(asio::socket_base::shutdown_send, ignored);
}

// ... and reads every answer until the server closes the connection.
asio::awaitable<void> receive_all(unix_socket::socket& socket, std::string& out) {
  std::array<char, 64 * 1024> buffer{};
  while (true) {
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buffer), use_tuple);
    out.append(buffer.data(), n);
    if (ec)
      co_return;
  }
}

asio::awaitable<void> serve(rex::server::Server& server, unix_socket::socket socket, bool& done) {
  co_await server.serve_connection(std::move(socket));
  done = true;
}

bool allowed_status(unsigned status) {
  switch (status) {
    case 100:  // Expect: 100-continue
    case 200:
    case 400:
    case 401:
    case 403:
    case 404:
    case 405:
    case 413:
    case 422:
    case 431:
    case 511:
      return true;
    default:
      return false;
  }
}

// The documented shapes of error bodies: {"detail": ...} or {"swerexception": {...}}.
void check_json_body(unsigned status, std::string_view body) {
  boost::system::error_code ec;
  const json::value value = json::parse(body, ec);
  check(!ec, "a JSON answer is valid JSON");
  check(value.is_object(), "a JSON answer is an object");
  const auto& obj = value.get_object();
  if (status == 511) {
    const auto* wire = obj.if_contains("swerexception");
    check(wire != nullptr && wire->is_object(), "a 511 answer carries a swerexception object");
    const auto& e = wire->get_object();
    check(e.contains("message") && e.at("message").is_string(), "swerexception.message");
    check(e.contains("class_path") && e.at("class_path").is_string(), "swerexception.class_path");
    check(e.contains("extra_info") && e.at("extra_info").is_object(), "swerexception.extra_info");
  } else if (status >= 400) {
    check(obj.contains("detail"), "an error answer carries a detail");
  }
}

constexpr std::uint32_t kMaxHeaderBytes = 2048;

// Which of the requests in `input`, in order, are HEAD requests (answered without a body), as
// far as they parse; the server answers them in that order and stops at the first it cannot
// parse.
std::vector<bool> head_requests(std::string_view input) {
  std::vector<bool> heads;
  while (!input.empty()) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.eager(true);
    parser.header_limit(kMaxHeaderBytes);  // as the server reads them
    // No body is longer than the input; a larger Content-Length must not make the parser reserve
    // it (the server refuses it with 413 and stops there, and so does this walk).
    parser.body_limit(input.size());
    boost::system::error_code ec;
    while (!parser.is_done() && !input.empty()) {
      const std::size_t used = parser.put(asio::buffer(input.data(), input.size()), ec);
      input.remove_prefix(used);
      if (ec || used == 0)
        break;
    }
    if (!parser.is_header_done())
      break;
    heads.push_back(parser.get().method() == bhttp::verb::head);
    if (!parser.is_done())
      break;
  }
  return heads;
}

// Parses the server's output as a sequence of complete responses to the requests of `input`.
void check_responses(std::string_view out, std::string_view input) {
  const std::vector<bool> heads = head_requests(input);
  std::size_t request = 0;
  while (!out.empty()) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.eager(true);
    // The answer to a HEAD request has the headers of a GET answer and no body.
    const bool head = request < heads.size() && heads[request];
    parser.skip(head);
    parser.body_limit(out.size());  // a Content-Length beyond what was written is an error
    boost::system::error_code ec;
    while (!parser.is_done() && !out.empty()) {
      const std::size_t used = parser.put(asio::buffer(out.data(), out.size()), ec);
      out.remove_prefix(used);
      if (ec == bhttp::error::need_more)
        break;  // what is left is not a whole header: put_eof says whether that is an error
      check(!ec, "the server's output parses as HTTP responses");
      if (used == 0)
        break;
    }
    if (!parser.is_done()) {
      parser.put_eof(ec);
      check(!ec && parser.is_done(), "every response is complete");
    }
    const auto& res = parser.get();
    const unsigned status = res.result_int();
    check(allowed_status(status), "the status is one the protocol uses");
    if (!head && res[bhttp::field::content_type] == "application/json")
      check_json_body(status, res.body());
    if (status != 100)  // an interim answer; the request's own answer follows
      ++request;
  }
}

void serve_once(std::string_view input, bool with_token) {
  asio::io_context io;
  rex::DummyRuntime runtime;
  rex::server::ServerConfig config;
  config.auth_token = with_token ? "fuzz-token" : "";
  // Small limits, so that inputs of a few kilobytes reach them.
  config.max_header_bytes = kMaxHeaderBytes;
  config.max_body_bytes = 16 * 1024;
  config.max_json_body_bytes = 8 * 1024;
  config.upload_dir = rex::fuzz::scratch_dir().string();
  config.file_threads = 1;
  // The client always ends its side, so the server never needs a timeout: a wait shows up as a
  // libFuzzer timeout instead of being cut short here.
  config.idle_timeout = std::chrono::hours(1);
  config.read_timeout = std::chrono::hours(1);
  config.trim_memory_after = std::chrono::milliseconds(0);  // io.run() returns at once
  // The deadline's routes too; its end (far off) would close the sessions.
  rex::server::Lifetime lifetime(io.get_executor(),
                                 [](std::string) -> asio::awaitable<void> { co_return; });
  rex::server::Server server(io.get_executor(), runtime, config, &lifetime);

  unix_socket::socket client(io);
  unix_socket::socket served(io);
  asio::local::connect_pair(client, served);

  bool done = false;
  std::string output;
  std::exception_ptr failure;
  auto note = [&failure](std::exception_ptr e) {
    if (e)
      failure = e;
  };
  asio::co_spawn(io, serve(server, std::move(served), done), [&](std::exception_ptr e) {
    lifetime.cancel();  // a deadline set by the input must not keep io.run() going
    note(e);
  });
  asio::co_spawn(io, send_all(client, input), note);
  asio::co_spawn(io, receive_all(client, output), note);
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exception: %s\n", e.what());
    }
  }
  check(failure == nullptr, "serving a connection throws nothing");
  check(done, "the connection was served to its end");
  check_responses(output, input);
  check(std::filesystem::is_empty(rex::fuzz::scratch_dir()), "no upload leaves a file behind");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.find("/download") != std::string_view::npos &&
      (input.find("/write_file") != std::string_view::npos ||
       input.find("/upload") != std::string_view::npos))
    return -1;  // not worth keeping in the corpus
  serve_once(input, false);
  serve_once(input, true);
  return 0;
}
