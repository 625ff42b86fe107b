#include "gateway/lifecycle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace rex::gateway::lifecycle {

namespace {

std::string_view move_name(Move move) {
  switch (move) {
    case Move::sandbox_up:
      return "sandbox_up";
    case Move::create_failed:
      return "create_failed";
    case Move::interrupted:
      return "interrupted";
    case Move::stop:
      return "stop";
    case Move::removed:
      return "removed";
    case Move::vanished:
      return "vanished";
  }
  return "?";
}

}  // namespace

std::string_view next_state(std::string_view from, Move move) {
  if (from == state::creating) {
    if (move == Move::sandbox_up)
      return state::ready;
    if (move == Move::create_failed || move == Move::interrupted)
      return state::failed;
  } else if (from == state::ready) {
    if (move == Move::stop)
      return state::stopping;
    if (move == Move::vanished)
      return state::lost;
  } else if (from == state::stopping) {
    if (move == Move::removed)
      return state::destroyed;
  }
  throw std::logic_error(
      fmt::format("a session that is {:?} cannot move by {}", from, move_name(move)));
}

void apply(SessionRecord& rec, Move move, double now, std::string reason, std::string error) {
  rec.state = std::string(next_state(rec.state, move));
  if (!reason.empty())
    rec.reason = std::move(reason);
  if (!error.empty())
    rec.error = std::move(error);
  if (!state::is_active(rec.state))
    rec.ended_at = now;
}

std::optional<std::string_view> expiry(const SessionRecord& rec, double now) {
  if (rec.state != state::ready)
    return std::nullopt;
  if (now >= rec.deadline())
    return "ttl_max";
  if (!rec.paused.empty())
    return std::nullopt;  // a paused session is not idle: only its deadline ends it
  if (const double idle = rec.idle_deadline(); idle > 0 && now >= idle)
    return "ttl_idle";
  return std::nullopt;
}

bool note_activity(SessionRecord& rec, double now, std::string_view call, bool new_call,
                   double persisted) {
  rec.last_active = now;
  rec.last_call = call;
  if (new_call)
    ++rec.calls;
  const double slack = std::max(1.0, rec.idle_timeout / 10);
  return rec.last_active - persisted >= slack;
}

void renew(SessionRecord& rec, double now, std::optional<double> timeout) {
  if (timeout)
    rec.idle_timeout = *timeout;
  rec.last_active = now;
  rec.last_call = "keepalive";
}

void set_timeout(SessionRecord& rec, double now, double seconds, std::string_view call) {
  rec.last_active = now;
  rec.last_call = call;
  rec.idle_timeout = std::min(seconds, std::max(1.0, rec.deadline() - now));
}

CreateDecision decide_create(const CreateAsk& ask, std::deque<double>& recent) {
  CreateDecision d;
  if (ask.key_use) {
    if (!ask.key_use->body_hash.empty() && ask.key_use->body_hash != ask.body_hash) {
      d.kind = CreateDecision::Kind::refuse;
      d.refusal.emplace(422, "idempotency.mismatch",
                        "this Idempotency-Key was used with another request body");
      return d;
    }
    d.kind = CreateDecision::Kind::existing;
    d.session_id = ask.key_use->session_id;
    return d;
  }
  if (ask.max_sessions > 0 && ask.active >= ask.max_sessions) {
    d.kind = CreateDecision::Kind::refuse;
    d.refusal.emplace(
        429, "quota.max_sessions",
        fmt::format("tenant {:?} has {} active sessions, its limit", ask.tenant, ask.max_sessions),
        true, 5.0);
    return d;
  }
  if (ask.creates_per_minute > 0) {
    while (!recent.empty() && recent.front() <= ask.now - 60)
      recent.pop_front();
    if (static_cast<double>(recent.size()) >= ask.creates_per_minute) {
      d.kind = CreateDecision::Kind::refuse;
      d.refusal.emplace(429, "quota.creates_per_minute",
                        fmt::format("tenant {:?} may create {:g} sessions a minute", ask.tenant,
                                    ask.creates_per_minute),
                        true, std::max(1.0, recent.front() + 60 - ask.now));
      return d;
    }
    recent.push_back(ask.now);
  }
  return d;
}

