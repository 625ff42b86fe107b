// Store: the gateway's state in one SQLite database (the `sessions` file under --storage):
// session records, the event log (audit trail and the source of GET /api/events), idempotency
// keys of creates, and the artifacts copied out of sandboxes. It is what a restarted gateway
// reconciles from, so what it acknowledges must outlive a kill -9 or a power cut.
//
// Guarantees:
// - commit() returns once its Change is durable: WAL journal with synchronous=FULL, so a crash
//   or power loss after it loses nothing. A Change is one transaction: all of it or none of it
//   (a failed commit leaves the database and the Change as they were).
// - Event ids are assigned by the store, strictly increasing and never reused, so a client's
//   Last-Event-ID always means the same point in the log.
// - Sessions keep their creation order when their record is replaced.
// - Integrity: an idempotency key or an artifact names a session that exists (checked when
//   the Change commits), and a (tenant, key) is recorded once (DuplicateIdempotencyKey).
// - Opening a file that is not a rex gateway database, or one of a newer schema, is a
//   StoreError that names the file and says what is wrong; nothing in it is changed.
// - The database's descriptors are close-on-exec: sandboxes the gateway spawns never hold them.
//
// Threading: one thread at a time per Store (the gateway's database thread); a Store may move
// between threads. Every member blocks on the disk, and a write may wait up to the busy
// timeout (5 s) for another connection to the same file; never call it from an io_context.
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace rex::gateway {

/// A failure of the database: names the file and SQLite's own message.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// commit() of an idempotency key whose (tenant, key) is already recorded: another create with
/// that key won the race; look it up with Store::idempotency(). Nothing of the Change is written.
class DuplicateIdempotencyKey : public StoreError {
 public:
  using StoreError::StoreError;
};

struct StoredSession {
  std::string id;
  std::string tenant;
  std::string state;           // "creating", "ready", "stopping", "destroyed", "failed", "lost"
  boost::json::object record;  // the whole record as the gateway keeps it (opaque to the store)
};

struct StoredEvent {
  std::int64_t id = 0;  // assigned by the store on commit: strictly increasing, never reused
  double time = 0;      // unix seconds
  std::string tenant, session_id, type, actor, request_id;
  boost::json::object data;
};

struct StoredArtifact {
  std::string session_id, name, path, sha256;
  std::uint64_t size = 0;  // at most INT64_MAX (SQLite's integers)
  double created_at = 0;   // unix seconds
};

/// A record the store keeps whole in a table of its own: its id, tenant and state as columns,
/// the rest opaque to the store. A checkpoint of a session's sandbox (state "creating" until its
/// image exists, then "ready"); a template built on the gateway's engine (its newest build's
/// status).
struct StoredRecord {
  std::string id;
  std::string tenant;
  std::string state;
  boost::json::object record;
};
using StoredCheckpoint = StoredRecord;
using StoredTemplate = StoredRecord;

struct IdempotencyKey {
  std::string tenant, key, body_hash, session_id;
};

/// One change, committed in one transaction (all or nothing).
struct Change {
  std::optional<StoredSession> session;          // inserted or replaced (by id)
  std::vector<StoredEvent> events;               // appended; commit() writes their ids back here
  std::optional<IdempotencyKey> idempotency;     // inserted; a (tenant, key) already present is a
                                                 // DuplicateIdempotencyKey
  std::vector<StoredArtifact> artifacts;         // inserted or replaced (by session_id + name)
  std::vector<StoredCheckpoint> checkpoints;     // inserted or replaced (by id)
  std::vector<std::string> removed_checkpoints;  // deleted (by id)
  std::vector<StoredTemplate> templates;         // inserted or replaced (by id)
  std::vector<std::string> removed_templates;    // deleted (by id)
};

/// The connection's settings as SQLite reports them (for tests and diagnostics).
struct StorePragmas {
  std::string journal_mode;  // "wal"
  int synchronous = 0;       // 2: FULL
  bool foreign_keys = false;
  int busy_timeout_ms = 0;
};

class Store {
 public:
  /// Opens or creates the database at `file` (parent directory must exist): WAL journal,
  /// synchronous=FULL, foreign keys on, a busy timeout of 5 s, schema created or checked
  /// (PRAGMA user_version = 3, an older file gaining the checkpoints and templates tables; a newer
  /// version, or a file that is not a rex gateway database, is a StoreError naming the file and
  /// saying what is wrong).
  explicit Store(const std::filesystem::path& file);
  ~Store();
  Store(Store&& other) noexcept;
  Store& operator=(Store&& other) noexcept;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& file() const noexcept { return file_; }
  /// This gateway's persistent id: 16 random hex characters made at the first open, the same
  /// ever after (stored in the meta table).
  std::string gateway_id() const { return gateway_id_; }

  /// Writes `change` in one transaction, durable when this returns; then sets the ids of its
  /// events (any id they carried is ignored). On failure nothing is written, the events keep
  /// their ids, and the error says what failed.
  void commit(Change& change);

  /// All sessions, in creation order.
  std::vector<StoredSession> load_sessions() const;
  std::optional<StoredSession> session(std::string_view id) const;
  /// All checkpoints, in creation order.
  std::vector<StoredCheckpoint> load_checkpoints() const;
  /// All templates, in creation order.
  std::vector<StoredTemplate> load_templates() const;
  std::optional<IdempotencyKey> idempotency(std::string_view tenant, std::string_view key) const;
  /// Every idempotency key, with the hash of the request body it was first used with.
  std::vector<IdempotencyKey> idempotency_keys() const;
  /// Events with id > after, oldest first, at most `limit`; only `tenant`'s and only
  /// `session`'s when given.
  std::vector<StoredEvent> events_after(std::int64_t after,
                                        const std::optional<std::string>& tenant, std::size_t limit,
                                        const std::optional<std::string>& session = {}) const;
  /// The newest event's id; 0 when there are none.
  std::int64_t last_event_id() const;
  /// A session's artifacts, by name.
  std::vector<StoredArtifact> artifacts(std::string_view session_id) const;
  std::optional<StoredArtifact> artifact(std::string_view session_id, std::string_view name) const;
  /// Sum of artifact sizes of a tenant's sessions (for its storage quota).
  std::uint64_t artifact_bytes(std::string_view tenant) const;

  StorePragmas pragmas() const;

 private:
  sqlite3* connection() const;  // throws StoreError on a moved-from Store
  std::filesystem::path file_;
  sqlite3* db_ = nullptr;
  std::string gateway_id_;
};

}  // namespace rex::gateway
