// The gateway's HTTP API (shared/GATEWAY.md, "The API"): the seed's paths, rex's additions and
// the proxied SWE-ReX protocol, each behind authentication, with one error shape.
#include <rex/core/bounded.hpp>
#include <rex/core/log.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/multipart.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/server/admission.hpp>
#include <rex/server/lifetime.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "core/clock.hpp"
#include "core/crash_point.hpp"
#include "gateway/api_route.hpp"
#include "gateway/gateway_impl.hpp"
#include "gateway/lifecycle.hpp"
#include "gateway/transcript.hpp"
#include "server/swerex_routes.hpp"

namespace rex::gateway {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
using server::Answer;
using server::FileAnswer;
using server::Request;
using namespace std::chrono_literals;

// A runtime's failure as the API's error.
ApiError api_error_of(const std::exception& e) {
  if (const auto* api = dynamic_cast<const ApiError*>(&e))
    return *api;
  if (dynamic_cast<const FileNotFoundError*>(&e) != nullptr)
    return ApiError(404, "files.not_found", e.what());
  if (dynamic_cast<const IsADirectoryError*>(&e) != nullptr ||
      dynamic_cast<const NotADirectoryError*>(&e) != nullptr)
    return ApiError(422, "files.wrong_type", e.what());
  if (dynamic_cast<const PermissionError*>(&e) != nullptr)
    return ApiError(403, "files.permission_denied", e.what());
  if (dynamic_cast<const http::ConnectionError*>(&e) != nullptr ||
      dynamic_cast<const http::RequestTimeoutError*>(&e) != nullptr)
    return ApiError(502, "sandbox.unreachable", e.what(), true, 1.0);
  if (dynamic_cast<const SwerexException*>(&e) != nullptr)
    return ApiError(502, "sandbox.error", e.what());
  if (dynamic_cast<const StoreError*>(&e) != nullptr)
    return ApiError(503, "gateway.storage", e.what(), true, 5.0);
  return ApiError(500, "gateway.internal", e.what());
}

std::string request_id_of(const Request& r) {
  if (const auto id = r.field("X-Request-ID"); id && !id->empty() && id->size() <= 200)
    return std::string(*id);
  return "req-" + unique_hex(8);
}

// --- authentication and lookup ---------------------------------------------------------------

Caller Gateway::Impl::authenticate(const Request& r, bool needs_key) const {
  Caller who;
  who.since = unix_now();
  bool any_key = false;
  for (const auto& t : cfg.tenants)
    any_key = any_key || !t.keys.empty();
  if (!any_key) {
    // No keys: loopback only (checked at start), one tenant.
    who.tenant = "default";
    who.actor = "default";
    return who;
  }
  std::optional<std::string_view> key;
  if (const auto auth = r.field("Authorization"); auth && auth->starts_with("Bearer "))
    key = auth->substr(7);
  else if (const auto api_key = r.field("X-API-Key"))
    key = *api_key;
  if (!key) {
    if (!needs_key)
      return who;
    throw ApiError(401, "auth.missing_key",
                   "an API key is required: Authorization: Bearer KEY or X-API-Key: KEY");
  }
  for (const auto& t : cfg.tenants) {
    for (const auto& k : t.keys) {
      if (server::same_token(*key, k)) {
        who.tenant = t.name;
        who.actor = fmt::format("{}/{}", t.name, k.substr(0, std::min<std::size_t>(4, k.size())));
        return who;
      }
    }
  }
  throw ApiError(401, "auth.invalid_key", "the API key is not valid");
}

Entry& Gateway::Impl::session_for(const Caller& who, std::string_view id) {
  Entry* e = sessions.find(id);
  if (e == nullptr || e->rec.tenant != who.tenant)
    throw ApiError(404, "session.not_found", fmt::format("no session {:?}", id));
  return *e;
}

Entry& Gateway::Impl::ready_session(const Caller& who, std::string_view id) {
  Entry& e = session_for(who, id);
  const auto& s = e.rec.state;
  if (s == state::creating)
    throw ApiError(409, "session.not_ready", fmt::format("session {} is still being created", id),
                   true, 1.0);
  if (s == state::stopping)
    throw ApiError(410, "session.stopping", fmt::format("session {} is being destroyed", id));
  if (s != state::ready)
    throw ApiError(410, "session.destroyed",
                   fmt::format("session {} is {}{}", id, s,
                               e.rec.reason.empty() ? "" : " (" + e.rec.reason + ")"));
  if (!e.rec.paused.empty())
    throw ApiError(409, "session.paused", fmt::format("session {} is paused: resume it first", id));
  if (e.operation == "rewind" || e.operation == "resume")
    throw ApiError(409, "session.busy",
                   fmt::format("session {} is busy: a {} is under way", id, e.operation), true,
                   1.0);
  return e;
}

std::string Gateway::Impl::resolve_path(const Entry& e, std::string_view path) const {
  if (path.empty())
    throw ApiError(422, "files.path_required", "a path is required");
  if (path.find('\0') != std::string_view::npos)
    throw ApiError(422, "files.invalid_path", "the path holds a NUL byte");
  fs::path p(path);
  const fs::path base(e.rec.working_dir);
  if (p.is_relative())
    p = base / p;
  p = p.lexically_normal();
  std::string text = p.string();
  if (text.size() > 1 && text.back() == '/')
    text.pop_back();
  const Provider* prov = const_cast<Impl*>(this)->provider(e.rec.provider);
  if (prov != nullptr && prov->confines_files()) {
    const std::string root = base.lexically_normal().string();
    const bool inside = text == root || (text.starts_with(root) && text[root.size()] == '/');
    if (!inside)
      throw ApiError(403, "files.outside_workdir",
                     fmt::format("{:?} is outside the session's working directory {}", path, root));
  }
  return text;
}

// --- file transfers shared by the gateway's file routes and the E2B-compatible ones ----------

asio::awaitable<FileAnswer> Gateway::Impl::read_bytes(Live& live, std::string path) {
  const fs::path scratch = storage / "tmp" / fmt::format("read-{}", random_hex(8));
  DownloadRequest download;
  download.path = std::move(path);
  download.target_path = scratch.string();
  co_await live.runtime->download(std::move(download));
  FileAnswer answer;
  boost::beast::error_code ec;
  answer.body.open(scratch.c_str(), boost::beast::file_mode::scan, ec);
  std::error_code ignored;
  fs::remove(scratch, ignored);  // the open file stays readable
  if (ec)
    throw ApiError(500, "gateway.internal", "cannot read the copied file: " + ec.message());
  answer.content_type = "application/octet-stream";
  co_return answer;
}

asio::awaitable<void> Gateway::Impl::write_bytes(Live& live, std::string path, std::string content,
                                                 bool binary) {
  if (!binary) {
    WriteFileRequest write;
    write.path = std::move(path);
    write.content = std::move(content);
    co_await live.runtime->write_file(std::move(write));
    co_return;
  }
  const fs::path scratch = storage / "tmp" / fmt::format("write-{}", random_hex(8));
  {
    std::ofstream out(scratch, std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out)
      throw ApiError(503, "gateway.storage", "cannot stage the upload");
  }
  std::exception_ptr failure;
  try {
    UploadRequest upload;
    upload.source_path = scratch.string();
    upload.target_path = std::move(path);
    co_await live.runtime->upload(std::move(upload));
  } catch (...) {
    failure = std::current_exception();
  }
  std::error_code ignored;
  fs::remove(scratch, ignored);
  if (failure)
    std::rethrow_exception(failure);
}

// --- create ----------------------------------------------------------------------------------

asio::awaitable<Answer> Gateway::Impl::create(Caller who, Request r) {
  json::object body = parse_body(r.body);
  only_fields(body, {"provider", "environment", "metadata", "env", "timeout", "max_lifetime",
                     "checkpoint", "count"});
  // A fork: sessions from a checkpoint, in its provider and environment.
  const CheckpointRecord* from = nullptr;
  std::size_t count = 1;
  if (const auto cid = string_field(body, "checkpoint")) {
    CheckpointRecord& c = checkpoint_for(who, *cid);
    if (c.state != checkpoint_state::ready)
      throw ApiError(409, "checkpoint.not_ready",
                     fmt::format("checkpoint {} is still being made", c.id), true, 1.0);
    from = &c;
    if (body.contains("provider") || body.contains("environment"))
      throw ApiError(422, "request.invalid",
                     "a create from a checkpoint takes the checkpoint's provider and environment");
  }
  if (const auto* n = body.if_contains("count")) {
    if (from == nullptr)
      throw ApiError(422, "request.invalid", "count: only a create from a checkpoint takes one");
    const std::int64_t asked = n->is_int64()    ? n->get_int64()
                               : n->is_uint64() ? static_cast<std::int64_t>(n->get_uint64())
                                                : -1;
    if (asked < 1 || asked > 100)
      throw ApiError(
          422, "request.invalid",
          fmt::format("count: expected a whole number from 1 to 100, got {}", json::serialize(*n)));
    count = static_cast<std::size_t>(asked);
  }
  auto provider_name =
      from != nullptr ? std::optional(from->provider) : string_field(body, "provider");
  auto env_name =
      from != nullptr ? std::optional(from->environment) : string_field(body, "environment");
  if (!env_name)
    env_name = provider_name && (*provider_name == "docker" || *provider_name == "podman")
                   ? "Python3"
                   : "local";
  // A template's environment only through the caller's own template (its name, id or
  // name:tag); a checkpoint's is its own, the tenant checked with it.
  const Environment* env = from != nullptr ? find_environment(*env_name) : registry.find(*env_name);
  if (env == nullptr && from == nullptr) {
    // A template the caller built on this gateway, by its name (or name:tag).
    if (const auto built = template_environment(who, *env_name)) {
      env_name = *built;
      env = find_environment(*built);
    }
  }
  if (env == nullptr) {
    std::vector<std::string> names;
    for (const auto* e : registry.environments())
      names.push_back(e->name);
    throw ApiError(
        422, "environment.unknown",
        fmt::format("unknown environment {:?}; known: {}", *env_name, fmt::join(names, ", ")));
  }
  if (!provider_name)
    provider_name = env->provider;
  Provider* prov = provider(*provider_name);
  if (prov == nullptr) {
    std::vector<std::string> names;
    for (const auto& [n, p] : providers)
      names.push_back(n);
    throw ApiError(422, "provider.unknown",
                   fmt::format("unknown or unconfigured provider {:?}; this gateway has: {}",
                               *provider_name, fmt::join(names, ", ")));
  }
  json::object metadata = object_field(body, "metadata").value_or(json::object{});
  std::map<std::string, std::string> env_vars;
  if (auto e = object_field(body, "env")) {
    for (const auto& [k, v] : *e) {
      if (!v.is_string())
        throw ApiError(422, "request.invalid",
                       fmt::format("env.{}: expected a string", std::string_view(k)));
      env_vars[std::string(k)] = std::string(v.get_string());
    }
  }
  const double idle = seconds_field(body, "timeout")
                          .value_or(env->idle_timeout > 0 ? env->idle_timeout : cfg.idle_timeout);
  double lifetime = seconds_field(body, "max_lifetime").value_or(env->max_lifetime);
  if (lifetime <= 0 || (cfg.max_lifetime > 0 && lifetime > cfg.max_lifetime))
    lifetime = cfg.max_lifetime > 0 ? cfg.max_lifetime : 86400;

  // Idempotency: the same key and body give the same session, the first request's.
  std::string key;
  if (const auto k = r.field("Idempotency-Key")) {
    key = std::string(*k);
    if (key.empty() || key.size() > 255)
      throw ApiError(422, "idempotency.invalid_key", "Idempotency-Key must be 1 to 255 bytes");
    if (count > 1)
      throw ApiError(422, "idempotency.invalid_key",
                     "a create of more than one session takes no Idempotency-Key");
  }
  const std::string body_hash = sha256_hex(json::serialize(body) + "\n" + *provider_name);
  // Admission (lifecycle::decide_create), decided and its quota claimed before anything is
  // awaited, so concurrent creates cannot pass a quota together.
  const double now = unix_now();
  const CreateRequest ask{who.tenant, key, body_hash, quota_of(who.tenant), now};
  std::vector<std::string> ids;
  if (count > 1) {
    if (auto refusal = sessions.admit_many(ask, count))
      throw std::move(*refusal);
  } else {
    auto decision = sessions.admit(ask);
    if (decision.refusal)
      throw std::move(*decision.refusal);
    if (decision.kind == lifecycle::CreateDecision::Kind::existing) {
      Entry& e = sessions.at(decision.session_id);
      while (e.rec.state == state::creating)
        co_await e.settled.wait();
      if (e.rec.state == state::failed)
        throw ApiError(502, "sandbox.create_failed", e.rec.error);
      co_return json_ok(201, e.rec.public_json());
    }
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::string id = "s" + random_hex(8);
    Entry& e = sessions.open(id, ask);
    SessionRecord& rec = e.rec;
    rec.provider = *provider_name;
    rec.environment = env->name;
    rec.metadata = metadata;
    rec.env = env_vars;
    rec.created_at = now;
    rec.last_active = now;
    rec.idle_timeout = idle;
    rec.max_lifetime = lifetime;
    if (from != nullptr) {
      rec.origin = from->id;
      rec.started_from = from->id;
    }
    ids.push_back(id);
  }
  std::optional<IdempotencyKey> key_row;
  if (!key.empty())
    key_row = IdempotencyKey{who.tenant, key, body_hash, ids.front()};
  const json::value logged = body_for_log(r.body);
  if (ids.size() == 1 && !body.contains("count")) {
    co_await launch(sessions.at(ids.front()), *prov, *env, std::move(key_row), who, from, logged);
    co_return json_ok(201, sessions.at(ids.front()).rec.public_json());
  }
  // Side by side; each ends ready or failed, and the answer lists them all.
  const CheckpointRecord copy = *from;  // the record may go while they start
  auto one = [this, prov, env, who, &copy, &logged](std::string id) -> asio::awaitable<void> {
    auto launching = launch(sessions.at(id), *prov, *env, std::nullopt, who, &copy, logged);
    auto launched = capture(std::move(launching));
    (void)co_await std::move(launched);
  };
  auto starting = for_each_bounded(ids, ids.size(), one);
  co_await std::move(starting);
  json::array out;
  bool any = false;
  for (const auto& id : ids) {
    const SessionRecord& rec = sessions.at(id).rec;
    any = any || rec.state == state::ready;
    out.push_back(rec.public_json());
  }
  if (!any)
    throw ApiError(502, "sandbox.create_failed",
                   fmt::format("none of the {} sessions from checkpoint {} started: {}", ids.size(),
                               copy.id, sessions.at(ids.front()).rec.error));
  co_return json_ok(201, json::object{{"sessions", std::move(out)}});
}

asio::awaitable<void> Gateway::Impl::launch(Entry& e, Provider& prov, const Environment& env,
                                            std::optional<IdempotencyKey> key_row, Caller who,
                                            const CheckpointRecord* from,
                                            json::value request_body) {
  SessionRecord& rec = e.rec;
  const std::string id = rec.id;
  // Intent first: the record exists before the sandbox does.
  std::string refused;
  try {
    std::vector<StoredEvent> created;
    json::object data;
    if (from != nullptr)
      data["checkpoint"] = from->id;
    created.push_back(event(from != nullptr ? "forked" : "created", rec, who, std::move(data)));
    co_await save(rec, std::move(created), key_row);
    rex::detail::crash_point("create.recorded");
  } catch (const std::exception& x) {
    refused = x.what();
  }
  if (!refused.empty()) {
    // Nothing was recorded: the session never existed. Its entry stays in memory, failed, for
    // repeats of the same key that are waiting for it; the key is free for a new attempt.
    if (key_row)
      sessions.forget_key(who.tenant, key_row->key);
    lifecycle::apply(rec, lifecycle::Move::create_failed, unix_now(), "error",
                     "cannot record the session: " + refused);
    e.settled.set();
    throw ApiError(503, "gateway.storage", rec.error, true, 5.0);
  }

  const auto started = std::chrono::steady_clock::now();
  std::string failure;
  try {
    SandboxAddress address;
    if (from != nullptr) {
      auto starting = start_from(e, *from);
      address = co_await std::move(starting);
    } else {
      SandboxSpec spec;
      spec.session_id = id;
      spec.environment = env;
      spec.env = env.env;  // the environment's, with the request's over it
      for (const auto& [k, v] : rec.env)
        spec.env[k] = v;
      // The sandbox's own deadline comes a little after the gateway's, which collects
      // artifacts. (At most as far as rex-server takes a deadline.)
      spec.max_lifetime =
          std::min(rec.max_lifetime + std::min(60.0, std::max(2.0, rec.max_lifetime / 10)),
                   server::Lifetime::kLongest);
      address = co_await prov.create(std::move(spec));
    }
    // A session whose start commands fail is one whose sandbox goes.
    const SandboxAddress made = address;
    std::string start_failure;
    try {
      rec.url = address.url;
      rec.token = address.token;
      rec.headers = address.headers;
      rec.working_dir = address.working_dir;
      rec.scratch_dir = address.scratch_dir;
      auto starting = start_commands(e, env);
      co_await std::move(starting);
    } catch (const std::exception& x) {
      start_failure = x.what();
    }
    if (!start_failure.empty()) {
      e.live.reset();
      try {
        auto removing = prov.destroy(made.sandbox_id);
        co_await std::move(removing);
      } catch (const std::exception& x) {
        logging::warn("gateway: cannot remove sandbox {} whose start failed: {}", made.sandbox_id,
                      x.what());
      }
      throw std::runtime_error(start_failure);
    }
    rec.sandbox_id = address.sandbox_id;
    rec.url = address.url;
    rec.token = address.token;
    rec.working_dir = address.working_dir;
    rec.scratch_dir = address.scratch_dir;
    rec.headers = address.headers;
    e.shell_started = address.shell_started;
  } catch (const std::exception& x) {
    failure = x.what();
  }
  const double took = rex::detail::seconds_since(started);
  if (failure.empty()) {
    rex::detail::crash_point("create.sandbox_up");
    rec.ready_at = unix_now();
    rec.last_active = rec.ready_at;
    lifecycle::apply(rec, lifecycle::Move::sandbox_up, rec.ready_at);
    json::object data{{"seconds", took}};
    co_await record(rec, "ready", who, std::move(data));
    rex::detail::crash_point("create.ready");
    metrics.count_create(took);
    e.settled.set();
    append_log(rec, who, json::object{{"call", "create"}, {"request", std::move(request_body)}});
    co_return;
  }
  lifecycle::apply(rec, lifecycle::Move::create_failed, unix_now(), "error", failure);
  co_await record(rec, "failed", who);
  e.settled.set();
  throw ApiError(502, "sandbox.create_failed", failure);
}

// --- the route table -------------------------------------------------------------------------

namespace {

asio::awaitable<Answer> get_session(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  co_return json_ok(200, s->session_for(who, r.param("id")).rec.public_json());
}

asio::awaitable<Answer> list_sessions(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  const auto state_filter = r.query("state");
  const auto provider_filter = r.query("provider");
  const auto label = r.query("label");  // key=value of metadata
  std::size_t limit = 100;
  if (const auto l = r.query("limit")) {
    try {
      limit = std::clamp<std::size_t>(std::stoul(*l), 1, 1000);
    } catch (const std::exception&) {
      throw ApiError(422, "request.invalid", "limit: expected a number from 1 to 1000");
    }
  }
  const std::string after = r.query("cursor").value_or("");
  json::array out;
  std::string next;
  for (const auto& [id, e] : s->sessions) {
    if (e.rec.tenant != who.tenant || (!after.empty() && id <= after))
      continue;
    if (state_filter && e.rec.state != *state_filter)
      continue;
    if (provider_filter && e.rec.provider != *provider_filter)
      continue;
    if (label) {
      const auto eq = label->find('=');
      const std::string k = label->substr(0, eq);
      const auto* v = e.rec.metadata.if_contains(k);
      if (v == nullptr)
        continue;
      if (eq != std::string::npos && !(v->is_string() && v->get_string() == label->substr(eq + 1)))
        continue;
    }
    if (out.size() == limit) {
      next = out.back().as_object().at("session_id").as_string().c_str();
      break;
    }
    out.push_back(e.rec.public_json());
  }
  json::object body{{"sessions", std::move(out)}};
  body["next_cursor"] = next.empty() ? json::value(nullptr) : json::value(next);
  co_return json_ok(200, body);
}

asio::awaitable<Answer> delete_session(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  Entry& e = s->session_for(who, r.param("id"));
  if (const auto sandbox = r.query("sandbox_id");
      sandbox && !sandbox->empty() && !e.rec.sandbox_id.empty() && *sandbox != e.rec.sandbox_id)
    throw ApiError(
        409, "session.sandbox_mismatch",
        fmt::format("session {} runs in sandbox {}, not {}", e.rec.id, e.rec.sandbox_id, *sandbox));
  const std::string id = e.rec.id;
  co_await s->destroy(id, "deleted", who);
  Entry& after = s->sessions.at(id);
  if (after.rec.state == state::stopping)
    throw ApiError(502, "sandbox.destroy_failed",
                   fmt::format("session {}'s sandbox could not be removed yet; the gateway tries "
                               "again",
                               id),
                   true, 10.0);
  co_return json_ok(200, after.rec.public_json());
}

asio::awaitable<Answer> patch_session(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  Entry& e = s->session_for(who, r.param("id"));
  json::object body = parse_body(r.body);
  only_fields(body, {"metadata"});
  const auto changes = object_field(body, "metadata");
  if (!changes)
    throw ApiError(422, "request.invalid", "metadata: expected an object");
  for (const auto& [k, v] : *changes) {
    if (v.is_null())
      e.rec.metadata.erase(k);
    else
      e.rec.metadata[k] = v;
  }
  json::object data{{"metadata", e.rec.metadata}};
  co_await s->record(e.rec, "metadata_changed", who, std::move(data));
  co_return json_ok(200, e.rec.public_json());
}

asio::awaitable<Answer> keepalive(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  Entry& e = s->ready_session(who, r.param("id"));
  json::object body = parse_body(r.body);
  only_fields(body, {"timeout"});
  lifecycle::renew(e.rec, unix_now(), seconds_field(body, "timeout"));
  json::object data{{"timeout", e.rec.idle_timeout},
                    {"expires_at", iso_time(e.rec.idle_deadline())}};
  co_await s->record(e.rec, "keepalive", who, std::move(data));
  co_return json_ok(200, e.rec.public_json());
}

asio::awaitable<Answer> execute(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  json::object body = parse_body(r.body);
  std::string id(r.param("id"));
  if (id.empty()) {
    only_fields(body, {"session_id", "code", "language", "timeout"});
    id = string_field(body, "session_id").value_or("");
    if (id.empty())
      throw ApiError(422, "request.invalid", "session_id: required");
  } else {
    only_fields(body, {"code", "language", "timeout"});
  }
  const auto code = string_field(body, "code");
  if (!code)
    throw ApiError(422, "request.invalid", "code: required");
  const std::string language = string_field(body, "language").value_or("python");
  const auto timeout = seconds_field(body, "timeout");
  Entry& e = s->ready_session(who, id);
  s->touch(e, "execute");
  auto live = s->live_of(e);
  const SessionRecord rec = e.rec;
  json::object result = co_await live->notebook->execute(*code, language, timeout);
  s->append_log(
      rec, who,
      json::object{
          {"call", "execute"}, {"language", language}, {"code", clip(*code)}, {"result", result}});
  co_return json_ok(200, result);
}

// The sandbox's answer to a listing probe: "dir" then one "type|size|mtime|path" per entry,
// "file", or "missing".
json::object parse_listing(std::string_view out, const std::string& path) {
  json::array entries;
  bool first = true;
  while (!out.empty()) {
    const auto nl = out.find('\n');
    const std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view{} : out.substr(nl + 1);
    if (first) {
      first = false;
      continue;
    }
    const auto a = line.find('|');
    const auto b = line.find('|', a + 1);
    const auto c = line.find('|', b + 1);
    if (a == std::string_view::npos || b == std::string_view::npos || c == std::string_view::npos)
      continue;
    const std::string_view kind = line.substr(0, a);
    std::string type = "other";
    if (kind == "directory")
      type = "dir";
    else if (kind.find("regular") != std::string_view::npos)
      type = "file";
    else if (kind == "symbolic link")
      type = "symlink";
    const std::string full(line.substr(c + 1));
    const auto slash = full.rfind('/');
    std::uint64_t size = 0;
    double mtime = 0;
    try {
      size = std::stoull(std::string(line.substr(a + 1, b - a - 1)));
      mtime = std::stod(std::string(line.substr(b + 1, c - b - 1)));
    } catch (const std::exception&) {
    }
    entries.push_back(
        json::object{{"name", slash == std::string::npos ? full : full.substr(slash + 1)},
                     {"path", full},
                     {"type", type},
                     {"size", size},
                     {"modified_at", iso_time(mtime)}});
  }
  return json::object{{"path", path}, {"type", "dir"}, {"entries", std::move(entries)}};
}

asio::awaitable<std::variant<Answer, FileAnswer>> get_files(std::shared_ptr<Gateway::Impl> s,
                                                            Caller who, Request r) {
  std::string id(r.param("id"));
  if (id.empty())
    id = std::string(r.param("session_id"));
  Entry& e = s->ready_session(who, id);
  const std::string path = s->resolve_path(e, r.query("path").value_or("."));
  s->touch(e, "files");
  auto live = s->live_of(e);
  const SessionRecord rec = e.rec;
  Command probe;
  probe.command = fmt::format(
      "p={}; if [ -d \"$p\" ]; then echo dir; for f in \"$p\"/* \"$p\"/.[!.]* \"$p\"/..?*; do "
      "[ -e \"$f\" ] || [ -L \"$f\" ] || continue; stat -c '%F|%s|%Y|%n' -- \"$f\"; done; "
      "elif [ -e \"$p\" ]; then echo file; else echo missing; fi",
      shell_quote(path));
  probe.shell = true;
  probe.timeout = 60;
  const CommandResponse seen = co_await live->runtime->execute(std::move(probe));
  s->append_log(rec, who, json::object{{"call", "files.read"}, {"path", path}});
  if (seen.stdout_.starts_with("missing"))
    throw ApiError(404, "files.not_found", fmt::format("no file or directory {:?}", path));
  if (seen.stdout_.starts_with("dir"))
    co_return json_ok(200, parse_listing(seen.stdout_, path));
  if (!seen.stdout_.starts_with("file"))
    throw ApiError(502, "sandbox.error",
                   fmt::format("cannot look at {:?}: {}{}", path, seen.stdout_, seen.stderr_));
  co_return co_await s->read_bytes(*live, path);
}

asio::awaitable<Answer> write_files(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  std::string id(r.param("id"));
  std::optional<std::string> path;
  std::string content;
  bool binary = false;
  const auto type = r.field("Content-Type").value_or("");
  const auto boundary = http::multipart_boundary(type);
  if (boundary && !r.body.starts_with("{")) {
    std::string current;
    std::map<std::string, std::string> fields;
    std::optional<std::string> file_data;
    http::MultipartParser::Handlers handlers;
    handlers.on_part_begin = [&](const http::MultipartPartHeaders& h) {
      current = h.name;
      if (h.filename && current == "file")
        file_data.emplace();
      else
        fields[current];
    };
    handlers.on_part_data = [&](std::string_view data) {
      if (current == "file" && file_data)
        file_data->append(data);
      else
        fields[current].append(data);
    };
    handlers.on_part_end = [] {};
    try {
      http::MultipartParser parser(*boundary, handlers);
      parser.feed(r.body);
      parser.finish();
    } catch (const http::MultipartError& x) {
      throw ApiError(400, "request.invalid_multipart", x.what());
    }
    if (id.empty())
      id = fields["session_id"];
    if (fields.contains("path"))
      path = fields["path"];
    if (file_data) {
      content = std::move(*file_data);
      binary = true;
    } else if (fields.contains("content")) {
      content = fields["content"];
    } else {
      throw ApiError(422, "request.invalid",
                     "a file part named \"file\" (or a content field) is required");
    }
  } else {
    json::object body = parse_body(r.body);
    if (id.empty()) {
      only_fields(body, {"session_id", "path", "content", "encoding"});
      id = string_field(body, "session_id").value_or("");
    } else {
      only_fields(body, {"path", "content", "encoding"});
    }
    path = string_field(body, "path");
    const auto text = string_field(body, "content");
    if (!text)
      throw ApiError(422, "request.invalid", "content: required");
    content = *text;
    const std::string encoding = string_field(body, "encoding").value_or("utf-8");
    if (encoding == "base64") {
      content = decode_base64(*text);
      binary = true;
    } else if (encoding != "utf-8" && encoding != "utf8") {
      throw ApiError(422, "request.invalid", "encoding: expected utf-8 or base64");
    }
  }
  if (id.empty())
    throw ApiError(422, "request.invalid", "session_id: required");
  Entry& e = s->ready_session(who, id);
  const std::string target = s->resolve_path(e, path.value_or(""));
  s->touch(e, "files");
  auto live = s->live_of(e);
  const SessionRecord rec = e.rec;
  const std::size_t size = content.size();
  co_await s->write_bytes(*live, target, std::move(content), binary);
  s->append_log(rec, who, json::object{{"call", "files.write"}, {"path", target}, {"size", size}});
  co_return json_ok(200, json::object{{"path", target}, {"size", size}});
}

asio::awaitable<std::variant<Answer, FileAnswer>> get_log(std::shared_ptr<Gateway::Impl> s,
                                                          Caller who, Request r) {
  const Entry& e = s->session_for(who, r.param("id"));
  s->run_after_answer();  // with every call answered before this one
  FileAnswer answer;
  answer.content_type = "application/x-ndjson";
  const auto path = s->log_path(e.rec.id);
  if (!fs::exists(path))
    co_return Answer{200, "application/x-ndjson", {}, "", false};
  boost::beast::error_code ec;
  answer.body.open(path.c_str(), boost::beast::file_mode::scan, ec);
  if (ec)
    throw ApiError(500, "gateway.internal", "cannot read the transcript: " + ec.message());
  co_return answer;
}

json::object artifact_json(const StoredArtifact& a) {
  return json::object{{"name", a.name},
                      {"path", a.path},
                      {"size", a.size},
                      {"sha256", a.sha256},
                      {"created_at", iso_time(a.created_at)}};
}

asio::awaitable<Answer> save_artifacts_route(std::shared_ptr<Gateway::Impl> s, Caller who,
                                             Request r) {
  json::object body = parse_body(r.body);
  only_fields(body, {"paths"});
  const auto* paths_v = body.if_contains("paths");
  if (paths_v == nullptr || !paths_v->is_array() || paths_v->get_array().empty())
    throw ApiError(422, "request.invalid", "paths: expected a non-empty array of paths");
  Entry& e = s->ready_session(who, r.param("id"));
  std::vector<std::string> paths;
  for (const auto& p : paths_v->get_array()) {
    if (!p.is_string())
      throw ApiError(422, "request.invalid", "paths: expected strings");
    paths.push_back(s->resolve_path(e, p.get_string()));
  }
  const Quota q = s->quota_of(who.tenant);
  if (q.max_storage_bytes > 0) {
    const std::string tenant = who.tenant;
    auto query = [tenant](Store& st) { return st.artifact_bytes(tenant); };
    const auto used = co_await s->on_db(std::move(query));
    if (used >= q.max_storage_bytes)
      throw ApiError(429, "quota.storage",
                     fmt::format("tenant {:?} stores {} bytes of artifacts, its limit", tenant,
                                 q.max_storage_bytes));
  }
  s->touch(e, "artifacts");
  const std::string id = e.rec.id;
  auto saved = co_await s->save_artifacts(e, paths, who);
  json::array out;
  for (const auto& a : saved)
    out.push_back(artifact_json(a));
  s->append_log(s->sessions.at(id).rec, who,
                json::object{{"call", "artifacts.save"}, {"artifacts", out}});
  co_return json_ok(201, json::object{{"artifacts", std::move(out)}});
}

asio::awaitable<Answer> list_artifacts(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  const std::string id = s->session_for(who, r.param("id")).rec.id;
  auto query = [id](Store& st) { return st.artifacts(id); };
  auto rows = co_await s->on_db(std::move(query));
  json::array out;
  for (const auto& a : rows)
    out.push_back(artifact_json(a));
  co_return json_ok(200, json::object{{"artifacts", std::move(out)}});
}

asio::awaitable<std::variant<Answer, FileAnswer>> get_artifact(std::shared_ptr<Gateway::Impl> s,
                                                               Caller who, Request r) {
  const std::string id = s->session_for(who, r.param("id")).rec.id;
  const std::string name(r.param("name"));
  auto query = [id, name](Store& st) { return st.artifact(id, name); };
  auto row = co_await s->on_db(std::move(query));
  if (!row)
    throw ApiError(404, "artifact.not_found",
                   fmt::format("session {} has no artifact {:?}", id, name));
  FileAnswer answer;
  boost::beast::error_code ec;
  answer.body.open(s->artifact_path(row->sha256).c_str(), boost::beast::file_mode::scan, ec);
  if (ec)
    throw ApiError(500, "gateway.storage", "the artifact's content is missing: " + ec.message());
  answer.content_type = "application/octet-stream";
  answer.headers.emplace_back("X-Rex-Sha256", row->sha256);
  answer.headers.emplace_back("Content-Disposition",
                              fmt::format("attachment; filename=\"{}\"", row->name));
  co_return answer;
}

asio::awaitable<Answer> environments(std::shared_ptr<Gateway::Impl> s, Caller, Request) {
  json::array out;
  for (const auto* e : s->registry.environments())
    out.push_back(e->to_json());
  co_return json_ok(200, json::object{{"environments", std::move(out)}});
}

asio::awaitable<Answer> registry_data(std::shared_ptr<Gateway::Impl> s, std::string kind, Caller,
                                      Request r) {
  const auto& data = s->registry.data(kind);
  const auto name = r.param("name");
  if (name.empty()) {
    json::object out;
    for (const auto& [k, v] : data)
      out[k] = v;
    co_return json_ok(200, json::object{{kind, std::move(out)}});
  }
  const auto it = data.find(std::string(name));
  if (it == data.end())
    throw ApiError(404, "registry.not_found", fmt::format("no {} named {:?}", kind, name));
  co_return json_ok(200, it->second);
}

Answer metrics_answer(const Gateway::Impl& s) {
  return Answer{200, "text/plain; version=0.0.4", {}, s.metrics.text(s.sessions), false};
}

// --- events ------------------------------------------------------------------------------------

// `session`: only that session's events (empty: all of the subscriber's).
asio::awaitable<void> stream_events(std::shared_ptr<Gateway::Impl> s,
                                    std::shared_ptr<Subscriber> sub, std::int64_t cursor,
                                    std::string session, std::shared_ptr<server::EventStream> out) {
  struct Leave {
    Gateway::Impl& s;
    std::shared_ptr<Subscriber> sub;
    ~Leave() { s.event_hub.leave(sub); }
  } leave{*s, sub};
  if (cursor < 0) {
    // No Last-Event-ID: what comes from now on.
    auto query = [](Store& st) { return st.last_event_id(); };
    cursor = co_await s->on_db(std::move(query));
  }
  // What was committed before (or while) subscribing, from the database...
  const auto only = session.empty() ? std::nullopt : std::optional<std::string>(session);
  while (!out->closed() && !s->stopping) {
    const auto tenant = sub->tenant;
    auto query = [cursor, tenant, only](Store& st) {
      return st.events_after(cursor, tenant, 500, only);
    };
    auto rows = co_await s->on_db(std::move(query));
    for (const auto& e : rows) {
      out->send(e.type, json::serialize(event_json(e)), std::to_string(e.id));
      cursor = e.id;
    }
    if (rows.size() < 500)
      break;
  }
  // ... then as it comes.
  while (!out->closed() && !s->stopping) {
    sub->wake.reset();
    while (!sub->queue.empty()) {
      const StoredEvent e = std::move(sub->queue.front());
      sub->queue.pop_front();
      if (e.id <= cursor)
        continue;
      if (session.empty() || e.session_id == session)
        out->send(e.type, json::serialize(event_json(e)), std::to_string(e.id));
      cursor = e.id;
    }
    const auto woken = co_await with_timeout(sub->wake.wait(), std::chrono::seconds(15));
    if (!woken)
      out->ping();
  }
}

}  // namespace

server::RouteTable Gateway::Impl::routes() {
  auto self = shared_from_this();
  const Api api{self};
  using bhttp::verb;
  server::RouteTable t;
  auto bind = [self](auto fn) {
    return [self, fn](Caller who, Request r) { return fn(self, std::move(who), std::move(r)); };
  };

  // Probes need no key.
  t.add(verb::get, "/healthz", server::JsonRoute([](Request) -> asio::awaitable<Answer> {
          co_return json_ok(200, json::object{{"status", "ok"}});
        }));
  t.add(
      verb::get, "/readyz", server::JsonRoute([self](Request) -> asio::awaitable<Answer> {
        if (!self->reconciled)
          co_return error_answer(ApiError(503, "gateway.reconciling",
                                          "reconciling sessions with the providers", true, 1.0),
                                 "");
        co_return json_ok(200, json::object{{"status", "ready"}, {"gateway_id", self->gateway_id}});
      }));
  t.add(verb::get, "/metrics", server::JsonRoute([self](Request) -> asio::awaitable<Answer> {
          co_return metrics_answer(*self);
        }));

  // The route's pattern names it in the metrics too.
  auto json_at = [&](verb method, const std::string& pattern, Handler h) {
    t.add(method, pattern, api.json(pattern, std::move(h)));
  };
  auto file_at = [&](verb method, const std::string& pattern, FileHandler h) {
    t.add(method, pattern, api.file(pattern, std::move(h)));
  };
  json_at(verb::post, "/api/sessions",
          [self](Caller who, Request r) { return self->create(std::move(who), std::move(r)); });
  json_at(verb::get, "/api/sessions", bind(list_sessions));
  add_checkpoint_routes(t, self);
  json_at(verb::get, "/api/sessions/{id}", bind(get_session));
  json_at(verb::delete_, "/api/sessions/{id}", bind(delete_session));
  json_at(verb::patch, "/api/sessions/{id}", bind(patch_session));
  json_at(verb::post, "/api/sessions/{id}/keepalive", bind(keepalive));
  json_at(verb::post, "/api/sessions/{id}/execute", bind(execute));
  json_at(verb::post, "/api/e2b/execute", bind(execute));
  file_at(verb::get, "/api/sessions/{id}/files", bind(get_files));
  file_at(verb::get, "/api/e2b/files/{session_id}", bind(get_files));
  json_at(verb::post, "/api/sessions/{id}/files", bind(write_files));
  json_at(verb::post, "/api/e2b/files", bind(write_files));
  file_at(verb::get, "/api/sessions/{id}/log", bind(get_log));
  json_at(verb::post, "/api/sessions/{id}/artifacts", bind(save_artifacts_route));
  json_at(verb::get, "/api/sessions/{id}/artifacts", bind(list_artifacts));
  file_at(verb::get, "/api/sessions/{id}/artifacts/{name}", bind(get_artifact));
  json_at(verb::get, "/api/environments", bind(environments));
  for (const std::string kind : {"agents", "tools", "prompts"}) {
    auto handler = [self, kind](Caller who, Request r) {
      return registry_data(self, kind, std::move(who), std::move(r));
    };
    json_at(verb::get, "/api/" + kind, handler);
    json_at(verb::get, "/api/" + kind + "/{name}", handler);
  }

  add_template_routes(t, self);
  add_e2b_routes(t, self);
  add_e2b_envd_routes(t, self);
  add_e2b_port_routing(t, self);  // before all of these: E2b-Sandbox-Port names another server

  t.add(verb::get, "/api/events",
        server::StreamRoute([self](Request r) -> std::variant<Answer, server::EventProducer> {
          const std::string rid = request_id_of(r);
          try {
            const Caller who = admit_caller(*self, r, rid, false);  // events flow while reconciling
            std::int64_t cursor = -1;
            auto from = r.field("Last-Event-ID");
            std::optional<std::string> after =
                from ? std::optional<std::string>(std::string(*from)) : r.query("after");
            if (after) {
              try {
                cursor = std::stoll(*after);
              } catch (const std::exception&) {
                throw ApiError(422, "request.invalid", "Last-Event-ID: expected an event id");
              }
            }
            bool any_key = false;
            for (const auto& t : self->cfg.tenants)
              any_key = any_key || !t.keys.empty();
            auto sub = self->event_hub.subscribe(
                self->ex, any_key ? std::optional<std::string>(who.tenant) : std::nullopt);
            std::string session = r.query("session_id").value_or("");
            return server::EventProducer(
                [self, sub, cursor, session](std::shared_ptr<server::EventStream> out) {
                  return stream_events(self, sub, cursor, session, std::move(out));
                });
          } catch (const std::exception& e) {
            return error_answer(api_error_of(e), rid);
          }
        }));

  add_swerex_proxy_routes(t, self);
  add_console_routes(t);
  return t;
}

}  // namespace rex::gateway
