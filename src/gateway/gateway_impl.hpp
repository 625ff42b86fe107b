// The gateway's insides, shared by its lifecycle (gateway.cpp) and its routes
// (gateway_routes.cpp). Everything here runs on the gateway's io_context, except what is handed
// to the database thread (the Store) or the file threads.
#pragma once

#include <rex/core/event.hpp>
#include <rex/gateway/gateway.hpp>
#include <rex/gateway/provider.hpp>
#include <rex/gateway/store.hpp>
#include <rex/runtime/remote_runtime.hpp>
#include <rex/server/route_table.hpp>
#include <rex/server/service.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/offload.hpp"
#include "core/unique_fd.hpp"
#include "gateway/api_error.hpp"
#include "gateway/checkpoint_record.hpp"
#include "gateway/event_hub.hpp"
#include "gateway/lifecycle.hpp"
#include "gateway/metrics.hpp"
#include "gateway/notebook.hpp"
#include "gateway/providers.hpp"
#include "gateway/session_record.hpp"
#include "gateway/session_table.hpp"
#include "gateway/template_record.hpp"

namespace rex::gateway {

namespace fs = std::filesystem;

/// Who is calling: the tenant of the key, a name for the audit log, the request's id.
struct Caller {
  std::string tenant;
  std::string actor;
  std::string request_id;
  double since = 0;  // when its request arrived (unix seconds); 0: the gateway's own doing
};

/// Where the SDK may PUT one file archive of a template's COPY steps, without a key.
struct UploadTicket {
  std::string tenant;
  std::string hash;
  double expires = 0;  // unix seconds
};

/// A template build under way, which builds of the same steps wait for.
struct RunningBuild {
  explicit RunningBuild(asio::any_io_executor ex) : done(std::move(ex)) {}
  std::string build;
  Event done;
  std::string image;  // set when it succeeded
  std::string reason, step;
};

/// Connections to sandboxes' ports kept open between relayed requests (e2b_ports.cpp).
struct PortConnections;

struct Gateway::Impl : std::enable_shared_from_this<Gateway::Impl> {
  Impl(asio::any_io_executor executor, GatewayConfig config, Registry registry,
       std::string server_executable);

  // --- state ---
  asio::any_io_executor ex;
  GatewayConfig cfg;
  Registry registry;
  fs::path storage;
  asio::thread_pool db_thread{1};
  asio::thread_pool file_threads{2};
  std::unique_ptr<Store> store;  // used on db_thread only
  std::string gateway_id;
  Providers providers;
  SessionTable sessions;
  EventHub event_hub;
  std::unique_ptr<server::Service> service;
  bool reconciled = false;
  bool stopping = false;
  Event stop_requested;
  // By provider: the sandbox ids whose remove_sandbox() is at work.
  std::map<std::string, std::set<std::string>> removing;
  std::size_t background = 0;  // coroutines spawned on their own that have not ended
  Event background_ended;      // set while `background` is 0
  static constexpr std::chrono::milliseconds kAfterAnswerDelay{20};
  std::vector<std::function<void()>> after_answer_work;  // see after_answer()
  asio::steady_timer after_answer_timer;                 // its latest time
  bool after_answer_armed = false;
  Metrics metrics;
  std::map<std::string, CheckpointRecord, std::less<>> checkpoints;  // every tenant's, by id
  std::set<std::string> pinned_checkpoints;  // internal ones whose forks are being made
  std::map<std::string, TemplateRecord, std::less<>> templates;  // every tenant's, by id
  // Every template build's environment made so far, kept while the gateway runs (a launch holds
  // a reference to its environment), and the one each name gives now.
  std::list<Environment> template_environments;
  std::map<std::string, const Environment*, std::less<>> template_env;
  std::map<std::string, std::shared_ptr<RunningBuild>> builds_by_key;
  std::map<std::string, UploadTicket> upload_tickets;  // by ticket
  std::shared_ptr<PortConnections> port_connections;   // made at the first relayed request
  // The builds under way, by build id: set when each ends (a status call waits for it).
  std::map<std::string, std::shared_ptr<Event>> build_done;

  // --- database (gateway.cpp) ---
  template <class F>
  auto on_db(F work) {
    return rex::detail::offload(db_thread, ex,
                                [this, work = std::move(work)]() mutable { return work(*store); });
  }
  /// Commits the record (and events, an idempotency key, artifacts), then publishes the events.
  asio::awaitable<void> save(const SessionRecord& rec, std::vector<StoredEvent> events = {},
                             std::optional<IdempotencyKey> key = std::nullopt,
                             std::vector<StoredArtifact> artifacts = {});
  /// save() with one event of `type`.
  asio::awaitable<void> record(const SessionRecord& rec, std::string_view type, const Caller& who,
                               boost::json::object data = {});
  StoredEvent event(std::string_view type, const SessionRecord& rec, const Caller& who,
                    boost::json::object data = {}) const;

