#include "gateway/session_table.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace rex::gateway {

Entry* SessionTable::find(std::string_view id) {
  const auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

const Entry* SessionTable::find(std::string_view id) const {
  const auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

Entry& SessionTable::at(std::string_view id) {
  if (Entry* e = find(id))
    return *e;
  throw std::out_of_range(fmt::format("no session {:?} in the gateway's table", id));
}

std::size_t SessionTable::active_of(std::string_view tenant) const {
  std::size_t n = 0;
  for (const auto& [id, e] : entries_)
    n += e.rec.tenant == tenant && e.rec.active() ? 1 : 0;
  return n;
}

std::optional<std::string> SessionTable::session_of_key(std::string_view tenant,
                                                        std::string_view key) const {
  const auto it = keys_.find(std::pair{std::string(tenant), std::string(key)});
  if (it == keys_.end())
    return std::nullopt;
  return it->second;
}

lifecycle::CreateDecision SessionTable::admit(const CreateRequest& ask) {
  lifecycle::CreateAsk in;
  in.tenant = ask.tenant;
  in.body_hash = ask.body_hash;
  in.max_sessions = ask.quota.max_sessions;
  in.creates_per_minute = ask.quota.creates_per_minute;
  in.now = ask.now;
  if (!ask.key.empty()) {
    if (const auto id = session_of_key(ask.tenant, ask.key))
      in.key_use = lifecycle::CreateAsk::KeyUse{*id, at(*id).body_hash};
  }
  if (in.max_sessions > 0 && !in.key_use)
    in.active = active_of(ask.tenant);
  auto window = recent_.find(ask.tenant);
  if (window == recent_.end())
    window = recent_.emplace(ask.tenant, std::deque<double>{}).first;
  return lifecycle::decide_create(in, window->second);
}

std::optional<ApiError> SessionTable::admit_many(const CreateRequest& ask, std::size_t count) {
  lifecycle::CreateAsk in;
  in.tenant = ask.tenant;
  in.body_hash = ask.body_hash;
  in.max_sessions = ask.quota.max_sessions;
  in.creates_per_minute = ask.quota.creates_per_minute;
  in.now = ask.now;
  auto window = recent_.find(ask.tenant);
  if (window == recent_.end())
    window = recent_.emplace(ask.tenant, std::deque<double>{}).first;
  // Each on a copy of the window first: all pass, or nothing is counted.
  std::deque<double> trial = window->second;
  const std::size_t active = in.max_sessions > 0 ? active_of(ask.tenant) : 0;
  for (std::size_t i = 0; i < count; ++i) {
    in.active = in.max_sessions > 0 ? active + i : 0;
    auto decision = lifecycle::decide_create(in, trial);
    if (decision.refusal)
      return std::move(decision.refusal);
  }
  window->second = std::move(trial);
  return std::nullopt;
}

Entry& SessionTable::open(const std::string& id, const CreateRequest& ask) {
  auto [it, fresh] = entries_.try_emplace(id, ex_);
  if (!fresh)
    throw std::logic_error(fmt::format("session id {} is taken", id));
  Entry& e = it->second;
  e.rec.id = id;
  e.rec.tenant = ask.tenant;
  e.rec.idempotency_key = ask.key;
  e.body_hash = ask.body_hash;
  if (!ask.key.empty())
    keys_[std::pair{ask.tenant, ask.key}] = id;
  return e;
}

void SessionTable::forget_key(std::string_view tenant, std::string_view key) {
  const auto it = keys_.find(std::pair{std::string(tenant), std::string(key)});
  if (it != keys_.end())
    keys_.erase(it);
}

Entry& SessionTable::restore(SessionRecord rec) {
  auto [it, fresh] = entries_.try_emplace(rec.id, ex_);
  Entry& e = it->second;
  e.rec = std::move(rec);
  e.persisted_activity = e.rec.last_active;
  if (e.rec.state != state::creating && e.rec.state != state::stopping)
    e.settled.set();
  return e;
}

bool SessionTable::restore_key(const IdempotencyKey& key) {
  Entry* e = find(key.session_id);
  if (e == nullptr)
    return false;
  e->body_hash = key.body_hash;
  keys_[std::pair{key.tenant, key.key}] = key.session_id;
  return true;
}

}  // namespace rex::gateway
