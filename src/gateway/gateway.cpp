// Gateway: storage, reconcile, the sweeper, sessions' ends, artifacts and transcripts. The HTTP
// routes are in gateway_routes.cpp.
#include <rex/core/log.hpp>
#include <rex/gateway/gateway.hpp>

#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/runtime/archive.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <unistd.h>

#include <fstream>
#include <set>

#include "core/crash_point.hpp"
#include "gateway/gateway_impl.hpp"
#include "gateway/lifecycle.hpp"
#include "gateway/transcript.hpp"

namespace rex::gateway {

namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

// A coroutine spawned on its own logs what it threw instead of losing it.
auto log_failure(std::string what) {
  return [what = std::move(what)](std::exception_ptr e) {
    if (!e)
      return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      logging::error("gateway: {}: {}", what, x.what());
    }
  };
}

std::string file_sha256(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw std::runtime_error(fmt::format("cannot read {}", file.string()));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx, buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx, digest, &n);
  EVP_MD_CTX_free(ctx);
  return hex_of(digest, n);
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr);
  return hex_of(digest, n);
}

// --- construction ----------------------------------------------------------------------------

Gateway::Impl::Impl(asio::any_io_executor executor, GatewayConfig config, Registry reg,
                    std::string server_executable)
    : ex(std::move(executor)),
      cfg(std::move(config)),
      registry(std::move(reg)),
      storage(fs::absolute(cfg.storage).lexically_normal()),
      sessions(ex),
      stop_requested(ex),
      background_ended(ex),
      after_answer_timer(ex) {
  validate(cfg);
  for (const char* sub : {"logs", "artifacts", "tmp"})
    fs::create_directories(storage / sub);
  store = std::make_unique<Store>(storage / "sessions.db");
  gateway_id = store->gateway_id();
  providers = make_providers(ex, cfg, storage, gateway_id, std::move(server_executable));
}

Provider* Gateway::Impl::provider(std::string_view name) {
  const auto it = providers.find(name);
  return it == providers.end() ? nullptr : it->second.get();
}

Quota Gateway::Impl::quota_of(const std::string& tenant) const {
  Quota q{cfg.max_sessions, cfg.creates_per_minute, cfg.max_storage_bytes};
  for (const auto& t : cfg.tenants) {
    if (t.name != tenant)
      continue;
    if (t.max_sessions)
      q.max_sessions = *t.max_sessions;
    if (t.creates_per_minute)
      q.creates_per_minute = *t.creates_per_minute;
    if (t.max_storage_bytes)
      q.max_storage_bytes = *t.max_storage_bytes;
  }
  return q;
}

// --- records and events ----------------------------------------------------------------------

StoredEvent Gateway::Impl::event(std::string_view type, const SessionRecord& rec, const Caller& who,
                                 json::object data) const {
  StoredEvent e;
  e.time = unix_now();
  e.tenant = rec.tenant;
  e.session_id = rec.id;
  e.type = std::string(type);
  e.actor = who.actor;
  e.request_id = who.request_id;
  data["state"] = rec.state;
  if (!rec.reason.empty())
    data["reason"] = rec.reason;
  if (!rec.error.empty())
    data["error"] = rec.error;
  e.data = std::move(data);
  return e;
}

asio::awaitable<void> Gateway::Impl::record(const SessionRecord& rec, std::string_view type,
                                            const Caller& who, json::object data) {
  std::vector<StoredEvent> events;
  events.push_back(event(type, rec, who, std::move(data)));
  co_await save(rec, std::move(events));
}

asio::awaitable<void> Gateway::Impl::save(const SessionRecord& rec, std::vector<StoredEvent> events,
                                          std::optional<IdempotencyKey> key,
                                          std::vector<StoredArtifact> artifacts) {
  Change change;
  change.session = StoredSession{rec.id, rec.tenant, rec.state, rec.to_json()};
  change.events = std::move(events);
  change.idempotency = std::move(key);
  change.artifacts = std::move(artifacts);
  auto work = [change = std::move(change)](Store& s) mutable {
    s.commit(change);
    return std::move(change.events);
  };
  auto committed = co_await on_db(std::move(work));
  sessions.at(rec.id).persisted_activity = rec.last_active;
  event_hub.publish(committed);
}