std::vector<Step> plan(const Inputs& in) {
  std::vector<Step> steps;
  std::map<std::string, const SandboxListing*> by_session, by_sandbox;
  for (const auto& s : in.listing) {
    if (!s.session_id.empty())
      by_session[s.session_id] = &s;
    by_sandbox[s.sandbox_id] = &s;
  }
  const bool start = in.pass == Pass::start;
  // The state each session has once the steps above are carried out.
  std::map<std::string, std::string_view> after;
  std::set<std::string> removing;  // sandboxes this plan removes
  auto remove = [&](const std::string& sandbox_id, const std::string& session_id) {
    if (in.being_removed.contains(sandbox_id) || !removing.insert(sandbox_id).second)
      return;
    steps.push_back(Step{Step::Kind::remove, session_id, sandbox_id, {}});
  };
  std::vector<Step> removals;  // the sessions' own removals, after their record's step

  for (const auto& session : in.sessions) {
    after[session.id] = session.state;
    if (!state::is_active(session.state))
      continue;
    const SandboxListing* sandbox = nullptr;
    if (start) {
      // The one its record names, when it lists it; else any that names the session (a create
      // cut off before its record named one).
      if (const auto named = by_sandbox.find(session.sandbox_id);
          !session.sandbox_id.empty() && named != by_sandbox.end() &&
          named->second->session_id == session.id)
        sandbox = named->second;
      else if (const auto it = by_session.find(session.id); it != by_session.end())
        sandbox = it->second;
    } else if (const auto it = by_sandbox.find(session.sandbox_id);
               !session.sandbox_id.empty() && it != by_sandbox.end()) {
      sandbox = it->second;
    }
    if (session.state == state::creating) {
      if (!start)
        continue;  // in progress
      steps.push_back(Step{Step::Kind::interrupted,
                           session.id,
                           {},
                           "the gateway stopped while the sandbox was being created"});
      after[session.id] = state::failed;
      if (sandbox != nullptr)
        removals.push_back(Step{Step::Kind::remove, session.id, sandbox->sandbox_id, {}});
    } else if (session.state == state::ready) {
      if (session.ready_at >= in.listed_at || session.without_sandbox)
        continue;  // the listing may predate its sandbox's start; or it has none
      if (sandbox != nullptr && sandbox->running) {
        if (start)
          steps.push_back(Step{Step::Kind::adopt, session.id, sandbox->sandbox_id, {}});
        continue;
      }
      std::string error;
      if (start)
        error = sandbox == nullptr ? "the sandbox was gone when the gateway started"
                                   : "the sandbox's server had ended when the gateway started";
      else
        error = sandbox == nullptr ? "the sandbox is gone" : "the sandbox's server has ended";
      steps.push_back(Step{Step::Kind::lost, session.id, {}, std::move(error)});
      after[session.id] = state::lost;
      if (sandbox != nullptr)
        removals.push_back(Step{Step::Kind::remove, session.id, sandbox->sandbox_id, {}});
    } else if (session.state == state::stopping && !session.stopping_now) {
      steps.push_back(Step{Step::Kind::finish_stop, session.id, {}, {}});
    }
  }
  for (const auto& r : removals)
    remove(r.sandbox_id, r.session_id);
  std::map<std::string, const SessionView*> recorded;  // by session id
  for (const auto& session : in.sessions)
    recorded[session.id] = &session;
  for (const auto& s : in.listing) {
    const auto it = after.find(s.session_id);
    // A session owns the sandbox its record names, or any while it names none (a create);
    // another that names it is left over (a rewind's or resume's old sandbox, cut off), and so
    // is any of a session paused to its checkpoint.
    const auto named = recorded.find(s.session_id);
    const bool owned =
        it != after.end() && state::is_active(it->second) &&
        (named->second->replacing ||
         (!named->second->without_sandbox &&
          (named->second->sandbox_id.empty() || named->second->sandbox_id == s.sandbox_id)));
    if (s.spare && !owned) {
      remove(s.sandbox_id, {});  // an earlier run's spare: nobody's
      continue;
    }
    if (owned || in.now - s.created_at < in.orphan_grace)
      continue;  // a sandbox just started may not have its record yet
    remove(s.sandbox_id, {});
  }
  return steps;
}

}  // namespace rex::gateway::lifecycle
