#include <rex/gateway/store.hpp>

#include <rex/core/random.hpp>

#include <fmt/format.h>
#include <sqlite3.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <utility>

namespace rex::gateway {

namespace json = boost::json;

namespace {

constexpr int kSchemaVersion = 4;
// PRAGMA application_id: marks the file as a rex gateway database ("rexg"), so a database of
// another program is refused instead of being written into.
constexpr std::int64_t kApplicationId = 0x72657867;
constexpr int kBusyTimeoutMs = 5000;
constexpr std::string_view kGatewayIdKey = "gateway_id";

// Version 1. STRICT tables: SQLite refuses a value of the wrong type instead of keeping it.
// The foreign keys are deferred, so the parts of a Change may be written in any order and are
// checked together when it commits.
constexpr const char* kSchema = R"sql(
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  state TEXT NOT NULL,
  record TEXT NOT NULL
) STRICT;
CREATE INDEX sessions_tenant ON sessions (tenant);
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time REAL NOT NULL,
  tenant TEXT NOT NULL,
  session_id TEXT NOT NULL,
  type TEXT NOT NULL,
  actor TEXT NOT NULL,
  request_id TEXT NOT NULL,
  data TEXT NOT NULL
) STRICT;
CREATE INDEX events_tenant ON events (tenant);
CREATE TABLE idempotency (
  tenant TEXT NOT NULL,
  key TEXT NOT NULL,
  body_hash TEXT NOT NULL,
  session_id TEXT NOT NULL REFERENCES sessions (id) DEFERRABLE INITIALLY DEFERRED,
  PRIMARY KEY (tenant, key)
) STRICT;
CREATE TABLE artifacts (
  session_id TEXT NOT NULL REFERENCES sessions (id) DEFERRABLE INITIALLY DEFERRED,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER NOT NULL CHECK (size >= 0),
  sha256 TEXT NOT NULL,
  created_at REAL NOT NULL,
  PRIMARY KEY (session_id, name)
) STRICT;
)sql";

// Version 2 adds the checkpoints of sessions' sandboxes (a version 1 file gains the table when
// opened).
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE checkpoints (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  state TEXT NOT NULL,
  record TEXT NOT NULL
) STRICT;
)sql";

// Version 3 adds the templates built on the gateway's engine (E2B's template builds).
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE templates (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  state TEXT NOT NULL,
  record TEXT NOT NULL
) STRICT;
)sql";

// Version 4 indexes the events by session, for one session's events (the console's Events tab,
// `GET /api/events?session_id=`) without reading its tenant's.
constexpr const char* kSchemaV4 = R"sql(
CREATE INDEX events_session ON events (session_id, id);
)sql";

// What each version after the first adds, in order: a new file is made of them all, an older
// file gains those after its own version.
struct SchemaStep {
  int version;
  const char* sql;
  const char* what;  // for the error when it fails: "cannot <what>"
};
constexpr SchemaStep kSchemaSteps[] = {{2, kSchemaV2, "add the checkpoints table"},
                                       {3, kSchemaV3, "add the templates table"},
                                       {4, kSchemaV4, "index the events by session"}};
static_assert(static_cast<int>(std::size(kSchemaSteps)) + 1 == kSchemaVersion,
              "a schema version without its step");

constexpr std::string_view kTables[] = {"meta",      "sessions",    "events",   "idempotency",
                                        "artifacts", "checkpoints", "templates"};

// The open connection and the file it serves, for error messages.
struct Db {
  sqlite3* handle;
  const std::filesystem::path& file;
};

// A hint for the failures a person can do something about.
std::string_view hint(int extended_code) {
  switch (extended_code) {
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return " (an idempotency key or an artifact names a session that is not stored)";
    case SQLITE_BUSY:
    case SQLITE_BUSY_SNAPSHOT:
      return " (another connection held the database past the busy timeout of 5 s)";
    default:
      return "";
  }
}

[[noreturn]] void throw_error(const Db& db, std::string_view what) {
  const int code = sqlite3_extended_errcode(db.handle);
  throw StoreError(fmt::format("gateway store {}: cannot {}: {}{}", db.file.string(), what,
                               sqlite3_errmsg(db.handle), hint(code)));
}