std::shared_ptr<Live> Gateway::Impl::live_of(Entry& e) {
  if (!e.live) {
    auto live = std::make_shared<Live>();
    RemoteRuntimeConfig rc;
    rc.url = e.rec.url;
    rc.auth_token = e.rec.token;
    rc.client.headers = e.rec.headers;
    if (const Provider* p = provider(e.rec.provider))
      p->configure_client(e.rec.url, rc.client);
    live->runtime = std::make_unique<RemoteRuntime>(ex, rc);
    const std::string scratch =
        e.rec.scratch_dir.empty() ? "/tmp/rex-notebook-" + e.rec.id : e.rec.scratch_dir;
    live->notebook =
        std::make_unique<Notebook>(ex, *live->runtime, scratch, e.rec.working_dir, e.shell_started);
    e.live = std::move(live);
  }
  return e.live;
}

void Gateway::Impl::touch(Entry& e, std::string_view call, bool new_call) {
  if (lifecycle::note_activity(e.rec, unix_now(), call, new_call, e.persisted_activity)) {
    e.persisted_activity = e.rec.last_active;
    spawn(persist_activity(e.rec.id), "recording activity");
  }
}

asio::awaitable<void> Gateway::Impl::persist_activity(std::string id) {
  auto& e = sessions.at(id);
  if (e.rec.state == state::ready)
    co_await save(e.rec);
}

void Gateway::Impl::append_log(const SessionRecord& rec, const Caller& who, json::object line) {
  append_log(rec.id, who, std::move(line));
}

void Gateway::Impl::append_log(const std::string& session_id, const Caller& who,
                               json::object line) {
  std::string text = json::serialize(line);
  text.pop_back();  // its closing brace: the gateway's members follow
  append_log_members(session_id, who, std::move(text));
}

void Gateway::Impl::append_log_members(const std::string& session_id, const Caller& who,
                                       std::string text) {
  run_after_answer();  // the lines of calls answered before this one go first
  end_line(text, unix_now(), who.request_id, who.actor, who.since);
  // A ready session keeps its log open (with its connection); others open it for the line.
  Entry* entry = sessions.find(session_id);
  Live* live = entry != nullptr ? entry->live.get() : nullptr;
  rex::detail::UniqueFd once;
  append_line(live != nullptr ? live->transcript : once, log_path(session_id), text);
}

// --- artifacts -------------------------------------------------------------------------------

asio::awaitable<std::vector<StoredArtifact>> Gateway::Impl::save_artifacts(
    Entry& e, std::vector<std::string> paths, const Caller& who) {
  auto live = live_of(e);
  const std::string id = e.rec.id;
  std::vector<StoredArtifact> saved;
  for (const auto& path : paths) {
    const fs::path scratch = storage / "tmp" / fmt::format("artifact-{}", random_hex(8));
    const fs::path copy = scratch / "content";
    fs::create_directories(scratch);
    std::exception_ptr failure;
    try {
      DownloadRequest request;
      request.path = path;
      request.target_path = copy.string();
      co_await live->runtime->download(std::move(request));
      auto store_it = [copy, scratch, path, id, this]() {
        StoredArtifact a;
        a.session_id = id;
        a.path = path;
        std::string base = fs::path(path).filename().string();
        if (base.empty() || base == "." || base == "..")
          base = "root";
        fs::path blob = copy;
        if (fs::is_directory(copy)) {
          blob = scratch / "content.tar";
          create_archive(copy, blob, ArchiveFormat::tar);
          base += ".tar";
        }
        a.name = base;
        a.size = fs::file_size(blob);
        a.sha256 = file_sha256(blob);
        a.created_at = unix_now();
        const fs::path target = artifact_path(a.sha256);
        if (!fs::exists(target))
          fs::rename(blob, target);
        fs::remove_all(scratch);
        return a;
      };
      saved.push_back(co_await rex::detail::offload(file_threads, ex, std::move(store_it)));
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) {
      std::error_code ignored;
      fs::remove_all(scratch, ignored);
      std::rethrow_exception(failure);
    }
  }
  // Two paths with one name: the later wins, as a later save of the same name does.
  std::vector<StoredEvent> events;
  for (const auto& a : saved)
    events.push_back(event(
        "artifact_saved", e.rec, who,
        json::object{{"name", a.name}, {"path", a.path}, {"size", a.size}, {"sha256", a.sha256}}));
  co_await save(e.rec, std::move(events), std::nullopt, saved);
  co_return saved;
}