  // --- lifecycle (gateway.cpp) ---
  /// Runs `task` on its own, logging what it throws. run() waits for every such task before it
  /// returns: none outlives the gateway, and none has a call in flight on a thread pool (a
  /// provider's blocking client) when the io_context ends.
  void spawn(asio::awaitable<void> task, std::string what);
  /// Holds `work`, an answered call's bookkeeping (its transcript line), until the gateway waits
  /// anyway: while a later proxied call's request is with its sandbox (run_after_answer_soon),
  /// before any other line is written or a transcript read (run_after_answer), and at the
  /// latest kAfterAnswerDelay after it came. Neither the answer nor the caller's next request
  /// waits for it: on a busy machine the caller woken by an answer often runs on the gateway's
  /// CPU once the gateway sleeps. Counted with the spawned tasks, so run() waits for it too.
  void after_answer(std::function<void()> work);
  /// Runs what after_answer() holds, now.
  void run_after_answer();
  /// Runs it once the handler now running has to wait (proxy_json, before its forward).
  void run_after_answer_soon();
  // The count of spawn()'s and after_answer()'s work (`background`, `background_ended`).
  void background_began();
  void background_done();
  asio::awaitable<void> reconcile();
  asio::awaitable<void> sweep_loop();
  asio::awaitable<void> check_drift();
  // Asks each provider to keep the spares the environments name (after reconcile).
  void keep_spares();
  /// Ends a session: collects its artifacts, destroys its sandbox, records why.
  asio::awaitable<void> destroy(std::string id, std::string reason, Caller who);
  /// The rest of a `stopping` session's end (also after a restart or a failed destroy).
  asio::awaitable<void> finish_stop(std::string id, Caller who);
  /// Destroys a sandbox that no session needs (an interrupted create's, a lost session's, an
  /// orphan) on its own, so that neither reconcile nor the drift check waits for a process to
  /// end; once per sandbox at a time (`removing` holds those under way).
  void remove_sandbox(const std::string& provider_name, const std::string& sandbox_id);
  /// What lifecycle::plan() needs of one provider: its sessions, its listing, the removals
  /// under way, the time and the grace.
  lifecycle::Inputs plan_inputs(lifecycle::Pass pass, const std::string& provider, double listed_at,
                                std::vector<SandboxListing> listing) const;
  /// Carries out a plan of lifecycle::plan() for `provider`: records first, then the ends and
  /// removals on their own. A step whose session has moved on since the plan was made (a
  /// DELETE that came between) is passed over.
  asio::awaitable<void> carry_out(const std::string& provider, std::vector<lifecycle::Step> steps,
                                  Caller who);
  Provider* provider(std::string_view name);
  Quota quota_of(const std::string& tenant) const;
  std::shared_ptr<Live> live_of(Entry& e);
  /// Activity of the session: resets its idle clock, and counts a call unless `new_call` is
  /// false (a long answer still flowing).
  // A call reached the session's sandbox: its idle clock starts again, and `call` names what
  // last kept it alive (the record's last_call).
  void touch(Entry& e, std::string_view call, bool new_call = true);
  asio::awaitable<void> persist_activity(std::string id);
  fs::path log_path(const std::string& id) const { return storage / "logs" / (id + ".jsonl"); }
  fs::path artifact_path(const std::string& sha256) const { return storage / "artifacts" / sha256; }
  void append_log(const SessionRecord& rec, const Caller& who, boost::json::object line);
  void append_log(const std::string& session_id, const Caller& who, boost::json::object line);
  /// The same with the line's own members as text: `text` is a JSON object's text without its
  /// closing brace ("{" and its members), which a line built around bodies passed through as
  /// they came (log_proxied) is.
  void append_log_members(const std::string& session_id, const Caller& who, std::string text);
  /// Copies files or directories out of a session's sandbox into the artifact store.
  asio::awaitable<std::vector<StoredArtifact>> save_artifacts(Entry& e,
                                                              std::vector<std::string> paths,
                                                              const Caller& who);
  asio::awaitable<std::vector<std::string>> expand_collect(Entry& e);

