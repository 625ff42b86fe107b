// The gateway's request path: a request as the service core hands it to the gateway's routes
// (method, target, headers, body), through authentication, routing with path parameters,
// body decoding and validation, idempotency and quotas, to an answer. The gateway is real (its
// SQLite store in a scratch folder, the local provider) but every create is refused by its
// quota after validation, so no sandbox process is ever started.
//
// Input: a method byte, then the target up to the first '\n', then header lines up to an empty
// line, then the body.
//
// Properties: no crash, hang or sanitizer report; every answer has a status the API documents;
// every JSON answer parses, and every error answer has the one error shape with a typed code.
#include <rex/gateway/gateway.hpp>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "gateway/gateway_impl.hpp"

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using rex::fuzz::check;
using rex::server::Answer;
using rex::server::Request;

constexpr std::array<bhttp::verb, 6> kMethods = {bhttp::verb::get,     bhttp::verb::post,
                                                 bhttp::verb::delete_, bhttp::verb::patch,
                                                 bhttp::verb::put,     bhttp::verb::head};

struct Fixture {
  asio::io_context io;
  std::shared_ptr<rex::gateway::Gateway::Impl> gateway;
  rex::server::RouteTable routes;

  Fixture() {
    spdlog::set_level(spdlog::level::off);
    rex::gateway::GatewayConfig config;
    config.storage = (rex::fuzz::scratch_dir() / "storage").string();
    config.tenants.push_back(rex::gateway::TenantConfig{"alpha", {"key-a"}, {}, 1e-9, {}});
    config.tenants.push_back(rex::gateway::TenantConfig{"beta", {"key-b"}, {}, 1e-9, {}});
    gateway = std::make_shared<rex::gateway::Gateway::Impl>(
        io.get_executor(), config, rex::gateway::Registry(), "/nonexistent/rex");
    gateway->reconciled = true;
    // Each tenant's minute already holds a create that never leaves it, so every create is
    // refused by the quota once validated (a quota alone lets a tenant's first create through).
    for (const char* tenant : {"alpha", "beta"}) {
      rex::gateway::CreateRequest ask{tenant, "", "", {}, 4e9};
      ask.quota.creates_per_minute = 1e9;
      gateway->sessions.admit(ask);
    }
    routes = gateway->routes();
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// How an error answer is shaped: the gateway's own {"error": {...}}; the E2B-compatible control
// API's (sandboxes, templates, snapshots) and its /files' {"code": status, "message"}; Connect's
// {"code": "not_found", "message"} for the in-sandbox RPCs.
enum class Shape { gateway, e2b, connect };

Shape shape_of(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  if (path.starts_with("/filesystem.") || path.starts_with("/process."))
    return Shape::connect;
  static constexpr std::string_view kE2b[] = {"/sandboxes",    "/v2/sandboxes", "/templates",
                                              "/v2/templates", "/v3/templates", "/template-uploads",
                                              "/snapshots"};
  for (const std::string_view prefix : kE2b) {
    if (path == prefix || (path.starts_with(prefix) && path[prefix.size()] == '/'))
      return Shape::e2b;
  }
  if (path == "/files" || path == "/health")
    return Shape::e2b;
  return Shape::gateway;
}

void check_answer(const Answer& a, Shape shape) {
  // 304 and 308: the web console's files (revalidated by ETag) and its addresses (/ and /ui).
  static constexpr std::array<unsigned, 20> kStatuses = {200, 201, 204, 304, 308, 400, 401,
                                                         403, 404, 405, 409, 410, 413, 422,
                                                         429, 500, 501, 502, 503, 504};
  bool known = false;
  for (const unsigned s : kStatuses)
    known = known || a.status == s;
  check(known, "an answer's status is one the API documents");
  check(shape == Shape::gateway || a.status != 422, "the E2B-compatible API answers 400, not 422");
  if (a.content_type != "application/json")
    return;
  boost::system::error_code ec;
  const json::value v = json::parse(a.body, ec);
  check(!ec, "a JSON answer parses");
  if (a.status < 400)
    return;
  check(v.is_object(), "an error answer is an object");
  if (shape != Shape::gateway) {
    const auto& o = v.get_object();
    check(o.size() == 2 && o.contains("message") && o.at("message").is_string(),
          "an E2B error has a code and a message");
    if (shape == Shape::e2b)
      check(o.contains("code") && o.at("code").is_int64() &&
                o.at("code").as_int64() == static_cast<std::int64_t>(a.status),
            "an E2B error's code is its status");
    else
      check(o.contains("code") && o.at("code").is_string() && !o.at("code").get_string().empty(),
            "a Connect error's code is a name");
    return;
  }
  check(v.get_object().contains("error"), "an error answer has \"error\"");
  const auto& e = v.get_object().at("error");
  check(e.is_object(), "\"error\" is an object");
  const auto& o = e.get_object();
  check(o.contains("code") && o.at("code").is_string() && !o.at("code").get_string().empty(),
        "an error has a code");
  check(o.contains("message") && o.at("message").is_string(), "an error has a message");
  check(o.contains("retryable") && o.at("retryable").is_bool(), "an error says if retryable");
}

asio::awaitable<void> serve(Fixture& f, bhttp::verb method, Request request) {
  const auto match = f.routes.find(method, request.header.target());
  if (match.route == nullptr)
    co_return;
  request.params = match.params;
  const Shape shape = shape_of(request.header.target());
  const auto& handler = match.route->handler;
  if (const auto* json_route = std::get_if<rex::server::JsonRoute>(&handler)) {
    const Answer a = co_await (*json_route)(std::move(request));
    check_answer(a, shape);
  } else if (const auto* file_route = std::get_if<rex::server::FileRoute>(&handler)) {
    auto a = co_await (*file_route)(std::move(request));
    if (const auto* answer = std::get_if<Answer>(&a))
      check_answer(*answer, shape);
  } else if (const auto* stream_route = std::get_if<rex::server::StreamRoute>(&handler)) {
    // The events stream and a proxied streamed run: only their refusals are answers here.
    auto started = (*stream_route)(std::move(request));
    if (const auto* answer = std::get_if<Answer>(&started))
      check_answer(*answer, shape);
    f.gateway->event_hub.clear();  // the stream never runs, so it never leaves
  } else if (const auto* upload_route = std::get_if<rex::server::UploadRoute>(&handler)) {
    auto started = (*upload_route)(request);
    if (const auto* answer = std::get_if<Answer>(&started))
      check_answer(*answer, shape);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2)
    return 0;
  Fixture& f = fixture();
  const bhttp::verb method = kMethods[data[0] % kMethods.size()];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto line_end = rest.find('\n');
  const std::string_view target = rest.substr(0, line_end);
  if (target.empty() || target.front() != '/')
    return 0;
  rest = line_end == std::string_view::npos ? std::string_view{} : rest.substr(line_end + 1);
  Request request;
  request.header.method(method);
  request.header.target(target);
  // Header lines up to an empty line.
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (line.empty())
      break;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ')
      value.remove_prefix(1);
    try {
      request.header.set(line.substr(0, colon), value);
    } catch (const std::exception&) {
      // A name or value Beast refuses never reaches a route either.
    }
  }
  request.body = std::string(rest);
  std::exception_ptr failure;
  asio::co_spawn(f.io, serve(f, method, std::move(request)),
                 [&failure](std::exception_ptr e) { failure = e; });
  f.io.restart();
  f.io.run();
  check(!failure, "a route never throws to the service");
  return 0;
}