asio::awaitable<std::vector<std::string>> Gateway::Impl::expand_collect(Entry& e) {
  std::vector<std::string> found;
  const Environment* env = find_environment(e.rec.environment);
  if (env == nullptr || env->collect.empty())
    co_return found;
  auto live = live_of(e);
  std::string patterns;
  for (const auto& p : env->collect)
    patterns += " " + p;  // unquoted: the sandbox's shell expands them
  Command list;
  list.command =
      fmt::format("for p in{}; do [ -e \"$p\" ] && printf '%s\\n' \"$p\"; done; true", patterns);
  list.shell = true;
  list.timeout = 60;
  list.cwd = e.rec.working_dir;
  const CommandResponse r = co_await live->runtime->execute(std::move(list));
  std::string_view out = r.stdout_;
  while (!out.empty()) {
    const auto nl = out.find('\n');
    const auto line = out.substr(0, nl);
    if (!line.empty())
      found.emplace_back(line);
    out = nl == std::string_view::npos ? std::string_view{} : out.substr(nl + 1);
  }
  co_return found;
}

// --- ending sessions -------------------------------------------------------------------------

asio::awaitable<void> Gateway::Impl::destroy(std::string id, std::string reason, Caller who) {
  Entry& e = sessions.at(id);
  while (e.rec.state == state::creating || e.rec.state == state::stopping) {
    // Another call is making or ending it: its end decides.
    const bool was_stopping = e.rec.state == state::stopping;
    co_await e.settled.wait();
    if (was_stopping || e.rec.state != state::ready)
      co_return;
  }
  if (e.rec.state != state::ready)
    co_return;
  lifecycle::apply(e.rec, lifecycle::Move::stop, unix_now(), reason);
  e.settled.reset();
  const std::string expired_type =
      reason == "ttl_idle" || reason == "ttl_max" ? "expired" : "stopping";
  co_await record(e.rec, expired_type, who);
  rex::detail::crash_point("destroy.stopping");
  co_await finish_stop(id, who);
}

asio::awaitable<void> Gateway::Impl::finish_stop(std::string id, Caller who) {
  Entry& e = sessions.at(id);
  if (e.stopping_now) {
    // Another coroutine is at it (the drift check's retry): its end is this one's.
    while (e.stopping_now)
      co_await e.settled.wait();
    co_return;
  }
  e.stopping_now = true;
  struct Done {
    Entry& e;
    ~Done() {
      e.stopping_now = false;
      e.settled.set();
    }
  } done{e};
  // A frozen sandbox is thawed first: its files are copied out through its server.
  if (e.rec.paused == "memory") {
    if (Provider* p = provider(e.rec.provider)) {
      auto thawing = capture(p->resume(e.rec.sandbox_id));
      (void)co_await std::move(thawing);
    }
  }
  // What the environment says to keep is copied out first; a failure to copy does not keep
  // the sandbox alive.
  if (!e.rec.url.empty()) {
    std::string collect_error;
    try {
      auto paths = co_await expand_collect(e);
      if (!paths.empty())
        co_await save_artifacts(e, std::move(paths), who);
    } catch (const std::exception& x) {
      collect_error = x.what();
    }
    if (!collect_error.empty()) {
      logging::warn("gateway: collecting artifacts of {}: {}", id, collect_error);
      json::object data{{"message", collect_error}};
      co_await record(e.rec, "collect_failed", who, std::move(data));
    }
  }
  e.live.reset();
  Provider* p = provider(e.rec.provider);
  std::string failure;
  try {
    if (p != nullptr && !e.rec.sandbox_id.empty())
      co_await p->destroy(e.rec.sandbox_id);
  } catch (const std::exception& x) {
    failure = x.what();
  }
  if (!failure.empty()) {
    // It stays `stopping`: the drift check tries again.
    logging::error("gateway: destroying the sandbox of {}: {}", id, failure);
    json::object data{{"message", failure}};
    co_await record(e.rec, "destroy_failed", who, std::move(data));
    co_return;
  }
  rex::detail::crash_point("destroy.removed");
  lifecycle::apply(e.rec, lifecycle::Move::removed, unix_now());
  co_await record(e.rec, "destroyed", who);
  co_await drop_unused_internal_checkpoints();
}

