// Checkpoints of sessions' sandboxes in the gateway's own API: take one, list them (a tree: each
// names its parent), delete one, start sessions from one (POST /api/sessions with "checkpoint"
// and "count", in gateway_routes.cpp), rewind a session to one, pause and resume a session, and
// its metrics. Each is recorded before its effect (a checkpoint as "creating" before its image
// is made), so a gateway killed in the middle finds at its start what to finish or remove
// (reconcile_checkpoints).
#include <rex/core/log.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/protocol/json.hpp>
#include <rex/server/lifetime.hpp>
#include <rex/session/session_state.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <set>

#include "core/crash_point.hpp"
#include "gateway/api_route.hpp"
#include "gateway/gateway_impl.hpp"

namespace rex::gateway {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
using server::Answer;
using server::Request;

namespace {

constexpr const char* kCheckpointLabel = "rex.checkpoint";

json::array to_json_array(const std::vector<SessionState>& states) {
  json::array out;
  for (const auto& s : states)
    out.push_back(to_json(s));
  return out;
}

json::array to_json_array(const std::vector<SessionNotCarried>& skipped) {
  json::array out;
  for (const auto& s : skipped)
    out.push_back(to_json(s));
  return out;
}

std::vector<SessionState> states_of(const json::array& sessions) {
  std::vector<SessionState> out;
  for (const auto& s : sessions)
    out.push_back(from_json<SessionState>(s));
  return out;
}

void require_idle(Entry& e) {
  if (!e.operation.empty())
    throw ApiError(409, "session.busy",
                   fmt::format("session {} is busy: a {} is under way", e.rec.id, e.operation),
                   true, 1.0);
}

// Marks the session busy with `what` for as long as it lives.
struct Busy {
  Busy(Entry& entry, std::string what) : e(entry) {
    require_idle(e);
    e.operation = std::move(what);
  }
  ~Busy() { e.operation.clear(); }
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
  Entry& e;
};

// A ready session for an operation on its sandbox (paused or not).
Entry& operable_session(Gateway::Impl& s, const Caller& who, std::string_view id) {
  Entry& e = s.session_for(who, id);
  if (e.rec.state != state::ready)
    (void)s.ready_session(who, id);  // throws the state's own error
  return e;
}

}  // namespace

CheckpointRecord& Gateway::Impl::checkpoint_for(const Caller& who, std::string_view id) {
  const auto it = checkpoints.find(id);
  if (it == checkpoints.end() || it->second.tenant != who.tenant)
    throw ApiError(404, "checkpoint.not_found", fmt::format("no checkpoint {:?}", id));
  return it->second;
}

Provider& Gateway::Impl::capable_provider(const SessionRecord& rec, SandboxOperation operation,
                                          std::string_view what) {
  Provider* p = provider(rec.provider);
  if (p == nullptr || !p->can(operation))
    throw ApiError(422, "provider.unsupported",
                   fmt::format("the {} provider cannot {}", rec.provider, what));
  return *p;
}

asio::awaitable<void> Gateway::Impl::save_checkpoint(const CheckpointRecord& c,
                                                     std::vector<StoredEvent> events,
                                                     const SessionRecord* session, bool removed) {
  Change change;
  if (removed)
    change.removed_checkpoints.push_back(c.id);
  else
    change.checkpoints.push_back(StoredCheckpoint{c.id, c.tenant, c.state, c.to_json()});
  if (session != nullptr)
    change.session =
        StoredSession{session->id, session->tenant, session->state, session->to_json()};
  change.events = std::move(events);
  auto work = [change = std::move(change)](Store& st) mutable {
    st.commit(change);
    return std::move(change.events);
  };
  auto committed = co_await on_db(std::move(work));
  event_hub.publish(committed);
}

asio::awaitable<CheckpointRecord> Gateway::Impl::take_checkpoint(Entry& e, const Caller& who,
                                                                 std::string kind,
                                                                 json::object metadata) {
  Provider& prov = capable_provider(e.rec, SandboxOperation::checkpoint, "checkpoint a sandbox");
  if (e.rec.paused == "disk")
    throw ApiError(409, "session.paused",
                   fmt::format("session {} is paused to its checkpoint {}: resume it, or start "
                               "sessions from that checkpoint",
                               e.rec.id, e.rec.pause_checkpoint));
  CheckpointRecord c;
  c.id = "ckpt-" + random_hex(8);
  c.tenant = e.rec.tenant;
  c.provider = e.rec.provider;
  c.environment = e.rec.environment;
  c.session = e.rec.id;
  c.parent = e.rec.origin;
  c.base = e.rec.started_from;
  c.kind = std::move(kind);
  c.working_dir = e.rec.working_dir;
  c.metadata = std::move(metadata);
  c.created_at = unix_now();
  checkpoints[c.id] = c;
  // An internal one (a pause's, a fork's) is its caller's until the caller unpins it: nothing
  // uses it yet.
  if (c.kind != "checkpoint")
    pinned_checkpoints.insert(c.id);
  // The intent: a checkpoint cut off from here on is found and removed at the next start.
  co_await save_checkpoint(c, {});
  rex::detail::crash_point("checkpoint.recorded");
  std::string failure;
  try {
    // A frozen sandbox's shells run no capture: it is thawed for it and frozen again.
    const bool frozen = e.rec.paused == "memory";
    if (frozen) {
      auto thawing = prov.resume(e.rec.sandbox_id);
      co_await std::move(thawing);
    }
    std::string capture_failure;
    try {
      auto live = live_of(e);
      auto capturing = live->runtime->capture_sessions(CaptureSessionsRequest{});
      const CaptureSessionsResponse captured = co_await std::move(capturing);
      c.sessions = to_json_array(captured.sessions);
      c.not_carried = to_json_array(captured.not_carried);
    } catch (const std::exception& x) {
      capture_failure = x.what();
    }
    if (frozen) {
      auto freezing = prov.pause(e.rec.sandbox_id);
      co_await std::move(freezing);
    }
    if (!capture_failure.empty())
      throw std::runtime_error(capture_failure);
    std::map<std::string, std::string> labels{{kCheckpointLabel, c.id},
                                              {"rex.checkpoint.sandbox", e.rec.id},
                                              {"rex.checkpoint.parent", c.parent}};
    auto saving = prov.checkpoint(e.rec.sandbox_id, std::move(labels));
    c.image = co_await std::move(saving);
  } catch (const std::exception& x) {
    failure = x.what();
  }
  if (!failure.empty()) {
    // Nothing is offered: the record goes (its image, if one was made after all, is found by its
    // label at the next start).
    checkpoints.erase(c.id);
    pinned_checkpoints.erase(c.id);
    auto forgetting = capture(save_checkpoint(c, {}, nullptr, true));
    (void)co_await std::move(forgetting);
    throw ApiError(502, "checkpoint.failed",
                   fmt::format("cannot checkpoint session {}: {}", e.rec.id, failure));
  }
  rex::detail::crash_point("checkpoint.saved");
  c.state = std::string(checkpoint_state::ready);
  e.rec.origin = c.id;
  checkpoints[c.id] = c;
  std::vector<StoredEvent> events;
  events.push_back(event("checkpoint.created", e.rec, who,
                         json::object{{"checkpoint", c.id}, {"kind", c.kind}}));
  co_await save_checkpoint(c, std::move(events), &e.rec);
  append_log(e.rec, who, json::object{{"call", "checkpoint"}, {"checkpoint", c.public_json()}});
  co_return c;
}

asio::awaitable<void> Gateway::Impl::restore_sessions_at(const SessionRecord& rec,
                                                         const SandboxAddress& address,
                                                         const CheckpointRecord& c) {
  if (c.sessions.empty())
    co_return;
  RemoteRuntimeConfig rc;
  rc.url = address.url;
  rc.auth_token = address.token;
  rc.client.headers = address.headers;
  if (const Provider* p = provider(rec.provider))
    p->configure_client(address.url, rc.client);
  RemoteRuntime runtime(ex, rc);
  RestoreSessionsRequest request{.sessions = states_of(c.sessions)};
  // A sandbox that works elsewhere than the checkpoint's did (local ones, each in a directory
  // of its own): the sessions' paths under the old working directory move to the new one.
  if (!c.working_dir.empty() && address.working_dir != c.working_dir) {
    for (auto& state : request.sessions) {
      state.state = moved_paths(state.state, c.working_dir, address.working_dir);
      state.cwd = moved_paths(state.cwd, c.working_dir, address.working_dir);
    }
  }
  auto restoring = runtime.restore_sessions(std::move(request));
  (void)co_await std::move(restoring);
  runtime.close_idle_connections();
}

asio::awaitable<SandboxAddress> Gateway::Impl::start_from(Entry& e, const CheckpointRecord& c) {
  Provider& prov = capable_provider(e.rec, SandboxOperation::checkpoint, "start from a checkpoint");
  const Environment* env = find_environment(c.environment);
  if (env == nullptr)
    throw ApiError(422, "environment.unknown",
                   fmt::format("checkpoint {}'s environment {:?} is no longer configured", c.id,
                               c.environment));
  SandboxSpec spec;
  spec.session_id = e.rec.id;
  spec.environment = *env;
  spec.env = env->env;
  for (const auto& [k, v] : e.rec.env)
    spec.env[k] = v;
  // What is left of the session's lifetime, and the margin its create gives.
  const double left = std::max(1.0, e.rec.deadline() - unix_now());
  spec.max_lifetime = std::min(left + std::min(60.0, std::max(2.0, e.rec.max_lifetime / 10)),
                               server::Lifetime::kLongest);
  spec.image = c.image;
  std::string failure;
  SandboxAddress address;
  try {
    auto creating = prov.create(std::move(spec));
    address = co_await std::move(creating);
  } catch (const std::exception& x) {
    failure = x.what();
  }
  if (!failure.empty())
    throw ApiError(502, "sandbox.create_failed",
                   fmt::format("cannot start a sandbox from checkpoint {}: {}", c.id, failure));
  try {
    auto restoring = restore_sessions_at(e.rec, address, c);
    co_await std::move(restoring);
  } catch (const std::exception& x) {
    failure = x.what();
  }
  if (!failure.empty()) {
    auto removing = capture(prov.destroy(address.sandbox_id));
    (void)co_await std::move(removing);
    throw ApiError(502, "sandbox.create_failed",
                   fmt::format("cannot restore the sessions of checkpoint {}: {}", c.id, failure));
  }
  // The notebook's shell came back with the other sessions.
  for (const auto& s : c.sessions) {
    if (const auto* o = s.if_object(); o && o->contains("session") &&
                                       o->at("session").is_string() &&
                                       o->at("session").get_string() == kNotebookShell)
      address.shell_started = true;
  }
  co_return address;
}

asio::awaitable<void> Gateway::Impl::sweep_checkpoint_images(double grace) {
  const double now = unix_now();
  for (auto& [name, p] : providers) {
    if (!p->can(SandboxOperation::checkpoint))
      continue;
    std::vector<SandboxInfo> images;
    std::string unreachable;
    try {
      images = co_await p->list_checkpoints();
    } catch (const std::exception& x) {
      unreachable = x.what();
    }
    if (!unreachable.empty()) {
      logging::debug("gateway: provider {} cannot list its checkpoints: {}", name, unreachable);
      continue;
    }
    for (const auto& image : images) {
      const auto label = image.labels.find(kCheckpointLabel);
      const std::string id = label == image.labels.end() ? std::string() : label->second;
      // A checkpoint being made is known from its start; an image younger than the grace may be
      // an engine's commit that a killed gateway's last run asked for.
      if (checkpoints.contains(id) || (grace > 0 && now - image.created_at < grace))
        continue;
      std::string failure;
      try {
        co_await p->remove_checkpoint(image.id);
      } catch (const std::exception& x) {
        failure = x.what();
      }
      if (failure.empty())
        logging::info("gateway: removed the image of checkpoint {} that nothing records", id);
      else
        logging::warn("gateway: cannot remove the image {} of checkpoint {}: {}", image.id, id,
                      failure);
    }
  }
}

asio::awaitable<void> Gateway::Impl::reconcile_checkpoints(const Caller& who) {
  auto query = [](Store& st) { return st.load_checkpoints(); };
  auto stored = co_await on_db(std::move(query));
  std::vector<CheckpointRecord> cut_off;
  for (auto& row : stored) {
    try {
      CheckpointRecord c = CheckpointRecord::from_json(row.record);
      if (c.state == checkpoint_state::ready)
        checkpoints[c.id] = std::move(c);
      else
        cut_off.push_back(std::move(c));
    } catch (const std::exception& x) {
      logging::error("gateway: skipping the damaged record of checkpoint {}: {}", row.id, x.what());
    }
  }
  auto sweeping = sweep_checkpoint_images(0);
  co_await std::move(sweeping);
  for (const auto& c : cut_off) {
    auto forgetting = capture(save_checkpoint(c, {}, nullptr, true));
    (void)co_await std::move(forgetting);
    logging::info("gateway: checkpoint {} of session {} was cut off by a restart; removed", c.id,
                  c.session);
  }
  (void)who;
}

namespace {

bool is_ancestor(const Gateway::Impl& s, const std::string& ancestor, std::string from) {
  std::set<std::string> seen;
  while (!from.empty() && seen.insert(from).second) {
    if (from == ancestor)
      return true;
    const auto it = s.checkpoints.find(from);
    if (it == s.checkpoints.end())
      return false;
    from = it->second.parent;
  }
  return false;
}

json::array children_of(const Gateway::Impl& s, const std::string& id) {
  json::array out;
  for (const auto& [cid, c] : s.checkpoints) {
    if (c.parent == id)
      out.push_back(json::string(cid));
  }
  return out;
}

json::object checkpoint_json(const Gateway::Impl& s, const CheckpointRecord& c) {
  json::object o = c.public_json();
  o["children"] = children_of(s, c.id);
  return o;
}

asio::awaitable<Answer> create_checkpoint(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  json::object body = parse_body(r.body.empty() ? std::string_view("{}") : r.body);
  only_fields(body, {"metadata"});
  Entry& e = operable_session(*s, who, r.param("id"));
  Busy busy(e, "checkpoint");
  auto taking = s->take_checkpoint(e, who, "checkpoint",
                                   object_field(body, "metadata").value_or(json::object{}));
  CheckpointRecord c = co_await std::move(taking);
  co_return json_ok(201, checkpoint_json(*s, c));
}

asio::awaitable<Answer> list_checkpoints(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  const auto session = r.query("session_id");
  json::array out;
  for (const auto& [id, c] : s->checkpoints) {
    if (c.tenant != who.tenant || (session && c.session != *session))
      continue;
    out.push_back(checkpoint_json(*s, c));
  }
  co_return json_ok(200, json::object{{"checkpoints", std::move(out)}});
}

asio::awaitable<Answer> session_checkpoints(std::shared_ptr<Gateway::Impl> s, Caller who,
                                            Request r) {
  const Entry& e = s->session_for(who, r.param("id"));
  json::array out;
  for (const auto& [id, c] : s->checkpoints) {
    if (c.tenant == who.tenant && c.session == e.rec.id)
      out.push_back(checkpoint_json(*s, c));
  }
  co_return json_ok(200, json::object{{"checkpoints", std::move(out)}});
}

asio::awaitable<Answer> get_checkpoint(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  co_return json_ok(200, checkpoint_json(*s, s->checkpoint_for(who, r.param("id"))));
}

asio::awaitable<Answer> delete_checkpoint_route(std::shared_ptr<Gateway::Impl> s, Caller who,
                                                Request r) {
  const std::string id(r.param("id"));
  auto deleting = s->delete_checkpoint(who, id);
  co_await std::move(deleting);
  co_return json_ok(200, json::object{{"checkpoint_id", id}, {"deleted", true}});
}

// The session's sandbox replaced by one started from `c` (a rewind, a resume from disk); the old
// one goes on its own.
asio::awaitable<void> replace_sandbox(Gateway::Impl& s, Entry& e, const CheckpointRecord& c,
                                      const Caller& who, std::string_view type) {
  auto starting = s.start_from(e, c);
  const SandboxAddress address = co_await std::move(starting);
  rex::detail::crash_point("replace.sandbox_up");
  const std::string old = e.rec.paused == "disk" ? std::string() : e.rec.sandbox_id;
  e.live.reset();
  e.rec.sandbox_id = address.sandbox_id;
  e.rec.url = address.url;
  e.rec.token = address.token;
  e.rec.working_dir = address.working_dir;
  e.rec.scratch_dir = address.scratch_dir;
  e.rec.headers = address.headers;
  e.shell_started = address.shell_started;
  e.rec.started_from = c.id;
  e.rec.origin = c.id;
  e.rec.paused.clear();
  e.rec.last_active = unix_now();
  auto step1 = s.record(e.rec, type, who,
                        json::object{{"checkpoint", c.id}, {"sandbox_id", e.rec.sandbox_id}});
  co_await std::move(step1);
  rex::detail::crash_point("replace.recorded");
  if (!old.empty())
    s.remove_sandbox(e.rec.provider, old);
}

asio::awaitable<Answer> rewind(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  json::object body = parse_body(r.body);
  only_fields(body, {"checkpoint"});
  const auto cid = string_field(body, "checkpoint");
  if (!cid)
    throw ApiError(422, "request.invalid", "checkpoint: required");
  Entry& e = operable_session(*s, who, r.param("id"));
  const CheckpointRecord& c = s->checkpoint_for(who, *cid);
  if (c.state != checkpoint_state::ready)
    throw ApiError(409, "checkpoint.not_ready",
                   fmt::format("checkpoint {} is still being made", c.id), true, 1.0);
  // Its own checkpoints, and those it descends from.
  if (c.session != e.rec.id && !is_ancestor(*s, c.id, e.rec.origin))
    throw ApiError(422, "checkpoint.other_session",
                   fmt::format("checkpoint {} is of session {}, not of {} nor one it descends "
                               "from: start a session from it instead",
                               c.id, c.session, e.rec.id));
  Busy busy(e, "rewind");
  const CheckpointRecord copy = c;
  auto step2 = replace_sandbox(*s, e, copy, who, "rewound");
  co_await std::move(step2);
  s->append_log(e.rec, who, json::object{{"call", "rewind"}, {"checkpoint", copy.id}});
  co_return json_ok(200, e.rec.public_json());
}

asio::awaitable<Answer> pause(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  json::object body = parse_body(r.body.empty() ? std::string_view("{}") : r.body);
  only_fields(body, {"memory"});
  bool memory = true;
  if (const auto* m = body.if_contains("memory")) {
    if (!m->is_bool())
      throw ApiError(422, "request.invalid", "memory: expected true or false");
    memory = m->get_bool();
  }
  Entry& e = operable_session(*s, who, r.param("id"));
  auto pausing = s->pause_session(e, memory, who);
  (void)co_await std::move(pausing);
  co_return json_ok(200, e.rec.public_json());
}

asio::awaitable<Answer> resume(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  Entry& e = operable_session(*s, who, r.param("id"));
  auto resuming = s->resume_session(e, who);
  (void)co_await std::move(resuming);
  co_return json_ok(200, e.rec.public_json());
}

asio::awaitable<Answer> metrics(std::shared_ptr<Gateway::Impl> s, Caller who, Request r) {
  Entry& e = operable_session(*s, who, r.param("id"));
  SandboxMetrics m;
  if (e.rec.paused == "disk") {
    m.timestamp = unix_now();  // nothing runs
  } else {
    Provider& prov = s->capable_provider(e.rec, SandboxOperation::metrics, "measure a sandbox");
    auto measuring = prov.metrics(e.rec.sandbox_id);
    m = co_await std::move(measuring);
  }
  co_return json_ok(200, json::object{{"session_id", e.rec.id},
                                      {"cpu_percent", m.cpu_percent},
                                      {"cpu_count", m.cpu_count},
                                      {"memory_used", m.memory_used},
                                      {"memory_limit", m.memory_limit},
                                      {"disk_used", m.disk_used},
                                      {"disk_total", m.disk_total},
                                      {"timestamp", iso_time(m.timestamp)}});
}

}  // namespace

asio::awaitable<void> Gateway::Impl::delete_checkpoint(const Caller& who, std::string id) {
  Gateway::Impl* s = this;
  CheckpointRecord& c = s->checkpoint_for(who, id);
  if (c.state != checkpoint_state::ready)
    throw ApiError(409, "checkpoint.not_ready",
                   fmt::format("checkpoint {} is still being made", c.id), true, 1.0);
  // What still needs its image: a session whose sandbox started from it, a paused session it
  // holds, a checkpoint whose image is built on it.
  std::vector<std::string> users;
  for (const auto& [sid, e] : s->sessions) {
    if (e.rec.active() && (e.rec.started_from == c.id || e.rec.pause_checkpoint == c.id))
      users.push_back("session " + sid);
  }
  for (const auto& [cid, other] : s->checkpoints) {
    if (other.base == c.id)
      users.push_back("checkpoint " + cid);
  }
  if (!users.empty())
    throw ApiError(409, "checkpoint.in_use",
                   fmt::format("checkpoint {} is in use by {}: end or delete those first", c.id,
                               fmt::join(users, ", ")));
  Provider* p = s->provider(c.provider);
  if (p == nullptr)
    throw ApiError(503, "provider.unavailable",
                   fmt::format("checkpoint {}'s provider {} is not configured", c.id, c.provider));
  auto removing = p->remove_checkpoint(c.image);
  co_await std::move(removing);
  const CheckpointRecord gone = c;
  s->checkpoints.erase(gone.id);
  std::vector<StoredEvent> events;
  StoredEvent ev;
  ev.time = unix_now();
  ev.tenant = gone.tenant;
  ev.session_id = gone.session;
  ev.type = "checkpoint.deleted";
  ev.actor = who.actor;
  ev.request_id = who.request_id;
  ev.data = json::object{{"checkpoint", gone.id}};
  events.push_back(std::move(ev));
  auto saving = s->save_checkpoint(gone, std::move(events), nullptr, true);
  co_await std::move(saving);
  if (s->sessions.contains(gone.session))
    s->append_log(gone.session, who,
                  json::object{{"call", "delete_checkpoint"}, {"checkpoint", gone.id}});
}

asio::awaitable<bool> Gateway::Impl::pause_session(Entry& e, bool memory, const Caller& who) {
  if (!e.rec.paused.empty())
    co_return false;  // paused already
  Busy busy(e, "pause");
  Gateway::Impl* s = this;
  if (memory) {
    Provider& prov = s->capable_provider(e.rec, SandboxOperation::pause, "pause a sandbox");
    if (e.live)
      e.live->runtime->close_idle_connections();
    // Recorded first: a restart before the freeze finds it paused, and its resume thaws what
    // is not frozen (no harm); a restart after finds it paused as it is.
    e.rec.paused = "memory";
    auto recording = s->record(e.rec, "paused", who, json::object{{"memory", true}});
    co_await std::move(recording);
    rex::detail::crash_point("pause.recorded");
    std::string failure;
    try {
      auto freezing = prov.pause(e.rec.sandbox_id);
      co_await std::move(freezing);
    } catch (const std::exception& x) {
      failure = x.what();
    }
    if (!failure.empty()) {
      e.rec.paused.clear();
      auto undoing = s->record(e.rec, "resumed", who, json::object{{"memory", true}});
      co_await std::move(undoing);
      throw ApiError(502, "sandbox.pause_failed",
                     fmt::format("cannot pause session {}: {}", e.rec.id, failure));
    }
  } else {
    Provider& prov = s->capable_provider(e.rec, SandboxOperation::checkpoint,
                                         "pause a sandbox without its memory");
    auto taking = s->take_checkpoint(e, who, "pause", json::object{});
    const CheckpointRecord c = co_await std::move(taking);
    // Recorded before the sandbox goes: a restart in between finds the session paused and the
    // sandbox nobody's.
    const std::string old = e.rec.sandbox_id;
    e.live.reset();
    e.rec.paused = "disk";
    e.rec.pause_checkpoint = c.id;
    e.rec.sandbox_id.clear();
    e.rec.url.clear();
    e.rec.token.clear();
    auto recording =
        s->record(e.rec, "paused", who, json::object{{"memory", false}, {"checkpoint", c.id}});
    co_await std::move(recording);
    s->pinned_checkpoints.erase(c.id);  // the session holds it now
    rex::detail::crash_point("pause.recorded");
    auto removing = capture(prov.destroy(old));
    if (!(co_await std::move(removing)))
      s->remove_sandbox(e.rec.provider, old);  // tried again on its own
  }
  s->append_log(e.rec, who, json::object{{"call", "pause"}, {"memory", memory}});
  co_return true;
}

asio::awaitable<bool> Gateway::Impl::resume_session(Entry& e, const Caller& who) {
  if (e.rec.paused.empty())
    co_return false;
  Busy busy(e, "resume");
  Gateway::Impl* s = this;
  if (e.rec.paused == "memory") {
    Provider& prov = s->capable_provider(e.rec, SandboxOperation::pause, "resume a sandbox");
    auto thawing = prov.resume(e.rec.sandbox_id);
    co_await std::move(thawing);
    e.rec.paused.clear();
    e.rec.last_active = unix_now();
    auto recording = s->record(e.rec, "resumed", who, json::object{{"memory", true}});
    co_await std::move(recording);
  } else {
    const auto it = s->checkpoints.find(e.rec.pause_checkpoint);
    if (it == s->checkpoints.end())
      throw ApiError(500, "gateway.internal",
                     fmt::format("session {}'s pause checkpoint {} has no record", e.rec.id,
                                 e.rec.pause_checkpoint));
    const CheckpointRecord c = it->second;
    auto replacing = replace_sandbox(*s, e, c, who, "resumed");
    co_await std::move(replacing);
  }
  s->append_log(e.rec, who, json::object{{"call", "resume"}});
  co_return true;
}

void add_checkpoint_routes(server::RouteTable& t, std::shared_ptr<Gateway::Impl> self) {
  using bhttp::verb;
  const Api api{self};
  auto bind = [self](auto fn) {
    return [self, fn](Caller who, Request r) { return fn(self, std::move(who), std::move(r)); };
  };
  auto at = [&](verb method, const std::string& pattern, Handler h) {
    t.add(method, pattern, api.json(pattern, std::move(h)));
  };
  at(verb::post, "/api/sessions/{id}/checkpoints", bind(create_checkpoint));
  at(verb::get, "/api/sessions/{id}/checkpoints", bind(session_checkpoints));
  at(verb::get, "/api/checkpoints", bind(list_checkpoints));
  at(verb::get, "/api/checkpoints/{id}", bind(get_checkpoint));
  at(verb::delete_, "/api/checkpoints/{id}", bind(delete_checkpoint_route));
  at(verb::post, "/api/sessions/{id}/rewind", bind(rewind));
  at(verb::post, "/api/sessions/{id}/pause", bind(pause));
  at(verb::post, "/api/sessions/{id}/resume", bind(resume));
  at(verb::get, "/api/sessions/{id}/metrics", bind(metrics));
}

}  // namespace rex::gateway