[[noreturn]] void throw_problem(const Db& db, std::string_view problem) {
  throw StoreError(fmt::format("gateway store {}: {}", db.file.string(), problem));
}

// One prepared statement; `what` says what it does, for the error it throws.
class Statement {
 public:
  Statement(const Db& db, std::string_view what, std::string_view sql) : db_(db), what_(what) {
    if (sqlite3_prepare_v2(db_.handle, sql.data(), static_cast<int>(sql.size()), &statement_,
                           nullptr) != SQLITE_OK)
      throw_error(db_, what_);
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind_text(int index, std::string_view text) {
    check(sqlite3_bind_text64(statement_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
    return *this;
  }
  Statement& bind_int(int index, std::int64_t value) {
    check(sqlite3_bind_int64(statement_, index, value));
    return *this;
  }
  Statement& bind_real(int index, double value) {
    check(sqlite3_bind_double(statement_, index, value));
    return *this;
  }
  Statement& bind_json(int index, const json::object& object) {
    return bind_text(index, json::serialize(object));
  }

  /// True when a row is ready, false when the statement is done.
  bool step() {
    const int code = sqlite3_step(statement_);
    if (code == SQLITE_ROW)
      return true;
    if (code == SQLITE_DONE)
      return false;
    throw_error(db_, what_);
  }
  /// Runs a statement to its end and readies it to run again with new bindings.
  void run() {
    while (step()) {
    }
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }

  std::string text(int column) const {
    const auto* bytes = sqlite3_column_text(statement_, column);
    if (bytes == nullptr)
      return {};
    return std::string(reinterpret_cast<const char*>(bytes),
                       static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
  }
  std::int64_t integer(int column) const { return sqlite3_column_int64(statement_, column); }
  double real(int column) const { return sqlite3_column_double(statement_, column); }
  json::object object(int column) const {
    boost::system::error_code error;
    json::value value = json::parse(text(column), error);
    if (error || !value.is_object())
      throw_problem(db_, fmt::format("a stored JSON column is not an object ({}): was the file "
                                     "changed by another program?",
                                     what_));
    return std::move(value.as_object());
  }

 private:
  void check(int code) {
    if (code != SQLITE_OK)
      throw_error(db_, what_);
  }
  Db db_;
  std::string what_;
  sqlite3_stmt* statement_ = nullptr;
};

// BEGIN IMMEDIATE: the write lock is taken (or waited for) up front, so a transaction never
// fails half-way for want of it. Rolled back unless commit() succeeded, also when COMMIT itself
// failed (a deferred foreign key, a busy reader) and left the transaction open.
class Transaction {
 public:
  explicit Transaction(const Db& db) : db_(db) {
    Statement(db_, "begin a transaction", "BEGIN IMMEDIATE").run();
  }
  ~Transaction() {
    if (open_ && sqlite3_get_autocommit(db_.handle) == 0)
      sqlite3_exec(db_.handle, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit(std::string_view what) {
    Statement(db_, what, "COMMIT").run();
    open_ = false;
  }

 private:
  Db db_;
  bool open_ = true;
};

struct Identity {
  std::int64_t application_id = 0;
  std::int64_t user_version = 0;
  std::int64_t schema_objects = 0;
  bool empty() const { return application_id == 0 && user_version == 0 && schema_objects == 0; }
};

std::int64_t single_integer(const Db& db, std::string_view what, std::string_view sql) {
  Statement statement(db, what, sql);
  if (!statement.step())
    throw_problem(db, fmt::format("{} gave no answer", sql));
  return statement.integer(0);
}

std::string single_text(const Db& db, std::string_view what, std::string_view sql) {
  Statement statement(db, what, sql);
  if (!statement.step())
    throw_problem(db, fmt::format("{} gave no answer", sql));
  return statement.text(0);
}

// Reading the header is also where a file that is not SQLite at all is found out.
Identity read_identity(const Db& db) {
  const std::string_view what = "read the database header";
  return {.application_id = single_integer(db, what, "PRAGMA application_id"),
          .user_version = single_integer(db, what, "PRAGMA user_version"),
          .schema_objects = single_integer(db, what, "SELECT count(*) FROM sqlite_schema")};
}

// Throws unless the identity is that of a rex gateway database this code can use.
void check_identity(const Db& db, const Identity& identity) {
  if (identity.application_id != kApplicationId)
    throw_problem(db, fmt::format("is not a rex gateway database (an SQLite database of another "
                                  "program: application_id {}, {} schema objects)",
                                  identity.application_id, identity.schema_objects));
  if (identity.user_version >= 1 && identity.user_version < kSchemaVersion)
    return;  // migrated by migrate_schema()
  if (identity.user_version > kSchemaVersion)
    throw_problem(db, fmt::format("has schema version {}, newer than this rex understands ({}): "
                                  "use the rex that wrote it",
                                  identity.user_version, kSchemaVersion));
  if (identity.user_version != kSchemaVersion)
    throw_problem(db, fmt::format("has schema version {}, which no rex writes (expected {})",
                                  identity.user_version, kSchemaVersion));
}

bool is_gateway_id(std::string_view id) {
  return id.size() == 16 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Runs the schema's steps after version `from`; a failure is told as `what`, else as the step's.
void run_schema_steps(const Db& db, std::int64_t from, const char* what = nullptr) {
  for (const SchemaStep& step : kSchemaSteps)
    if (step.version > from &&
        sqlite3_exec(db.handle, step.sql, nullptr, nullptr, nullptr) != SQLITE_OK)
      throw_error(db, what != nullptr ? what : step.what);
}

// Brings a file of an earlier version up to this one (inside the opening transaction).
void migrate_schema(const Db& db, std::int64_t from) {
  run_schema_steps(db, from);
  Statement(db, "mark the database", fmt::format("PRAGMA user_version = {}", kSchemaVersion)).run();
}

void create_schema(const Db& db) {
  if (sqlite3_exec(db.handle, kSchema, nullptr, nullptr, nullptr) != SQLITE_OK)
    throw_error(db, "create the schema");
  run_schema_steps(db, 1, "create the schema");
  Statement(db, "store the gateway id", "INSERT INTO meta (key, value) VALUES (?1, ?2)")
      .bind_text(1, kGatewayIdKey)
      .bind_text(2, random_hex(8))
      .run();
  // PRAGMA takes no bound parameters; these are this file's constants.
  Statement(db, "mark the database", fmt::format("PRAGMA application_id = {}", kApplicationId))
      .run();
  Statement(db, "mark the database", fmt::format("PRAGMA user_version = {}", kSchemaVersion)).run();
}

// Returns the gateway id after checking that the schema's tables are all there.
std::string check_schema(const Db& db) {
  std::set<std::string, std::less<>> tables;
  Statement list(db, "list the tables", "SELECT name FROM sqlite_schema WHERE type = 'table'");
  while (list.step())
    tables.insert(list.text(0));
  for (const std::string_view table : kTables) {
    if (!tables.contains(table))
      throw_problem(db, fmt::format("is damaged: its table {} is missing", table));
  }
  Statement id(db, "read the gateway id", "SELECT value FROM meta WHERE key = ?1");
  id.bind_text(1, kGatewayIdKey);
  std::string gateway_id = id.step() ? id.text(0) : std::string();
  if (!is_gateway_id(gateway_id))
    throw_problem(db,
                  fmt::format("is damaged: its gateway id '{}' is not 16 hex digits", gateway_id));
  return gateway_id;
}

struct CloseConnection {
  void operator()(sqlite3* handle) const { sqlite3_close_v2(handle); }
};

constexpr std::string_view kEventColumns =
    "SELECT id, time, tenant, session_id, type, actor, request_id, data FROM events ";

StoredEvent read_event(const Statement& row) {
  return {.id = row.integer(0),
          .time = row.real(1),
          .tenant = row.text(2),
          .session_id = row.text(3),
          .type = row.text(4),
          .actor = row.text(5),
          .request_id = row.text(6),
          .data = row.object(7)};
}

constexpr std::string_view kArtifactColumns =
    "SELECT session_id, name, path, size, sha256, created_at FROM artifacts ";

StoredArtifact read_artifact(const Statement& row) {
  return {.session_id = row.text(0),
          .name = row.text(1),
          .path = row.text(2),
          .sha256 = row.text(4),
          .size = static_cast<std::uint64_t>(row.integer(3)),
          .created_at = row.real(5)};
}

constexpr std::string_view kIdempotencyColumns =
    "SELECT tenant, key, body_hash, session_id FROM idempotency ";

IdempotencyKey read_idempotency_key(const Statement& row) {
  return {.tenant = row.text(0),
          .key = row.text(1),
          .body_hash = row.text(2),
          .session_id = row.text(3)};
}

constexpr std::string_view kSessionColumns = "SELECT id, tenant, state, record FROM sessions ";

StoredSession read_session(const Statement& row) {
  return {.id = row.text(0), .tenant = row.text(1), .state = row.text(2), .record = row.object(3)};
}

}  // namespace

Store::Store(const std::filesystem::path& file) : file_(file) {
  sqlite3* opened = nullptr;
  const int code =
      sqlite3_open_v2(file_.c_str(), &opened,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<sqlite3, CloseConnection> handle(opened);
  if (code != SQLITE_OK) {
    const std::string message = opened != nullptr ? sqlite3_errmsg(opened) : sqlite3_errstr(code);
    std::error_code ignored;
    const bool directory_exists = std::filesystem::is_directory(
        file_.has_parent_path() ? file_.parent_path() : std::filesystem::path("."), ignored);
    throw StoreError(fmt::format("gateway store {}: cannot open: {}{}", file_.string(), message,
                                 directory_exists ? "" : " (its directory does not exist)"));
  }
  const Db db{handle.get(), file_};
  sqlite3_extended_result_codes(db.handle, 1);
  sqlite3_busy_timeout(db.handle, kBusyTimeoutMs);

  // Refuse another program's file before changing anything in it (the journal mode included).
  if (const Identity identity = read_identity(db); !identity.empty())
    check_identity(db, identity);

  if (single_text(db, "switch to a WAL journal", "PRAGMA journal_mode = WAL") != "wal")
    throw_problem(db, "cannot use a WAL journal (is it on a file system without shared memory?)");
  Statement(db, "set synchronous = FULL", "PRAGMA synchronous = FULL").run();
  Statement(db, "turn foreign keys on", "PRAGMA foreign_keys = ON").run();

  // Checked again under the write lock: another process may have created it meanwhile.
  Transaction transaction(db);
  if (const Identity identity = read_identity(db); identity.empty()) {
    create_schema(db);
  } else {
    check_identity(db, identity);
    if (identity.user_version < kSchemaVersion)
      migrate_schema(db, identity.user_version);
  }
  gateway_id_ = check_schema(db);
  transaction.commit("create the schema");
  db_ = handle.release();
}

Store::~Store() {
  sqlite3_close_v2(db_);
}

Store::Store(Store&& other) noexcept
    : file_(std::move(other.file_)),
      db_(std::exchange(other.db_, nullptr)),
      gateway_id_(std::move(other.gateway_id_)) {}

Store& Store::operator=(Store&& other) noexcept {
  std::swap(file_, other.file_);
  std::swap(db_, other.db_);
  std::swap(gateway_id_, other.gateway_id_);
  return *this;
}

sqlite3* Store::connection() const {
  if (db_ == nullptr)
    throw StoreError(fmt::format("gateway store {}: used after it was moved from", file_.string()));
  return db_;
}

namespace {

// Inserts or replaces `rows` in `table` (a new id takes the next place in creation order, a
// replaced one keeps its place) and deletes the ids in `removed`; `kind` names them in errors.
void store_records(const Db& db, std::string_view kind, std::string_view table,
                   const std::vector<StoredRecord>& rows, const std::vector<std::string>& removed) {
  for (const StoredRecord& row : rows) {
    Statement(db, fmt::format("store {} {}", kind, row.id),
              fmt::format("INSERT INTO {0} (id, seq, tenant, state, record) "
                          "VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM {0}), ?2, ?3, ?4) "
                          "ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, "
                          "state = excluded.state, record = excluded.record",
                          table))
        .bind_text(1, row.id)
        .bind_text(2, row.tenant)
        .bind_text(3, row.state)
        .bind_json(4, row.record)
        .run();
  }
  for (const std::string& id : removed) {
    Statement(db, fmt::format("remove {} {}", kind, id),
              fmt::format("DELETE FROM {} WHERE id = ?1", table))
        .bind_text(1, id)
        .run();
  }
}

// Every row of `table`, in creation order.
std::vector<StoredRecord> load_records(const Db& db, std::string_view table) {
  Statement select(db, fmt::format("load the {}", table),
                   fmt::format("SELECT id, tenant, state, record FROM {} ORDER BY seq", table));
  std::vector<StoredRecord> out;
  while (select.step()) {
    StoredRecord row;
    row.id = select.text(0);
    row.tenant = select.text(1);
    row.state = select.text(2);
    row.record = select.object(3);
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

void Store::commit(Change& change) {
  const Db db{connection(), file_};
  if (!change.session && change.events.empty() && !change.idempotency && change.artifacts.empty() &&
      change.checkpoints.empty() && change.removed_checkpoints.empty() &&
      change.templates.empty() && change.removed_templates.empty())
    return;
  Transaction transaction(db);

  if (const auto& session = change.session) {
    // A new id takes the next place in creation order; a replaced one keeps its place.
    Statement(db, fmt::format("store session {}", session->id),
              "INSERT INTO sessions (id, seq, tenant, state, record) "
              "VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM sessions), ?2, ?3, ?4) "
              "ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, "
              "state = excluded.state, record = excluded.record")
        .bind_text(1, session->id)
        .bind_text(2, session->tenant)
        .bind_text(3, session->state)
        .bind_json(4, session->record)
        .run();
  }

  store_records(db, "checkpoint", "checkpoints", change.checkpoints, change.removed_checkpoints);
  store_records(db, "template", "templates", change.templates, change.removed_templates);

  std::vector<std::int64_t> event_ids;
  if (!change.events.empty()) {
    Statement insert(db, "append an event",
                     "INSERT INTO events (time, tenant, session_id, type, actor, request_id, data) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    event_ids.reserve(change.events.size());
    for (const StoredEvent& event : change.events) {
      insert.bind_real(1, event.time)
          .bind_text(2, event.tenant)
          .bind_text(3, event.session_id)
          .bind_text(4, event.type)
          .bind_text(5, event.actor)
          .bind_text(6, event.request_id)
          .bind_json(7, event.data)
          .run();
      event_ids.push_back(sqlite3_last_insert_rowid(db.handle));
    }
  }

  if (const auto& key = change.idempotency) {
    Statement(db, "store an idempotency key",
              "INSERT INTO idempotency (tenant, key, body_hash, session_id) "
              "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (tenant, key) DO NOTHING")
        .bind_text(1, key->tenant)
        .bind_text(2, key->key)
        .bind_text(3, key->body_hash)
        .bind_text(4, key->session_id)
        .run();
    if (sqlite3_changes(db.handle) == 0)
      throw DuplicateIdempotencyKey(
          fmt::format("gateway store {}: idempotency key '{}' of tenant '{}' is already recorded",
                      file_.string(), key->key, key->tenant));
  }

  if (!change.artifacts.empty()) {
    Statement upsert(db, "store an artifact",
                     "INSERT INTO artifacts (session_id, name, path, size, sha256, created_at) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id, name) DO UPDATE "
                     "SET path = excluded.path, size = excluded.size, sha256 = excluded.sha256, "
                     "created_at = excluded.created_at");
    for (const StoredArtifact& artifact : change.artifacts) {
      if (artifact.size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw_problem(db,
                      fmt::format("artifact '{}' of session {} is too large to record ({} bytes)",
                                  artifact.name, artifact.session_id, artifact.size));
      upsert.bind_text(1, artifact.session_id)
          .bind_text(2, artifact.name)
          .bind_text(3, artifact.path)
          .bind_int(4, static_cast<std::int64_t>(artifact.size))
          .bind_text(5, artifact.sha256)
          .bind_real(6, artifact.created_at)
          .run();
    }
  }

  transaction.commit("commit the change");
  for (std::size_t i = 0; i < event_ids.size(); ++i)
    change.events[i].id = event_ids[i];
}

std::vector<StoredSession> Store::load_sessions() const {
  const Db db{connection(), file_};
  Statement select(db, "load the sessions", fmt::format("{}ORDER BY seq", kSessionColumns));
  std::vector<StoredSession> sessions;
  while (select.step())
    sessions.push_back(read_session(select));
  return sessions;
}

std::vector<StoredCheckpoint> Store::load_checkpoints() const {
  return load_records(Db{connection(), file_}, "checkpoints");
}

std::vector<StoredTemplate> Store::load_templates() const {
  return load_records(Db{connection(), file_}, "templates");
}

std::optional<StoredSession> Store::session(std::string_view id) const {
  const Db db{connection(), file_};
  Statement select(db, "load a session", fmt::format("{}WHERE id = ?1", kSessionColumns));
  select.bind_text(1, id);
  if (!select.step())
    return std::nullopt;
  return read_session(select);
}

std::optional<IdempotencyKey> Store::idempotency(std::string_view tenant,
                                                 std::string_view key) const {
  const Db db{connection(), file_};
  Statement select(db, "look up an idempotency key",
                   fmt::format("{}WHERE tenant = ?1 AND key = ?2", kIdempotencyColumns));
  select.bind_text(1, tenant).bind_text(2, key);
  if (!select.step())
    return std::nullopt;
  return read_idempotency_key(select);
}

std::vector<IdempotencyKey> Store::idempotency_keys() const {
  const Db db{connection(), file_};
  Statement select(db, "load the idempotency keys", kIdempotencyColumns);
  std::vector<IdempotencyKey> keys;
  while (select.step())
    keys.push_back(read_idempotency_key(select));
  return keys;
}

std::vector<StoredEvent> Store::events_after(std::int64_t after,
                                             const std::optional<std::string>& tenant,
                                             std::size_t limit,
                                             const std::optional<std::string>& session) const {
  const Db db{connection(), file_};
  std::vector<StoredEvent> events;
  if (limit == 0)
    return events;
  const auto bounded = static_cast<std::int64_t>(
      std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max()));
  // Conditions written only when given, rather than "?3 IS NULL OR tenant = ?3", which would keep
  // SQLite from using the indexes (by session, else by tenant).
  Statement select(
      db, "read events",
      fmt::format("{}WHERE id > ?1{}{} ORDER BY id LIMIT ?2", kEventColumns,
                  tenant ? " AND tenant = ?3" : "", session ? " AND session_id = ?4" : ""));
  select.bind_int(1, after).bind_int(2, bounded);
  if (tenant)
    select.bind_text(3, *tenant);
  if (session)
    select.bind_text(4, *session);
  while (select.step())
    events.push_back(read_event(select));
  return events;
}

std::int64_t Store::last_event_id() const {
  const Db db{connection(), file_};
  return single_integer(db, "read the last event id", "SELECT coalesce(max(id), 0) FROM events");
}

std::vector<StoredArtifact> Store::artifacts(std::string_view session_id) const {
  const Db db{connection(), file_};
  Statement select(db, "list artifacts",
                   fmt::format("{}WHERE session_id = ?1 ORDER BY name", kArtifactColumns));
  select.bind_text(1, session_id);
  std::vector<StoredArtifact> artifacts;
  while (select.step())
    artifacts.push_back(read_artifact(select));
  return artifacts;
}

std::optional<StoredArtifact> Store::artifact(std::string_view session_id,
                                              std::string_view name) const {
  const Db db{connection(), file_};
  Statement select(db, "look up an artifact",
                   fmt::format("{}WHERE session_id = ?1 AND name = ?2", kArtifactColumns));
  select.bind_text(1, session_id).bind_text(2, name);
  if (!select.step())
    return std::nullopt;
  return read_artifact(select);
}

std::uint64_t Store::artifact_bytes(std::string_view tenant) const {
  const Db db{connection(), file_};
  Statement select(
      db, "sum a tenant's artifacts",
      "SELECT coalesce(sum(artifacts.size), 0) FROM artifacts "
      "JOIN sessions ON sessions.id = artifacts.session_id WHERE sessions.tenant = ?1");
  select.bind_text(1, tenant);
  select.step();
  return static_cast<std::uint64_t>(select.integer(0));
}

StorePragmas Store::pragmas() const {
  const Db db{connection(), file_};
  const std::string_view what = "read the connection's settings";
  return {.journal_mode = single_text(db, what, "PRAGMA journal_mode"),
          .synchronous = static_cast<int>(single_integer(db, what, "PRAGMA synchronous")),
          .foreign_keys = single_integer(db, what, "PRAGMA foreign_keys") != 0,
          .busy_timeout_ms = static_cast<int>(single_integer(db, what, "PRAGMA busy_timeout"))};
}

}  // namespace rex::gateway