asio::awaitable<void> Gateway::Impl::drop_unused_internal_checkpoints() {
  // What a pause or an E2B fork made for itself (no caller holds it): it goes once no session
  // starts from it any more and no checkpoint is built on it.
  std::vector<CheckpointRecord> own;
  for (const auto& [cid, c] : checkpoints) {
    if (c.kind != "checkpoint" && !pinned_checkpoints.contains(cid))
      own.push_back(c);
  }
  for (const auto& c : own) {
    bool used = false;
    for (const auto& [sid, other] : sessions)
      used = used || (other.rec.active() &&
                      (other.rec.started_from == c.id || other.rec.pause_checkpoint == c.id));
    for (const auto& [oid, other] : checkpoints)
      used = used || other.base == c.id;
    Provider* p = provider(c.provider);
    if (used || p == nullptr)
      continue;
    auto removing = capture(p->remove_checkpoint(c.image));
    if (!(co_await std::move(removing)))
      continue;
    checkpoints.erase(c.id);
    auto forgetting = capture(save_checkpoint(c, {}, nullptr, true));
    (void)co_await std::move(forgetting);
  }
}

void Gateway::Impl::remove_sandbox(const std::string& provider_name,
                                   const std::string& sandbox_id) {
  Provider* p = provider(provider_name);
  if (p == nullptr || sandbox_id.empty())
    return;
  std::set<std::string>& under_way = removing[provider_name];
  if (!under_way.insert(sandbox_id).second)
    return;
  auto task = [](std::set<std::string>& removing, Provider& p,
                 std::string sandbox_id) -> asio::awaitable<void> {
    struct Done {
      std::set<std::string>& removing;
      const std::string& sandbox_id;
      ~Done() { removing.erase(sandbox_id); }
    } done{removing, sandbox_id};
    co_await p.destroy(sandbox_id);
  };
  spawn(task(under_way, *p, sandbox_id), "removing sandbox " + sandbox_id);
}

void Gateway::Impl::background_began() {
  ++background;
  background_ended.reset();
}

void Gateway::Impl::background_done() {
  if (--background == 0)
    background_ended.set();
}

void Gateway::Impl::spawn(asio::awaitable<void> task, std::string what) {
  background_began();
  // `this` outlives the task: run() waits for it.
  asio::co_spawn(ex, std::move(task), [this, failed = log_failure(std::move(what))](auto e) {
    failed(e);
    background_done();
  });
}

void Gateway::Impl::after_answer(std::function<void()> work) {
  background_began();
  after_answer_work.push_back(std::move(work));
  if (after_answer_armed)
    return;
  after_answer_armed = true;
  after_answer_timer.expires_after(kAfterAnswerDelay);
  after_answer_timer.async_wait([self = shared_from_this()](const boost::system::error_code&) {
    self->after_answer_armed = false;
    self->run_after_answer();
  });
}

void Gateway::Impl::run_after_answer_soon() {
  if (after_answer_work.empty())
    return;
  asio::post(ex, [self = shared_from_this()] { self->run_after_answer(); });
}

void Gateway::Impl::run_after_answer() {
  std::vector<std::function<void()>> due;
  due.swap(after_answer_work);  // what the work writes finds nothing pending
  for (auto& work : due) {
    try {
      work();
    } catch (const std::exception& e) {
      logging::error("gateway: after an answer: {}", e.what());
    }
    background_done();
  }
}

// --- the sweeper and the drift check ---------------------------------------------------------

asio::awaitable<void> Gateway::Impl::sweep_loop() {
  const Caller sweeper{"", "sweeper", ""};
  auto last_drift = std::chrono::steady_clock::now();
  const auto interval = duration_from_seconds(cfg.sweep_interval);
  while (!stopping) {
    co_await with_timeout(stop_requested.wait(), interval);
    if (stopping)
      break;
    const double now = unix_now();
    for (auto& [id, e] : sessions) {
      const auto reason = lifecycle::expiry(e.rec, now);
      if (!reason)
        continue;
      Caller who = sweeper;
      who.tenant = e.rec.tenant;
      spawn(destroy(id, std::string(*reason), who), "expiring " + id);
    }
    close_idle_port_connections(*this);
    if (std::chrono::steady_clock::now() - last_drift >=
        duration_from_seconds(cfg.drift_interval)) {
      last_drift = std::chrono::steady_clock::now();
      try {
        co_await check_drift();
      } catch (const std::exception& x) {
        logging::warn("gateway: checking the providers: {}", x.what());
      }
    }
  }
}