  // --- API (gateway_routes.cpp) ---
  server::RouteTable routes();
  /// The caller's tenant and actor; its request id is for the caller of this to set.
  Caller authenticate(const server::Request& r, bool needs_key = true) const;
  Entry& session_for(const Caller& who, std::string_view id);
  Entry& ready_session(const Caller& who, std::string_view id);
  std::string resolve_path(const Entry& e, std::string_view path) const;
  asio::awaitable<server::Answer> create(Caller who, server::Request r);
  /// The rest of an admitted create whose entry is open: its record first (the intent), then
  /// its sandbox, started from `from`'s image with its sessions restored when given. The session
  /// ends ready, or failed (ApiError 502 sandbox.create_failed, or 503 when nothing could be
  /// recorded: the session never existed).
  asio::awaitable<void> launch(Entry& e, Provider& prov, const Environment& env,
                               std::optional<IdempotencyKey> key_row, Caller who,
                               const CheckpointRecord* from, boost::json::value request_body);

  // --- templates (templates.cpp) ---
  /// The registry's environment of that name, else a template build's (by template id, any
  /// tenant's, deleted ones' too): for a session's own environment. A create reaches a
  /// template through template_environment(), which checks the tenant.
  const Environment* find_environment(std::string_view name) const;
  /// The template of that id or name (any tenant's); null when none.
  TemplateRecord* template_named(std::string_view name_or_id);
  /// The environment name of the caller's template `name` ("name" or "name:tag", or its id)
  /// for a create; nullopt when the caller has no such template; an ApiError when it has no
  /// finished build.
  std::optional<std::string> template_environment(const Caller& who, std::string_view name);
  /// Makes the template's current build the environment of its id.
  void publish_template(const TemplateRecord& t);
  asio::awaitable<void> save_template(const TemplateRecord& t, bool removed = false);
  /// At start: the stored templates; builds cut off by a restart end failed.
  asio::awaitable<void> load_templates();
  /// Builds `bid` of template `tid` (or takes a ready or running build of the same steps).
  asio::awaitable<void> run_build(std::string tid, std::string bid, boost::json::object request,
                                  DockerfilePlan plan, std::string base);
  /// run_build(), then the build's build_done event set and dropped, however it ended.
  asio::awaitable<void> build_and_signal(std::string tid, std::string bid,
                                         boost::json::object request, DockerfilePlan plan,
                                         std::string base);
  /// Deletes the caller's template and its unused images; false when it has none of that name.
  asio::awaitable<bool> delete_template(const Caller& who, std::string id);
  /// Where the archive of `hash` uploaded by `tenant` is kept.
  fs::path template_file(const std::string& tenant, const std::string& hash) const;
  /// Runs the environment's start_cmd in the new sandbox and waits for its ready_cmd.
  asio::awaitable<void> start_commands(Entry& e, const Environment& env);

