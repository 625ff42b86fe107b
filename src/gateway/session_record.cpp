#include "gateway/session_record.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <stdexcept>

namespace rex::gateway {

namespace json = boost::json;

double SessionRecord::idle_deadline() const {
  if (idle_timeout <= 0)
    return 0;
  return std::min(last_active + idle_timeout, deadline());
}

bool SessionRecord::active() const {
  return state::is_active(state);
}

json::object SessionRecord::to_json() const {
  json::array headers_json;
  for (const auto& [name, value] : headers)
    headers_json.push_back(json::array{json::string(name), json::string(value)});
  json::object env_json;
  for (const auto& [k, v] : env)
    env_json[k] = v;
  return json::object{{"id", id},
                      {"tenant", tenant},
                      {"provider", provider},
                      {"environment", environment},
                      {"state", state},
                      {"reason", reason},
                      {"error", error},
                      {"sandbox_id", sandbox_id},
                      {"url", url},
                      {"token", token},
                      {"working_dir", working_dir},
                      {"scratch_dir", scratch_dir},
                      {"headers", std::move(headers_json)},
                      {"metadata", metadata},
                      {"env", std::move(env_json)},
                      {"created_at", created_at},
                      {"ready_at", ready_at},
                      {"ended_at", ended_at},
                      {"last_active", last_active},
                      {"last_call", last_call},
                      {"idle_timeout", idle_timeout},
                      {"max_lifetime", max_lifetime},
                      {"idempotency_key", idempotency_key},
                      {"calls", calls},
                      {"origin", origin},
                      {"started_from", started_from},
                      {"paused", paused},
                      {"pause_checkpoint", pause_checkpoint}};
}

namespace {

// Whole seconds as integers (600, not 6E2), as people write them.
json::value seconds_value(double s) {
  if (s == static_cast<double>(static_cast<std::int64_t>(s)) && s < 9e15)
    return json::value(static_cast<std::int64_t>(s));
  return json::value(s);
}

}  // namespace

json::object SessionRecord::public_json() const {
  json::object o{{"session_id", id},
                 {"sandbox_id", sandbox_id},
                 {"provider", provider},
                 {"environment", environment},
                 {"state", state},
                 {"url", url},
                 {"working_dir", working_dir},
                 {"metadata", metadata},
                 {"created_at", iso_time(created_at)},
                 {"ready_at", iso_time(ready_at)},
                 {"last_active_at", iso_time(last_active)},
                 {"last_call", last_call.empty() ? json::value(nullptr) : json::value(last_call)},
                 {"timeout", seconds_value(idle_timeout)},
                 {"max_lifetime", seconds_value(max_lifetime)},
                 {"expires_at", iso_time(active() ? idle_deadline() : 0)},
                 {"deadline", iso_time(deadline())},
                 {"calls", calls}};
  // A paused session does not idle-expire: its expiry is its deadline.
  if (!paused.empty()) {
    o["paused"] = paused;
    o["expires_at"] = iso_time(active() ? deadline() : 0);
  }
  if (!pause_checkpoint.empty())
    o["pause_checkpoint"] = pause_checkpoint;
  if (!origin.empty())
    o["origin_checkpoint"] = origin;
  if (!reason.empty())
    o["reason"] = reason;
  if (!error.empty())
    o["error"] = error;
  if (ended_at > 0)
    o["ended_at"] = iso_time(ended_at);
  return o;
}

namespace {

const json::value& field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (v == nullptr)
    throw std::invalid_argument(fmt::format("session record: {} is missing", name));
  return *v;
}

std::string text(const json::object& o, std::string_view name) {
  const auto& v = field(o, name);
  if (!v.is_string())
    throw std::invalid_argument(fmt::format("session record: {} is not a string", name));
  return std::string(v.get_string());
}

double number(const json::object& o, std::string_view name) {
  const auto& v = field(o, name);
  if (!v.is_number())
    throw std::invalid_argument(fmt::format("session record: {} is not a number", name));
  return v.to_number<double>();
}

}  // namespace

SessionRecord SessionRecord::from_json(const json::object& o) {
  SessionRecord r;
  r.id = text(o, "id");
  r.tenant = text(o, "tenant");
  r.provider = text(o, "provider");
  r.environment = text(o, "environment");
  r.state = text(o, "state");
  r.reason = text(o, "reason");
  r.error = text(o, "error");
  r.sandbox_id = text(o, "sandbox_id");
  r.url = text(o, "url");
  r.token = text(o, "token");
  r.working_dir = text(o, "working_dir");
  if (const auto* v = o.if_contains("scratch_dir"); v != nullptr && v->is_string())
    r.scratch_dir = std::string(v->get_string());
  // [[name, value], ...]; records written before there were headers have none.
  if (const auto* v = o.if_contains("headers"); v != nullptr && v->is_array()) {
    for (const auto& pair : v->get_array()) {
      const auto* a = pair.if_array();
      if (a == nullptr || a->size() != 2 || !(*a)[0].is_string() || !(*a)[1].is_string())
        throw std::invalid_argument("session record: headers holds something else than pairs");
      r.headers.emplace_back(std::string((*a)[0].get_string()), std::string((*a)[1].get_string()));
    }
  }
  const auto& metadata = field(o, "metadata");
  if (!metadata.is_object())
    throw std::invalid_argument("session record: metadata is not an object");
  r.metadata = metadata.get_object();
  const auto& env = field(o, "env");
  if (!env.is_object())
    throw std::invalid_argument("session record: env is not an object");
  for (const auto& [k, v] : env.get_object()) {
    if (v.is_string())
      r.env[std::string(k)] = std::string(v.get_string());
  }
  r.created_at = number(o, "created_at");
  r.ready_at = number(o, "ready_at");
  r.ended_at = number(o, "ended_at");
  r.last_active = number(o, "last_active");
  r.idle_timeout = number(o, "idle_timeout");
  r.max_lifetime = number(o, "max_lifetime");
  r.idempotency_key = text(o, "idempotency_key");
  r.calls = static_cast<std::uint64_t>(number(o, "calls"));
  // Records written before checkpoints have none of these.
  auto optional_text = [&o](std::string_view name) {
    const auto* v = o.if_contains(name);
    return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  r.origin = optional_text("origin");
  r.started_from = optional_text("started_from");
  r.paused = optional_text("paused");
  r.pause_checkpoint = optional_text("pause_checkpoint");
  r.last_call = optional_text("last_call");
  return r;
}

std::string iso_time(double unix_seconds) {
  if (unix_seconds <= 0)
    return "";
  // Rounded to the millisecond, so a time read back from the database prints the same.
  const long long millis_total = std::llround(unix_seconds * 1000.0);
  const auto whole = static_cast<std::time_t>(millis_total / 1000);
  const int millis = static_cast<int>(millis_total % 1000);
  std::tm tm{};
  ::gmtime_r(&whole, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

double recorded_time(double unix_seconds) {
  return std::round(unix_seconds * 1000.0) / 1000.0;
}

double unix_now() {
  return recorded_time(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace rex::gateway