// What the providers run against the records: a ready session whose sandbox is gone is lost; a
// sandbox of this gateway without a live record, older than the grace period, is removed; a
// session stuck `stopping` is destroyed again.
asio::awaitable<void> Gateway::Impl::check_drift() {
  const Caller drift{"", "reconciler", ""};
  for (auto& [name, p] : providers) {
    // A provider that cannot answer (its engine is down) is skipped: its sessions are not
    // judged lost on no evidence, and the other providers are still checked.
    std::vector<SandboxListing> listing;
    std::string failure;
    double listed_at = 0;
    try {
      co_await p->tend_spares();
      listed_at = unix_now();
      listing = co_await p->list();
    } catch (const std::exception& x) {
      failure = x.what();
    }
    if (!failure.empty()) {
      logging::debug("gateway: provider {} cannot list its sandboxes: {}", name, failure);
      continue;
    }
    auto steps =
        lifecycle::plan(plan_inputs(lifecycle::Pass::drift, name, listed_at, std::move(listing)));
    co_await carry_out(name, std::move(steps), drift);
  }
  auto sweeping = sweep_checkpoint_images(std::max(cfg.orphan_grace, 1.0));
  co_await std::move(sweeping);
}

lifecycle::Inputs Gateway::Impl::plan_inputs(lifecycle::Pass pass, const std::string& provider,
                                             double listed_at,
                                             std::vector<SandboxListing> listing) const {
  lifecycle::Inputs in;
  in.pass = pass;
  in.now = unix_now();
  in.listed_at = listed_at;
  in.orphan_grace = cfg.orphan_grace;
  for (const auto& [id, e] : sessions)
    if (e.rec.provider == provider)
      in.sessions.push_back({id, e.rec.state, e.rec.sandbox_id, e.stopping_now, e.rec.ready_at,
                             e.rec.paused == "disk",
                             e.operation == "rewind" || e.operation == "resume"});
  in.listing = std::move(listing);
  if (const auto it = removing.find(provider); it != removing.end())
    in.being_removed = it->second;
  return in;
}

asio::awaitable<void> Gateway::Impl::carry_out(const std::string& provider,
                                               std::vector<lifecycle::Step> steps, Caller who) {
  using Kind = lifecycle::Step::Kind;
  const double now = unix_now();
  for (auto& step : steps) {
    switch (step.kind) {
      case Kind::adopt:
        logging::info("gateway: adopted session {}", step.session_id);
        break;
      case Kind::interrupted: {
        Entry& e = sessions.at(step.session_id);
        if (e.rec.state != state::creating)
          break;  // (the plan saw the states before this loop's awaits)
        lifecycle::apply(e.rec, lifecycle::Move::interrupted, now, "interrupted", step.error);
        co_await record(e.rec, "failed", who);
        e.settled.set();
        break;
      }
      case Kind::lost: {
        Entry& e = sessions.at(step.session_id);
        if (e.rec.state != state::ready)
          break;  // a DELETE came first
        lifecycle::apply(e.rec, lifecycle::Move::vanished, now, "lost", step.error);
        e.live.reset();
        logging::warn("gateway: session {} is lost: {}", step.session_id, e.rec.error);
        co_await record(e.rec, "lost", who);
        break;
      }
      case Kind::finish_stop:
        if (sessions.at(step.session_id).stopping_now)
          break;
        // Its end (artifacts, then the sandbox) goes on beside the requests.
        spawn(finish_stop(step.session_id, who), "destroying " + step.session_id);
        break;
      case Kind::remove:
        if (!step.session_id.empty() && sessions.at(step.session_id).rec.active())
          break;  // its session's step was passed over: the sandbox is still the session's
        if (step.session_id.empty())
          logging::info("gateway: removing orphan sandbox {} ({})", step.sandbox_id, provider);
        remove_sandbox(provider, step.sandbox_id);
        break;
    }
  }
}

void Gateway::Impl::keep_spares() {
  for (const Environment* env : registry.environments()) {
    if (env->spares == 0)
      continue;
    Provider* p = provider(env->provider);
    if (p == nullptr)
      continue;
    SandboxSpec spec;
    spec.environment = *env;
    spec.env = env->env;
    p->keep_spares(std::move(spec), env->spares);
  }
}

// --- reconcile -------------------------------------------------------------------------------