  // --- checkpoints (checkpoints.cpp) ---
  /// The caller's checkpoint; 404 checkpoint.not_found for another tenant's or none.
  CheckpointRecord& checkpoint_for(const Caller& who, std::string_view id);
  /// The session's provider when it has the operation; else 422 naming both.
  Provider& capable_provider(const SessionRecord& rec, SandboxOperation operation,
                             std::string_view what);
  /// Commits a checkpoint's record (or its removal) with the events and, when given, a
  /// session's record, in one change; then publishes the events.
  asio::awaitable<void> save_checkpoint(const CheckpointRecord& c, std::vector<StoredEvent> events,
                                        const SessionRecord* session = nullptr,
                                        bool removed = false);
  /// A checkpoint of the session's sandbox: recorded first (creating), its sessions captured
  /// (a memory-paused session's, as they were when it froze), its image made, then ready.
  asio::awaitable<CheckpointRecord> take_checkpoint(Entry& e, const Caller& who, std::string kind,
                                                    boost::json::object metadata);
  /// Starts a sandbox for the session from the checkpoint and restores its sessions in it; the
  /// session's record is not touched. ApiError 502 with nothing left behind when it fails.
  asio::awaitable<SandboxAddress> start_from(Entry& e, const CheckpointRecord& c);
  /// Restores the checkpoint's bash sessions in the sandbox at `address`.
  asio::awaitable<void> restore_sessions_at(const SessionRecord& rec, const SandboxAddress& address,
                                            const CheckpointRecord& c);
  /// Pauses the session: its processes frozen (memory), or checkpointed and its sandbox ended
  /// (not). False when it was paused already.
  asio::awaitable<bool> pause_session(Entry& e, bool memory, const Caller& who);
  /// Brings a paused session back: thawed, or started from its pause's checkpoint with its
  /// sessions restored. False when it was not paused.
  asio::awaitable<bool> resume_session(Entry& e, const Caller& who);
  /// Deletes the caller's checkpoint and its image: 404 when it has none by that id, 409 while
  /// it is being made or in use (a session started from it, a checkpoint built on it).
  asio::awaitable<void> delete_checkpoint(const Caller& who, std::string id);
  /// Removes the internal checkpoints (a pause's, an E2B fork's) nothing uses any more.
  asio::awaitable<void> drop_unused_internal_checkpoints();
  /// Removes the checkpoint images of this gateway that no checkpoint it knows owns (older than
  /// `grace` seconds: an engine may finish a commit a killed gateway asked for after the restart).
  asio::awaitable<void> sweep_checkpoint_images(double grace);
  /// At start: the checkpoints cut off while being made lose their record and image, and the
  /// images of this gateway that no checkpoint records go.
  asio::awaitable<void> reconcile_checkpoints(const Caller& who);
  /// A file of the sandbox as an answer (copied through the gateway's tmp/).
  asio::awaitable<server::FileAnswer> read_bytes(Live& live, std::string path);
  /// Writes a file in the sandbox: as text, or (binary) as bytes, staged in tmp/.
  asio::awaitable<void> write_bytes(Live& live, std::string path, std::string content, bool binary);
};

/// A runtime's or provider's failure as the API's error (gateway_routes.cpp).
ApiError api_error_of(const std::exception& e);
/// The request's X-Request-ID when it has a usable one, else a new one.
std::string request_id_of(const server::Request& r);

/// The SWE-ReX protocol of each session's sandbox, under /api/sessions/{id}/swerex
/// (swerex_proxy.cpp).
void add_swerex_proxy_routes(server::RouteTable& table, std::shared_ptr<Gateway::Impl> self);
// The web console: / and /ui/ (console.cpp).
void add_console_routes(server::RouteTable& table);
/// Checkpoints, rewinds, pauses and metrics of sessions (checkpoints.cpp).
void add_checkpoint_routes(server::RouteTable& table, std::shared_ptr<Gateway::Impl> self);
/// E2B's template build API (templates.cpp).
void add_template_routes(server::RouteTable& table, std::shared_ptr<Gateway::Impl> self);
/// The E2B-compatible control API (e2b_api.cpp): /sandboxes and /v2/sandboxes.
void add_e2b_routes(server::RouteTable& table, std::shared_ptr<Gateway::Impl> self);
/// The E2B-compatible in-sandbox API (e2b_envd.cpp): /health, /files, filesystem.Filesystem and
/// process.Process, routed by the E2b-Sandbox-Id header.
void add_e2b_envd_routes(server::RouteTable& table, std::shared_ptr<Gateway::Impl> self);
/// The X-Access-Token of a session's in-sandbox API (envdAccessToken in the control API).
std::string envd_access_token(const SessionRecord& rec);
/// E2B's port routing (e2b_ports.cpp): a request naming a port of a sandbox other than envd's
/// (E2b-Sandbox-Port, or a Host of `P-<id>.<domain>`) is relayed to that port, before any route.
void add_e2b_port_routing(server::RouteTable& table, std::shared_ptr<Gateway::Impl> self);
/// Closes the kept port connections of sessions that are gone or no longer ready (the sweeper's).
void close_idle_port_connections(Gateway::Impl& s);
/// E2B's error shape, {"code": status, "message"} (the message kept valid UTF-8).
server::Answer e2b_error(unsigned status, std::string_view message);
/// The caller of an E2B control-API call, authenticated once the gateway has reconciled; an
/// ApiError otherwise (e2b_api.cpp).
Caller admit_e2b_caller(Gateway::Impl& s, const server::Request& r);

/// A route of E2B's control API: the caller admitted, `handler` called on an `Api{s}`, and
/// what it throws answered in E2B's shape (E2B's clients read 400 for the gateway's 422).
template <class Api>
server::JsonRoute e2b_route(
    std::shared_ptr<Gateway::Impl> s, std::string pattern,
    std::function<asio::awaitable<server::Answer>(Api&, Caller, server::Request)> handler) {
  return [s, pattern = std::move(pattern),
          handler = std::move(handler)](server::Request r) -> asio::awaitable<server::Answer> {
    s->metrics.count_request(pattern);
    Api api{s};
    std::optional<ApiError> failure;
    try {
      Caller who = admit_e2b_caller(*s, r);
      co_return co_await handler(api, std::move(who), std::move(r));
    } catch (const std::exception& e) {
      failure = api_error_of(e);
    }
    s->metrics.count_error(failure->code());
    const unsigned status = failure->status() == 422 ? 400 : failure->status();
    co_return e2b_error(status, failure->what());
  };
}

/// sha256 of a string, lowercase hex.
std::string sha256_hex(std::string_view data);

}  // namespace rex::gateway
