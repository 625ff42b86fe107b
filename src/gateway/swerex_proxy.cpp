// The SWE-ReX protocol of a session's sandbox, proxied under /api/sessions/{id}/swerex: the JSON
// calls passed through as they came, the file calls, and the streamed ones (runs, processes,
// attached sessions), each with its line in the session's transcript.
#include <rex/core/log.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include "gateway/api_route.hpp"
#include "gateway/gateway_impl.hpp"
#include "gateway/transcript.hpp"
#include "server/swerex_routes.hpp"

namespace rex::gateway {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
using server::Answer;
using server::FileAnswer;
using server::Request;

namespace {

// --- the SWE-ReX protocol, proxied -------------------------------------------------------------

struct SwerexEndpoint {
  bhttp::verb method;
  std::string path;
};

const std::vector<SwerexEndpoint>& swerex_endpoints() {
  static const std::vector<SwerexEndpoint> endpoints = [] {
    std::vector<SwerexEndpoint> out;
    for (const char* p : {"/", "/is_alive", "/processes"})
      out.push_back({bhttp::verb::get, p});
    for (const char* p : {"/create_session",
                          "/run_in_session",
                          "/run_in_session_stream",
                          "/close_session",
                          "/execute",
                          "/read_file",
                          "/write_file",
                          "/upload",
                          "/download",
                          "/close",
                          "/processes/start",
                          "/processes/connect",
                          "/processes/input",
                          "/processes/signal",
                          "/processes/resize",
                          "/session_input",
                          "/sessions/attach",
                          "/sessions/resize",
                          "/sessions/capture",
                          "/sessions/restore"})
      out.push_back({bhttp::verb::post, p});
    return out;
  }();
  return endpoints;
}

// A proxied call's session (ready, its activity noted), its connection, and the route of the
// session's SWE-ReX routes (over its RemoteRuntime, made when first used) that serves it.
struct ProxyTarget {
  std::shared_ptr<Live> live;
  const server::Route* route;
  SessionRecord rec;
};

ProxyTarget proxy_target(Gateway::Impl& s, const Caller& who, const Request& r,
                         const SwerexEndpoint& endpoint) {
  Entry& e = s.ready_session(who, r.param("id"));
  s.touch(e, "swerex" + endpoint.path);
  auto live = s.live_of(e);
  if (!live->swerex) {
    server::ServerConfig sc;
    sc.upload_dir = (s.storage / "tmp").string();
    live->swerex.emplace(server::swerex_routes(s.ex, *live->runtime, sc, &s.file_threads));
  }
  const server::Route* route = live->swerex->find(endpoint.method, endpoint.path).route;
  return ProxyTarget{std::move(live), route, e.rec};
}

// A proxied JSON call's line in the session's transcript, written once the answer has gone.
void log_proxied(Gateway::Impl& s, const std::string& session_id, const Caller& who,
                 const SwerexEndpoint& endpoint, LoggedBody request_log, const Answer& answer) {
  s.after_answer([&s, session_id, who, call = "swerex" + endpoint.path,
                  request_log = std::move(request_log), status = answer.status,
                  response = LoggedBody(answer.body)] {
    // The line append_log would write for {call, request, status, response}, with the bodies
    // as they came when they are JSON.
    std::string line = R"({"call":)" + json::serialize(json::string_view(call));
    line.append(R"(,"request":)");
    request_log.append_to(line);
    fmt::format_to(std::back_inserter(line), R"(,"status":{},"response":)", status);
    response.append_to(line);
    s.append_log_members(session_id, who, std::move(line));
  });
}

// A call through the session's own SWE-ReX routes over its RemoteRuntime (decoded, called,
// encoded): what GET /is_alive needs (its short limit, and `is_alive: false` for a sandbox out
// of reach) and the listings.
asio::awaitable<Answer> proxy_typed(std::shared_ptr<Gateway::Impl> s, SwerexEndpoint endpoint,
                                    Caller who, Request r) {
  const ProxyTarget target = proxy_target(*s, who, r, endpoint);
  LoggedBody request_log(r.body);
  const auto& handler = std::get<server::JsonRoute>(target.route->handler);
  Answer answer = co_await handler(std::move(r));
  log_proxied(*s, target.rec.id, who, endpoint, std::move(request_log), answer);
  co_return answer;
}

// The JSON calls go to the sandbox's server as they came and come back as it answered (its
// 422 and 511 answers are the protocol's own): nothing is decoded into the protocol's types and
// encoded again. Only a sandbox that cannot be reached is answered here, as a 511 like the
// server's.
asio::awaitable<Answer> proxy_json(std::shared_ptr<Gateway::Impl> s, SwerexEndpoint endpoint,
                                   Caller who, Request r) {
  if (endpoint.method == bhttp::verb::get)  // is_alive's own limits and answers; the listings
    co_return co_await proxy_typed(std::move(s), std::move(endpoint), std::move(who), std::move(r));
  Entry& e = s->ready_session(who, r.param("id"));
  s->touch(e, "swerex" + endpoint.path);
  const std::shared_ptr<Live> live = s->live_of(e);
  const std::string session_id = e.rec.id;  // `e` may be gone after the call
  // The body goes in the transcript after the answer; its parse is not on the call's path.
  LoggedBody request_log(r.body);
  // The call's time limit comes from fields of the body (RemoteRuntime::forward): a body that
  // names none of them (no escape could spell one) needs no parse here.
  json::value fields;
  const std::string_view text = r.body;
  if (text.find("timeout") != std::string_view::npos ||
      text.find("action_type") != std::string_view::npos ||
      text.find('\\') != std::string_view::npos) {
    boost::system::error_code ec;
    fields = json::parse(text, ec);
  }
  Answer answer;
  std::exception_ptr failure;
  // Earlier calls' transcript lines are written while this call's sandbox works.
  s->run_after_answer_soon();
  try {
    // The caller's request id, within its tenant: a retry of it is answered from the sandbox's
    // replay store, and no other tenant's id can meet it there.
    http::ClientResponse got = co_await live->runtime->forward(
        "POST", endpoint.path, std::move(r.body), &fields, who.tenant + "/" + who.request_id);
    const unsigned status = got.status;
    if (status / 100 == 2 || status == 422 || status == 511) {
      answer.status = status;
      answer.content_type = std::string(got.header("Content-Type").value_or("application/json"));
      answer.body = std::move(got.body);
    } else {
      // Anything else (the sandbox's 401, 413, 503...) is the sandbox's failure, not the
      // caller's: a 511 as the typed path gave.
      throw SwerexException(fmt::format("the sandbox's server answered HTTP {}: {}", status,
                                        clip(got.body).substr(0, 500)));
    }
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  if (failure)
    answer = server::swerex_error_answer(failure);
  log_proxied(*s, session_id, who, endpoint, std::move(request_log), answer);
  co_return answer;
}

asio::awaitable<std::variant<Answer, FileAnswer>> proxy_file(std::shared_ptr<Gateway::Impl> s,
                                                             SwerexEndpoint endpoint, Caller who,
                                                             Request r) {
  const ProxyTarget target = proxy_target(*s, who, r, endpoint);
  json::value request_log = body_for_log(r.body);
  const auto& handler = std::get<server::FileRoute>(target.route->handler);
  auto answer = co_await handler(std::move(r));
  s->append_log(target.rec, who,
                json::object{{"call", "swerex" + endpoint.path},
                             {"request", std::move(request_log)},
                             {"status", std::holds_alternative<FileAnswer>(answer)
                                            ? 200u
                                            : std::get<Answer>(answer).status}});
  co_return answer;
}

// Keeps the session's connection alive while an upload's body arrives.
class HoldingReceiver final : public server::BodyReceiver {
 public:
  HoldingReceiver(std::shared_ptr<Live> live, std::unique_ptr<server::BodyReceiver> inner)
      : live_(std::move(live)), inner_(std::move(inner)) {}
  asio::awaitable<std::optional<Answer>> receive(std::string_view piece, bool last) override {
    return inner_->receive(piece, last);
  }
  asio::awaitable<Answer> finish() override { return inner_->finish(); }

 private:
  std::shared_ptr<Live> live_;
  std::unique_ptr<server::BodyReceiver> inner_;
};

server::UploadRoute proxy_upload(std::shared_ptr<Gateway::Impl> s, SwerexEndpoint endpoint) {
  return [s, endpoint](
             const Request& r) -> std::variant<Answer, std::unique_ptr<server::BodyReceiver>> {
    const std::string rid = request_id_of(r);
    try {
      const Caller who = admit_caller(*s, r, rid);
      ProxyTarget target = proxy_target(*s, who, r, endpoint);
      s->append_log(target.rec, who, json::object{{"call", "swerex" + endpoint.path}});
      auto started = std::get<server::UploadRoute>(target.route->handler)(r);
      if (auto* receiver = std::get_if<std::unique_ptr<server::BodyReceiver>>(&started))
        return std::make_unique<HoldingReceiver>(std::move(target.live), std::move(*receiver));
      return std::move(std::get<Answer>(started));
    } catch (const std::exception& e) {
      return error_answer(api_error_of(e), rid);
    }
  };
}

constexpr std::size_t kLoggedOutput = 16 * 1024;

// Runs a proxied stream's producer, then writes its last event (the observation, or the error)
// into the session's transcript, as the other proxied calls write their answer.
// `live` holds the session's connection until the stream ends.
asio::awaitable<void> produce_and_log(std::shared_ptr<Gateway::Impl> s, SessionRecord rec,
                                      Caller who, std::string call,
                                      [[maybe_unused]] std::shared_ptr<Live> live,
                                      server::EventProducer inner,
                                      std::shared_ptr<server::EventStream> out) {
  auto last = std::make_shared<std::pair<std::string, std::string>>();
  // A process's output (a terminal's too) goes into the transcript as it comes, in pieces of
  // up to kLoggedOutput bytes; a command's is in the observation at its end.
  struct Pending {
    std::string name;
    std::string bytes;
  };
  auto pending = std::make_shared<Pending>();
  auto flush = [s, rec, who, call, pending] {
    if (pending->bytes.empty())
      return;
    s->append_log(rec, who,
                  json::object{{"call", call},
                               {"streamed", true},
                               {"event", pending->name},
                               {"output", utf8_backslashreplace(pending->bytes)}});
    pending->bytes.clear();
  };
  out->observe([last, pending, flush](std::string_view name, std::string_view data) {
    if (name == "stdout" || name == "stderr") {
      boost::system::error_code ec;
      const json::value v = json::parse(data, ec);
      const json::object* o = ec ? nullptr : v.if_object();
      const json::value* field = o != nullptr ? o->if_contains("data") : nullptr;
      const json::string* b64 = field != nullptr ? field->if_string() : nullptr;
      if (b64 == nullptr)
        return;
      if (pending->name != name)
        flush();
      pending->name = std::string(name);
      pending->bytes += base64_decode(std::string_view(*b64)).bytes;
      if (pending->bytes.size() >= kLoggedOutput)
        flush();
      return;
    }
    if (name != "output" && name != "keepalive")
      *last = {std::string(name), std::string(data)};
  });
  co_await inner(out);
  flush();
  s->append_log(rec, who,
                json::object{{"call", std::move(call)},
                             {"streamed", true},
                             {"event", last->first},
                             {"response", body_for_log(last->second)}});
}

server::StreamRoute proxy_stream(std::shared_ptr<Gateway::Impl> s, SwerexEndpoint endpoint) {
  return [s, endpoint](Request r) -> std::variant<Answer, server::EventProducer> {
    const std::string rid = request_id_of(r);
    try {
      const Caller who = admit_caller(*s, r, rid);
      ProxyTarget target = proxy_target(*s, who, r, endpoint);
      s->append_log(target.rec, who,
                    json::object{{"call", "swerex" + endpoint.path},
                                 {"request", body_for_log(r.body)},
                                 {"streamed", true}});
      auto started = std::get<server::StreamRoute>(target.route->handler)(std::move(r));
      if (auto* producer = std::get_if<server::EventProducer>(&started))
        return server::EventProducer([s, rec = target.rec, who, call = "swerex" + endpoint.path,
                                      live = std::move(target.live), inner = std::move(*producer)](
                                         std::shared_ptr<server::EventStream> out) {
          return produce_and_log(s, rec, who, call, live, inner, std::move(out));
        });
      return std::move(std::get<Answer>(started));
    } catch (const std::exception& e) {
      return error_answer(api_error_of(e), rid);
    }
  };
}

}  // namespace

void add_swerex_proxy_routes(server::RouteTable& t, std::shared_ptr<Gateway::Impl> self) {
  const Api api{self};
  auto json_at = [&](bhttp::verb method, const std::string& pattern, Handler h) {
    t.add(method, pattern, api.json(pattern, std::move(h)));
  };
  auto file_at = [&](bhttp::verb method, const std::string& pattern, FileHandler h) {
    t.add(method, pattern, api.file(pattern, std::move(h)));
  };
  // The whole SWE-ReX protocol of a session's sandbox, under /api/sessions/{id}/swerex.
  for (const auto& endpoint : swerex_endpoints()) {
    const std::string pattern =
        "/api/sessions/{id}/swerex" + (endpoint.path == "/" ? std::string() : endpoint.path);
    if (endpoint.path == "/run_in_session_stream" || endpoint.path == "/processes/start" ||
        endpoint.path == "/processes/connect" || endpoint.path == "/sessions/attach") {
      t.add(endpoint.method, pattern, proxy_stream(self, endpoint));
    } else if (endpoint.path == "/upload") {
      t.add(endpoint.method, pattern, proxy_upload(self, endpoint));
    } else if (endpoint.path == "/download") {
      file_at(endpoint.method, pattern, [self, endpoint](Caller who, Request r) {
        return proxy_file(self, endpoint, std::move(who), std::move(r));
      });
    } else {
      json_at(endpoint.method, pattern, [self, endpoint](Caller who, Request r) {
        return proxy_json(self, endpoint, std::move(who), std::move(r));
      });
    }
  }
}

}  // namespace rex::gateway
