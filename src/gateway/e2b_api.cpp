// The E2B-compatible control API on the gateway: E2B's SDKs, pointed at the gateway with
// E2B_API_URL, create, inspect, list, time out, connect to and kill sandboxes, which are the
// gateway's sessions. The SDK's key (X-API-KEY) is an API key of the gateway; its template is an
// environment ("base", E2B's default, is the gateway's default `local`); its timeout is the
// session's idle timeout, which setTimeout and connect set again and every call renews, never
// past the session's deadline. Errors are E2B's shape: {"code": status, "message"}.
#include <rex/core/random.hpp>
#include <rex/deployment/sizes.hpp>
#include <rex/protocol/python_text.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "gateway/api_error.hpp"
#include "gateway/gateway_impl.hpp"

namespace rex::gateway {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
using server::Answer;
using server::Request;

Caller admit_e2b_caller(Gateway::Impl& s, const Request& r) {
  Caller who = s.authenticate(r);
  if (!s.reconciled)
    throw ApiError(503, "gateway.reconciling",
                   "the gateway is reconciling its sessions; try again shortly", true, 1.0);
  who.request_id = request_id_of(r);
  return who;
}

// The message may quote what the request held (an id from the path): kept valid UTF-8.
Answer e2b_error(unsigned status, std::string_view message) {
  return server::json_answer(
      status, json::object{{"code", status}, {"message", utf8_backslashreplace(message)}});
}

namespace {

// The envd version the SDKs are told: the one whose features they may use (0.5 and later).
constexpr std::string_view kEnvdVersion = "0.5.2";  // 0.5.2: CloseStdin
constexpr std::string_view kDefaultTemplate = "base";
constexpr std::size_t kDefaultListLimit = 100;

Answer e2b_json(unsigned status, const json::value& body) {
  return server::json_answer(status, body);
}

Answer no_content() {
  Answer a;
  a.status = 204;
  return a;
}

long memory_mb_of_host() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:")
      return kib / 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

// A size as the registry writes it ("512m", "2g", bytes), in MiB; nullopt when unreadable.
std::optional<long> megabytes(const std::string& size) {
  try {
    return static_cast<long>(parse_size(size, "memory") / (1024 * 1024));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

struct E2bApi {
  std::shared_ptr<Gateway::Impl> s;

  // endAt: when the session ends if nothing renews it.
  static double end_at(const SessionRecord& rec) {
    const double idle = rec.idle_deadline();
    return idle > 0 ? std::min(idle, rec.deadline()) : rec.deadline();
  }

  // The sandbox as E2B's SDKs read it (create and connect answers; details and listings add
  // the rest).
  json::object sandbox(const SessionRecord& rec) const {
    return json::object{{"templateID", rec.environment},
                        {"sandboxID", rec.id},
                        {"clientID", s->gateway_id},
                        {"envdVersion", kEnvdVersion},
                        {"envdAccessToken", envd_access_token(rec)},
                        // The same token proves calls to the sandbox's ports (E2B's SDKs send
                        // it as E2B-Traffic-Access-Token where they send no envd token).
                        {"trafficAccessToken", envd_access_token(rec)},
                        {"alias", rec.environment},
                        {"domain", nullptr}};
  }

  json::object detail(const SessionRecord& rec) const {
    json::object o = sandbox(rec);
    const Environment* env = s->find_environment(rec.environment);
    long cpus = static_cast<long>(std::thread::hardware_concurrency());
    long memory = memory_mb_of_host();
    if (env != nullptr && env->cpus)
      cpus = std::max(1L, static_cast<long>(*env->cpus + 0.5));
    if (env != nullptr && env->memory)
      memory = megabytes(*env->memory).value_or(memory);
    struct statvfs fs {};
    long disk = 0;
    if (::statvfs(s->storage.c_str(), &fs) == 0)
      disk = static_cast<long>(fs.f_blocks * fs.f_frsize / (1024 * 1024));
    o.erase("domain");
    o["startedAt"] = iso_time(rec.created_at);
    o["endAt"] = iso_time(end_at(rec));
    o["cpuCount"] = cpus;
    o["memoryMB"] = memory;
    o["diskSizeMB"] = disk;
    o["state"] = rec.paused.empty() ? "running" : "paused";
    json::object metadata;
    for (const auto& [k, v] : rec.metadata)
      metadata[k] = v.is_string() ? v : json::value(json::serialize(v));
    o["metadata"] = std::move(metadata);
    return o;
  }

  // A live session of the caller's tenant, or nullptr (ended or another tenant's: not found).
  Entry* live(const Caller& who, std::string_view id) const {
    Entry* e = s->sessions.find(id);
    if (e == nullptr || e->rec.tenant != who.tenant || e->rec.state != state::ready)
      return nullptr;
    return e;
  }

  // A timeout in seconds from a body's `timeout`; nullopt when absent.
  static std::optional<double> timeout_of(const json::object& body) {
    const auto* t = body.if_contains("timeout");
    if (t == nullptr || t->is_null())
      return std::nullopt;
    if (!t->is_number())
      throw ApiError(400, "request.invalid", "timeout: expected a number of seconds");
    const double v = t->to_number<double>();
    if (!(v > 0) || v > 1e9)
      throw ApiError(400, "request.invalid", "timeout: expected a number of seconds above 0");
    return v;
  }

  // setTimeout and connect: the session expires `seconds` from now unless renewed.
  asio::awaitable<void> set_timeout(Entry& e, double seconds, const Caller& who,
                                    std::string_view why) {
    lifecycle::set_timeout(e.rec, unix_now(), seconds, why);
    json::object data{{"timeout", e.rec.idle_timeout},
                      {"expires_at", iso_time(e.rec.idle_deadline())},
                      {"via", why}};
    co_await s->record(e.rec, "keepalive", who, std::move(data));
  }

  asio::awaitable<Answer> create(Caller who, Request r) {
    json::object body = parse_body(r.body);
    std::string tmpl(kDefaultTemplate);
    if (const auto* t = body.if_contains("templateID"); t != nullptr && !t->is_null()) {
      if (!t->is_string() || t->get_string().empty())
        throw ApiError(400, "request.invalid", "templateID: expected a template name");
      tmpl = std::string(t->get_string());
    }
    json::object native;
    // A snapshot's id (a checkpoint of this gateway) starts a sandbox from it.
    if (const auto it = s->checkpoints.find(tmpl);
        it != s->checkpoints.end() && it->second.tenant == who.tenant)
      native["checkpoint"] = tmpl;
    else
      native["environment"] = tmpl == kDefaultTemplate ? "local" : tmpl;
    if (const auto* m = body.if_contains("metadata"); m != nullptr && !m->is_null())
      native["metadata"] = *m;
    if (const auto* e = body.if_contains("envVars"); e != nullptr && !e->is_null())
      native["env"] = *e;
    if (const auto t = timeout_of(body))
      native["timeout"] = *t;
    Request inner = std::move(r);
    inner.body = json::serialize(native);
    Answer made = co_await s->create(who, std::move(inner));
    const json::value rec = json::parse(made.body);
    const auto& id = rec.at("session_id").as_string();
    co_return e2b_json(201, sandbox(s->sessions.at(std::string(id)).rec));
  }

  asio::awaitable<Answer> get(Caller who, Request r) {
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    co_return e2b_json(200, detail(e->rec));
  }

  // GET /v2/sandboxes (paged by nextToken / X-Next-Token) and GET /sandboxes (all at once).
  asio::awaitable<Answer> list(Caller who, Request r, bool paged) {
    std::vector<std::pair<std::string, std::string>> filter;
    // The SDKs' metadata filter: a query value that is itself a query string, k1=v1&k2=v2.
    if (const auto m = r.query("metadata"))
      filter = server::parse_query(*m);
    bool want_running = true;
    bool want_paused = true;
    if (const auto st = r.query("state")) {
      want_running = false;
      want_paused = false;
      for (std::string_view rest = *st; !rest.empty();) {
        const auto comma = rest.find(',');
        want_running = want_running || rest.substr(0, comma) == "running";
        want_paused = want_paused || rest.substr(0, comma) == "paused";
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    }
    std::size_t limit = paged ? kDefaultListLimit : static_cast<std::size_t>(-1);
    if (const auto l = r.query("limit"); l && paged) {
      try {
        limit = std::clamp<std::size_t>(std::stoul(*l), 1, 1000);
      } catch (const std::exception&) {
        throw ApiError(400, "request.invalid", "limit: expected a number from 1 to 1000");
      }
    }
    const std::string after = paged ? r.query("nextToken").value_or("") : "";
    json::array out;
    std::string next;
    for (const auto& [id, e] : s->sessions) {
      if (e.rec.tenant != who.tenant || e.rec.state != state::ready ||
          (!after.empty() && id <= after))
        continue;
      if (!(e.rec.paused.empty() ? want_running : want_paused))
        continue;
      const json::object& metadata = e.rec.metadata;
      const bool matches = std::all_of(filter.begin(), filter.end(), [&metadata](const auto& kv) {
        const auto* v = metadata.if_contains(kv.first);
        return v != nullptr && v->is_string() && v->get_string() == kv.second;
      });
      if (!matches)
        continue;
      if (out.size() == limit) {
        next = out.back().as_object().at("sandboxID").as_string().c_str();
        break;
      }
      out.push_back(detail(e.rec));
    }
    Answer a = e2b_json(200, out);
    if (!next.empty())
      a.headers.emplace_back("X-Next-Token", next);
    co_return a;
  }

  asio::awaitable<Answer> timeout(Caller who, Request r) {
    const json::object body = parse_body(r.body);
    const auto t = timeout_of(body);
    if (!t)
      throw ApiError(400, "request.invalid", "timeout: required");
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    co_await set_timeout(*e, *t, who, "e2b.set_timeout");
    co_return no_content();
  }

  asio::awaitable<Answer> connect(Caller who, Request r) {
    const json::object body = r.body.empty() ? json::object{} : parse_body(r.body);
    const auto t = timeout_of(body);
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    // A paused sandbox is resumed (201), as E2B does.
    bool resumed = false;
    if (!e->rec.paused.empty()) {
      auto resuming = s->resume_session(*e, who);
      resumed = co_await std::move(resuming);
    }
    if (t)
      co_await set_timeout(*e, *t, who, "e2b.connect");
    co_return e2b_json(resumed ? 201 : 200, sandbox(e->rec));
  }

  // POST /sandboxes/{id}/resume (the older call): 201 with the sandbox; 409 when it runs.
  asio::awaitable<Answer> resume(Caller who, Request r) {
    const json::object body = r.body.empty() ? json::object{} : parse_body(r.body);
    const auto t = timeout_of(body);
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    if (e->rec.paused.empty())
      co_return e2b_error(409, fmt::format("sandbox {} is not paused", e->rec.id));
    auto resuming = s->resume_session(*e, who);
    (void)co_await std::move(resuming);
    if (t)
      co_await set_timeout(*e, *t, who, "e2b.resume");
    co_return e2b_json(201, sandbox(e->rec));
  }

  // POST /sandboxes/{id}/pause {"memory"}: 204; 409 when paused already.
  asio::awaitable<Answer> pause(Caller who, Request r) {
    const json::object body = r.body.empty() ? json::object{} : parse_body(r.body);
    bool memory = true;
    if (const auto* m = body.if_contains("memory"); m != nullptr && !m->is_null()) {
      if (!m->is_bool())
        throw ApiError(400, "request.invalid", "memory: expected true or false");
      memory = m->get_bool();
    }
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    auto pausing = s->pause_session(*e, memory, who);
    if (!(co_await std::move(pausing)))
      co_return e2b_error(409, fmt::format("sandbox {} is already paused", e->rec.id));
    co_return no_content();
  }

  // A snapshot as E2B's SDKs read it: its id starts sandboxes (Sandbox.create(snapshotID)).
  static json::object snapshot_info(const CheckpointRecord& c) {
    json::array names;
    const auto* name = c.metadata.if_contains("name");
    names.push_back(name != nullptr && name->is_string() ? *name : json::value(c.id));
    return json::object{{"snapshotID", c.id}, {"names", std::move(names)}};
  }

  // POST /sandboxes/{id}/snapshots {"name", "memory"}: a checkpoint of the sandbox (its file
  // system and its shells' state; a process's memory is not carried).
  asio::awaitable<Answer> create_snapshot(Caller who, Request r) {
    const json::object body = r.body.empty() ? json::object{} : parse_body(r.body);
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    json::object metadata;
    if (const auto* n = body.if_contains("name"); n != nullptr && n->is_string())
      metadata["name"] = *n;
    auto taking = s->take_checkpoint(*e, who, "checkpoint", std::move(metadata));
    const CheckpointRecord c = co_await std::move(taking);
    co_return e2b_json(201, snapshot_info(c));
  }

  // GET /snapshots?sandboxID&name&limit&nextToken.
  asio::awaitable<Answer> list_snapshots(Caller who, Request r) {
    const auto sandbox_id = r.query("sandboxID");
    const auto name = r.query("name");
    std::size_t limit = kDefaultListLimit;
    if (const auto l = r.query("limit")) {
      try {
        limit = std::clamp<std::size_t>(std::stoul(*l), 1, 1000);
      } catch (const std::exception&) {
        throw ApiError(400, "request.invalid", "limit: expected a number from 1 to 1000");
      }
    }
    const std::string after = r.query("nextToken").value_or("");
    json::array out;
    std::string next;
    for (const auto& [id, c] : s->checkpoints) {
      if (c.tenant != who.tenant || c.kind != "checkpoint" || c.state != checkpoint_state::ready ||
          (!after.empty() && id <= after))
        continue;
      if (sandbox_id && c.session != *sandbox_id)
        continue;
      const auto* n = c.metadata.if_contains("name");
      if (name && !(n != nullptr && n->is_string() && n->get_string() == *name))
        continue;
      if (out.size() == limit) {
        next = out.back().as_object().at("snapshotID").as_string().c_str();
        break;
      }
      out.push_back(snapshot_info(c));
    }
    Answer a = e2b_json(200, out);
    if (!next.empty())
      a.headers.emplace_back("X-Next-Token", next);
    co_return a;
  }

  // DELETE /templates/{id}: a template built here, or a snapshot, goes (the registry's
  // environments are not deleted here).
  asio::awaitable<Answer> delete_template(Caller who, Request r) {
    const std::string id(r.param("id"));
    auto deleting_template = s->delete_template(who, id);
    if (co_await std::move(deleting_template))
      co_return no_content();
    const auto it = s->checkpoints.find(id);
    if (it == s->checkpoints.end() || it->second.tenant != who.tenant)
      co_return e2b_error(404, fmt::format("template {} not found", id));
    auto deleting = s->delete_checkpoint(who, id);
    co_await std::move(deleting);
    co_return no_content();
  }

  // POST /sandboxes/{id}/fork {"timeout", "count"}: a checkpoint of the sandbox (running or
  // paused) and `count` sandboxes from it; one result per fork, a sandbox or an error.
  asio::awaitable<Answer> fork(Caller who, Request r) {
    const json::object body = r.body.empty() ? json::object{} : parse_body(r.body);
    std::int64_t count = 1;
    if (const auto* c = body.if_contains("count"); c != nullptr && !c->is_null()) {
      if (!(c->is_int64() || c->is_uint64()))
        throw ApiError(400, "request.invalid", "count: expected a whole number");
      count = c->to_number<std::int64_t>();
    }
    if (count < 1 || count > 100)
      throw ApiError(400, "request.invalid",
                     fmt::format("count: expected a whole number from 1 to 100, got {}", count));
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    auto taking = s->take_checkpoint(*e, who, "fork", json::object{});
    const CheckpointRecord c = co_await std::move(taking);  // pinned until the forks hold it
    json::object native{{"checkpoint", c.id}, {"count", count}};
    if (const auto t = timeout_of(body))
      native["timeout"] = *t;
    native["metadata"] = e->rec.metadata;
    Request inner = std::move(r);
    inner.body = json::serialize(native);
    json::array out;
    std::string failure;
    try {
      Answer made = co_await s->create(who, std::move(inner));
      const json::value answer = json::parse(made.body);
      for (const auto& rec : answer.at("sessions").as_array()) {
        const std::string id(rec.at("session_id").as_string());
        const SessionRecord& forked = s->sessions.at(id).rec;
        if (forked.state == state::ready)
          out.push_back(json::object{{"sandbox", sandbox(forked)}});
        else
          out.push_back(
              json::object{{"error", json::object{{"code", 500}, {"message", forked.error}}}});
      }
    } catch (const std::exception& x) {
      failure = x.what();
    }
    s->pinned_checkpoints.erase(c.id);
    if (!failure.empty()) {
      auto dropping = s->drop_unused_internal_checkpoints();
      co_await std::move(dropping);
      co_return e2b_error(502, failure);
    }
    co_return e2b_json(201, out);
  }

  // GET /sandboxes/{id}/metrics: one sample, now.
  asio::awaitable<Answer> metrics(Caller who, Request r) {
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    SandboxMetrics m;
    m.timestamp = unix_now();
    if (e->rec.paused != "disk") {
      Provider* p = s->provider(e->rec.provider);
      if (p == nullptr || !p->can(SandboxOperation::metrics))
        co_return e2b_json(200, json::array{});  // none to give, as E2B answers without any
      auto measuring = p->metrics(e->rec.sandbox_id);
      m = co_await std::move(measuring);
    }
    const auto at = static_cast<std::int64_t>(m.timestamp);
    co_return e2b_json(200,
                       json::array{json::object{{"timestamp", iso_time(static_cast<double>(at))},
                                                {"timestampUnix", at},
                                                {"cpuCount", m.cpu_count},
                                                {"cpuUsedPct", m.cpu_percent},
                                                {"memUsed", m.memory_used},
                                                {"memTotal", m.memory_limit},
                                                {"memCache", 0},
                                                {"diskUsed", m.disk_used},
                                                {"diskTotal", m.disk_total}}});
  }

  asio::awaitable<Answer> kill(Caller who, Request r) {
    Entry* e = live(who, r.param("id"));
    if (e == nullptr)
      co_return e2b_error(404, fmt::format("sandbox {} not found", r.param("id")));
    const std::string id = e->rec.id;
    co_await s->destroy(id, "deleted", who);
    if (s->sessions.at(id).rec.state == state::stopping)
      co_return e2b_error(502, fmt::format("sandbox {} could not be removed yet", id));
    co_return no_content();
  }
};

}  // namespace

void add_e2b_routes(server::RouteTable& t, std::shared_ptr<Gateway::Impl> s) {
  using bhttp::verb;
  // What E2B's control API has and the gateway lacks (or a path it does not know under E2B's
  // prefixes) answers in E2B's shape: its SDKs read `code` and `message` from every error.
  t.on_no_route(
      [](unsigned status, const bhttp::request_header<>& header) -> std::optional<Answer> {
        const std::string_view target(header.target().data(), header.target().size());
        const std::string_view path = target.substr(0, target.find('?'));
        static constexpr std::string_view kPrefixes[] = {
            "/sandboxes", "/v2/sandboxes", "/templates", "/v2/templates", "/v3/templates",
            "/snapshots", "/teams",        "/volumes",   "/secrets",      "/nodes"};
        const bool e2b = std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](auto p) {
          return path == p || (path.starts_with(p) && path[p.size()] == '/');
        });
        if (!e2b)
          return std::nullopt;
        constexpr std::string_view kAliases = "/templates/aliases/";
        if (status == 404 && path.starts_with(kAliases))
          return e2b_error(
              404, fmt::format("template alias '{}' not found", path.substr(kAliases.size())));
        if (status == 405)
          return e2b_error(405, fmt::format("{} {} is not allowed",
                                            std::string_view(header.method_string().data(),
                                                             header.method_string().size()),
                                            path));
        return e2b_error(404, fmt::format("{} is not found on this E2B-compatible endpoint", path));
      });
  auto add = [&](verb method, const std::string& pattern, auto fn) {
    t.add(method, pattern, e2b_route<E2bApi>(s, pattern, fn));
  };
  auto create = [](E2bApi& a, Caller w, Request r) { return a.create(std::move(w), std::move(r)); };
  add(verb::post, "/sandboxes", create);
  add(verb::post, "/v2/sandboxes", create);
  add(verb::get, "/sandboxes",
      [](E2bApi& a, Caller w, Request r) { return a.list(std::move(w), std::move(r), false); });
  add(verb::get, "/v2/sandboxes",
      [](E2bApi& a, Caller w, Request r) { return a.list(std::move(w), std::move(r), true); });
  add(verb::get, "/sandboxes/{id}",
      [](E2bApi& a, Caller w, Request r) { return a.get(std::move(w), std::move(r)); });
  add(verb::delete_, "/sandboxes/{id}",
      [](E2bApi& a, Caller w, Request r) { return a.kill(std::move(w), std::move(r)); });
  add(verb::post, "/sandboxes/{id}/timeout",
      [](E2bApi& a, Caller w, Request r) { return a.timeout(std::move(w), std::move(r)); });
  auto connect = [](E2bApi& a, Caller w, Request r) {
    return a.connect(std::move(w), std::move(r));
  };
  add(verb::post, "/sandboxes/{id}/connect", connect);
  add(verb::post, "/v2/sandboxes/{id}/connect", connect);
  add(verb::post, "/sandboxes/{id}/resume",
      [](E2bApi& a, Caller w, Request r) { return a.resume(std::move(w), std::move(r)); });
  add(verb::post, "/sandboxes/{id}/pause",
      [](E2bApi& a, Caller w, Request r) { return a.pause(std::move(w), std::move(r)); });
  add(verb::post, "/sandboxes/{id}/snapshots",
      [](E2bApi& a, Caller w, Request r) { return a.create_snapshot(std::move(w), std::move(r)); });
  add(verb::get, "/snapshots",
      [](E2bApi& a, Caller w, Request r) { return a.list_snapshots(std::move(w), std::move(r)); });
  add(verb::delete_, "/templates/{id}",
      [](E2bApi& a, Caller w, Request r) { return a.delete_template(std::move(w), std::move(r)); });
  add(verb::post, "/sandboxes/{id}/fork",
      [](E2bApi& a, Caller w, Request r) { return a.fork(std::move(w), std::move(r)); });
  add(verb::get, "/sandboxes/{id}/metrics",
      [](E2bApi& a, Caller w, Request r) { return a.metrics(std::move(w), std::move(r)); });
}

}  // namespace rex::gateway
