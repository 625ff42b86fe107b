// What every route of the gateway's own API goes through (gateway_routes.cpp, swerex_proxy.cpp):
// the caller's key, readiness, the route's counters in the metrics, and one error shape.
#pragma once

#include <rex/core/log.hpp>

#include <boost/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "gateway/gateway_impl.hpp"

namespace rex::gateway {

using Handler = std::function<asio::awaitable<server::Answer>(Caller, server::Request)>;
using FileHandler = std::function<asio::awaitable<std::variant<server::Answer, server::FileAnswer>>(
    Caller, server::Request)>;

// What every route does first: the caller's key, and no session call while reconciling.
inline Caller admit_caller(const Gateway::Impl& s, const server::Request& r,
                           const std::string& request_id, bool needs_ready = true) {
  Caller who = s.authenticate(r);
  who.request_id = request_id;
  if (needs_ready && !s.reconciled)
    throw ApiError(503, "gateway.reconciling",
                   "the gateway is reconciling its sessions; try again shortly", true, 1.0);
  return who;
}

struct Api {
  std::shared_ptr<Gateway::Impl> self;

  // A route as registered: made once, shared by its calls (nothing of it is copied per call).
  template <class H>
  struct Bound {
    std::string pattern;
    H handler;
    bool needs_ready = true;
    std::uint64_t* requests = nullptr;  // its counter in the metrics (a map's node stays put)
  };

  static asio::awaitable<server::Answer> call(std::shared_ptr<Gateway::Impl> self,
                                              std::shared_ptr<const Bound<Handler>> route,
                                              server::Request r) {
    ++*route->requests;
    std::string rid = request_id_of(r);
    std::optional<ApiError> failure;
    try {
      Caller who = admit_caller(*self, r, rid, route->needs_ready);
      server::Answer answer = co_await route->handler(std::move(who), std::move(r));
      answer.headers.emplace_back("X-Request-ID", std::move(rid));
      co_return answer;
    } catch (const std::exception& e) {
      failure = api_error_of(e);
    }
    self->metrics.count_error(failure->code());
    if (failure->status() >= 500)
      logging::warn("gateway: {} {}: {}", route->pattern, failure->code(), failure->what());
    co_return error_answer(*failure, rid);
  }

  static asio::awaitable<std::variant<server::Answer, server::FileAnswer>> call_file(
      std::shared_ptr<Gateway::Impl> self, std::shared_ptr<const Bound<FileHandler>> route,
      server::Request r) {
    ++*route->requests;
    std::string rid = request_id_of(r);
    std::optional<ApiError> failure;
    try {
      Caller who = admit_caller(*self, r, rid);
      co_return co_await route->handler(std::move(who), std::move(r));
    } catch (const std::exception& e) {
      failure = api_error_of(e);
    }
    self->metrics.count_error(failure->code());
    co_return error_answer(*failure, rid);
  }

  template <class H>
  std::shared_ptr<const Bound<H>> bind(std::string pattern, H h, bool needs_ready) const {
    std::uint64_t* requests = self->metrics.requests_of(pattern);
    return std::make_shared<const Bound<H>>(
        Bound<H>{std::move(pattern), std::move(h), needs_ready, requests});
  }

  server::JsonRoute json(std::string pattern, Handler h, bool needs_ready = true) const {
    return [s = self, route = bind(std::move(pattern), std::move(h), needs_ready)](
               server::Request r) { return call(s, route, std::move(r)); };
  }
  server::FileRoute file(std::string pattern, FileHandler h) const {
    return [s = self, route = bind(std::move(pattern), std::move(h), true)](server::Request r) {
      return call_file(s, route, std::move(r));
    };
  }
};

inline server::Answer json_ok(unsigned status, boost::json::value body) {
  return server::json_answer(status, body);
}

}  // namespace rex::gateway