// Records against what the providers run, before anything else is served: ready sessions whose
// sandbox runs are adopted, the others marked lost; creates cut off by the restart end as failed
// (their sandbox removed); ends cut off are finished; sandboxes without a record are orphans.
// Only records are written here: the removals and the ends run on their own once decided, so a
// sandbox that is slow to end (a server that ignores SIGTERM waits out the provider's grace)
// does not hold up readiness.
asio::awaitable<void> Gateway::Impl::reconcile() {
  const Caller who{"", "reconciler", ""};
  auto query = [](Store& s) { return std::pair{s.load_sessions(), s.idempotency_keys()}; };
  auto [loaded, keys] = co_await on_db(std::move(query));
  for (auto& stored : loaded) {
    SessionRecord rec;
    try {
      rec = SessionRecord::from_json(stored.record);
    } catch (const std::exception& x) {
      logging::error("gateway: skipping the damaged record of {}: {}", stored.id, x.what());
      continue;
    }
    sessions.restore(std::move(rec));
  }
  // The keys, and the body each was first used with (a key whose session's record was damaged,
  // logged above, has nothing to answer and is left out).
  for (const auto& key : keys)
    sessions.restore_key(key);
  co_await load_templates();
  co_await reconcile_checkpoints(who);
  for (auto& [name, p] : providers) {
    std::vector<SandboxListing> listing;
    std::string unreachable;
    const double listed_at = unix_now();
    try {
      listing = co_await p->list();
    } catch (const std::exception& x) {
      unreachable = x.what();
    }
    if (!unreachable.empty()) {
      // Nothing is marked lost on a provider that cannot be asked: the drift check asks again.
      logging::error("gateway: provider {} cannot list its sandboxes: {}", name, unreachable);
      continue;
    }
    auto steps =
        lifecycle::plan(plan_inputs(lifecycle::Pass::start, name, listed_at, std::move(listing)));
    co_await carry_out(name, std::move(steps), who);
  }
  reconciled = true;
  std::size_t ready = 0;
  for (const auto& [id, e] : sessions)
    ready += e.rec.state == state::ready ? 1 : 0;
  logging::info("gateway: reconciled {} records, {} sessions ready", sessions.size(), ready);
}

// --- Gateway ---------------------------------------------------------------------------------

Gateway::Gateway(asio::any_io_executor executor, GatewayConfig config, Registry registry,
                 std::string server_executable)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(config), std::move(registry),
                                   std::move(server_executable))) {
  server::ServerConfig sc;
  const std::string& listen = impl_->cfg.listen;
  if (listen.starts_with("unix:")) {
    sc.unix_socket = listen.substr(5);
  } else {
    const auto colon = listen.rfind(':');
    sc.host = listen.substr(0, colon);
    if (sc.host.size() >= 2 && sc.host.front() == '[' && sc.host.back() == ']')
      sc.host = sc.host.substr(1, sc.host.size() - 2);
    sc.port = static_cast<std::uint16_t>(std::stoul(listen.substr(colon + 1)));
  }
  sc.upload_dir = (impl_->storage / "tmp").string();
  sc.idle_timeout = std::chrono::seconds(300);
  impl_->service = std::make_unique<server::Service>(impl_->ex, impl_->routes(), sc);
}

Gateway::~Gateway() {
  impl_->stop_requested.set();
  // The routes hold the gateway's state: dropping them breaks that cycle.
  impl_->service.reset();
  impl_->db_thread.join();
  impl_->file_threads.join();
}

void Gateway::listen() {
  impl_->service->listen();
}

std::string Gateway::url() const {
  return impl_->service->url();
}

const std::string& Gateway::id() const {
  return impl_->gateway_id;
}

asio::awaitable<void> Gateway::run() {
  auto self = impl_;
  self->service->listen();
  // The listener serves from the start (health, and 503 while reconciling).
  auto served = std::make_shared<Event>(self->ex);
  auto serve_failure = std::make_shared<std::exception_ptr>();
  asio::co_spawn(self->ex, self->service->run(), [served, serve_failure](std::exception_ptr e) {
    *serve_failure = e;
    served->set();
  });
  std::exception_ptr failure;
  try {
    co_await self->reconcile();
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    self->service->stop();
  } else if (!self->stopping) {
    self->spawn(self->sweep_loop(), "the sweeper");
    self->keep_spares();
  }
  co_await served->wait();
  // No request is left; the sweeper and every task spawned on its own end before the gateway.
  self->stopping = true;
  self->stop_requested.set();
  while (self->background > 0)
    co_await self->background_ended.wait();
  if (failure)
    std::rethrow_exception(failure);
  for (auto& [name, p] : self->providers)
    co_await p->drop_spares();
  if (*serve_failure)
    std::rethrow_exception(*serve_failure);
}

void Gateway::stop() {
  auto& s = *impl_;
  if (s.stopping)
    return;
  s.stopping = true;
  s.stop_requested.set();
  s.event_hub.wake_all();
  s.service->stop();
}

}  // namespace rex::gateway
