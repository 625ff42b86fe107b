// The gateway's SQLite store on real files: the gateway id that outlives reopening, records and
// events and artifacts round-tripped, creation order, event ids, idempotency keys, all-or-nothing
// commits, durability across instances and a killed process, and the files it refuses to open.
#include <rex/gateway/store.hpp>

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gateway/session_record.hpp"
#include "support/sanitizers.hpp"
#include "support/test_helpers.hpp"

namespace rex::gateway {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

// A second, plain connection to the file, to look at it (and spoil it) behind the Store's back.
class RawDatabase {
 public:
  explicit RawDatabase(const fs::path& file) {
    if (sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK)
      throw std::runtime_error("cannot open " + file.string());
  }
  ~RawDatabase() { sqlite3_close_v2(db_); }
  RawDatabase(const RawDatabase&) = delete;
  RawDatabase& operator=(const RawDatabase&) = delete;

  void exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error != nullptr ? error : "?";
      sqlite3_free(error);
      throw std::runtime_error(sql + ": " + message);
    }
  }
  /// The first column of the first row, as text.
  std::string query(const std::string& sql) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    std::string value;
    if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0) != nullptr)
      value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    sqlite3_finalize(statement);
    return value;
  }
  /// How SQLite would run `sql`: the detail column of EXPLAIN QUERY PLAN, a line per step.
  std::string plan(const std::string& sql) {
    sqlite3_stmt* statement = nullptr;
    const std::string explain = "EXPLAIN QUERY PLAN " + sql;
    if (sqlite3_prepare_v2(db_, explain.c_str(), -1, &statement, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
    std::string steps;
    while (sqlite3_step(statement) == SQLITE_ROW)
      if (const unsigned char* detail = sqlite3_column_text(statement, 3))
        steps += std::string(reinterpret_cast<const char*>(detail)) + '\n';
    sqlite3_finalize(statement);
    return steps;
  }

 private:
  sqlite3* db_ = nullptr;
};

StoredSession make_session(std::string id, std::string tenant = "default",
                           std::string state = "creating") {
  json::object record{{"session_id", id}, {"state", state}, {"provider", "local"}};
  return {.id = std::move(id),
          .tenant = std::move(tenant),
          .state = std::move(state),
          .record = std::move(record)};
}

StoredEvent make_event(std::string type, std::string tenant, std::string session_id) {
  return {.time = 1700000000.25,
          .tenant = std::move(tenant),
          .session_id = std::move(session_id),
          .type = std::move(type),
          .actor = "key:alice",
          .request_id = "req-1",
          .data = {{"reason", "test"}}};
}

StoredArtifact make_artifact(std::string session_id, std::string name, std::uint64_t size) {
  return {.session_id = std::move(session_id),
          .name = name,
          .path = "/work/" + name,
          .sha256 = std::string(64, 'a'),
          .size = size,
          .created_at = 1700000001.5};
}

Change session_change(StoredSession session) {
  Change change;
  change.session = std::move(session);
  return change;
}

void commit_session(Store& store, StoredSession session) {
  Change change = session_change(std::move(session));
  store.commit(change);
}

std::vector<std::string> ids(const std::vector<StoredSession>& sessions) {
  std::vector<std::string> out;
  for (const auto& session : sessions)
    out.push_back(session.id);
  return out;
}

std::vector<std::int64_t> ids(const std::vector<StoredEvent>& events) {
  std::vector<std::int64_t> out;
  for (const auto& event : events)
    out.push_back(event.id);
  return out;
}

TEST(Store, CreatesTheFileWithAGatewayIdThatOutlivesReopening) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  std::string id;
  {
    Store store(file);
    EXPECT_EQ(store.file(), file);
    EXPECT_TRUE(fs::exists(file));
    id = store.gateway_id();
    ASSERT_EQ(id.size(), 16u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  }
  EXPECT_EQ(Store(file).gateway_id(), id);
  EXPECT_NE(Store(fs::path(dir.path()) / "other").gateway_id(), id);
}

TEST(Store, RunsWalWithFullSyncForeignKeysAndABusyTimeout) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  Store store(file);
  const StorePragmas pragmas = store.pragmas();
  EXPECT_EQ(pragmas.journal_mode, "wal");
  EXPECT_EQ(pragmas.synchronous, 2);  // FULL
  EXPECT_TRUE(pragmas.foreign_keys);
  EXPECT_EQ(pragmas.busy_timeout_ms, 5000);

  RawDatabase raw(file);
  EXPECT_EQ(raw.query("PRAGMA journal_mode"), "wal");  // kept in the file itself
  EXPECT_EQ(raw.query("PRAGMA user_version"), "4");
  EXPECT_EQ(raw.query("PRAGMA application_id"), std::to_string(0x72657867));
}

// A file as a rex of schema `version` left it: session s1 of acme and its `created` event,
// without what the later versions add.
void write_file_of_version(const fs::path& file, int version) {
  {
    Store store(file);
    Change change;
    change.session = make_session("s1", "acme", "ready");
    change.events = {make_event("created", "acme", "s1")};
    store.commit(change);
  }
  // What each version after the first added, undone.
  const std::pair<int, const char*> added[] = {{2, "DROP TABLE checkpoints;"},
                                               {3, "DROP TABLE templates;"},
                                               {4, "DROP INDEX events_session;"}};
  std::string sql;
  for (const auto& [since, undo] : added)
    if (since > version)
      sql += undo;
  RawDatabase(file).exec(sql + "PRAGMA user_version = " + std::to_string(version));
}

// A file of version 1 (before checkpoints) gains the checkpoints table and keeps its sessions.
TEST(Store, MigratesAVersionOneFileAndRoundTripsCheckpoints) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  write_file_of_version(file, 1);
  {
    Store store(file);
    EXPECT_EQ(store.load_sessions().size(), 1u);
    Change change;
    change.checkpoints.push_back(StoredCheckpoint{
        "ckpt-1", "acme", "ready", json::parse(R"({"id":"ckpt-1","session":"s1"})").as_object()});
    change.checkpoints.push_back(StoredCheckpoint{"ckpt-2", "acme", "creating", {}});
    store.commit(change);
    Change removal;
    removal.removed_checkpoints.push_back("ckpt-2");
    store.commit(removal);
  }
  EXPECT_EQ(RawDatabase(file).query("PRAGMA user_version"), "4");
  Store store(file);
  const auto checkpoints = store.load_checkpoints();
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_EQ(checkpoints[0].id, "ckpt-1");
  EXPECT_EQ(checkpoints[0].tenant, "acme");
  EXPECT_EQ(checkpoints[0].state, "ready");
  EXPECT_EQ(checkpoints[0].record.at("session").as_string(), "s1");
}

// A file of version 2 (before templates) gains the templates table; templates round-trip.
TEST(Store, MigratesAVersionTwoFileAndRoundTripsTemplates) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  write_file_of_version(file, 2);
  {
    Store store(file);
    EXPECT_EQ(store.load_sessions().size(), 1u);
    Change change;
    change.templates.push_back(StoredTemplate{
        "tpl-1", "acme", "ready", json::parse(R"({"id":"tpl-1","names":["t"]})").as_object()});
    change.templates.push_back(StoredTemplate{"tpl-2", "acme", "building", {}});
    store.commit(change);
    Change removal;
    removal.removed_templates.push_back("tpl-2");
    store.commit(removal);
  }
  EXPECT_EQ(RawDatabase(file).query("PRAGMA user_version"), "4");
  Store store(file);
  const auto templates = store.load_templates();
  ASSERT_EQ(templates.size(), 1u);
  EXPECT_EQ(templates[0].id, "tpl-1");
  EXPECT_EQ(templates[0].state, "ready");
  EXPECT_EQ(templates[0].record.at("names").as_array().at(0).as_string(), "t");
}

TEST(Store, RoundTripsSessionRecords) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  StoredSession session = make_session("s1", "acme", "ready");
  session.record = json::parse(R"({
    "session_id": "s1", "state": "ready", "timeout": 300.5, "counters": {"executes": 3},
    "metadata": {"labels": ["a", "b"], "nested": {"deep": [1, {"x": null}, true]}},
    "text": "caf\u00e9 \"quoted\" \n line"
  })")
                       .as_object();
  commit_session(store, session);

  const auto loaded = store.session("s1");
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->id, "s1");
  EXPECT_EQ(loaded->tenant, "acme");
  EXPECT_EQ(loaded->state, "ready");
  EXPECT_EQ(loaded->record, session.record);
  EXPECT_FALSE(store.session("nope"));

  const auto all = store.load_sessions();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].record, session.record);
}

// A record's times print the same after its stored form is read back (a gateway's restart):
// Boost.JSON 1.81 reads some doubles back a few units in the last place off. 200,000 random
// times (20,000 under the sanitizers: 200,000 outlast a unit test's 60 s in the -O0 ASan build).
TEST(Store, RecordTimesPrintTheSameAfterTheirStoredFormIsReadBack) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> when(1.7e9, 1.9e9);
  int moved = 0;
  constexpr int kTimes = REX_TEST_SANITIZED ? 20'000 : 200'000;
  for (int i = 0; i < kTimes; ++i) {
    SessionRecord r;
    r.created_at = recorded_time(when(rng));
    r.max_lifetime = 3600;
    r.last_active = recorded_time(when(rng));
    r.idle_timeout = 300;
    const auto back =
        SessionRecord::from_json(json::parse(json::serialize(r.to_json())).as_object());
    if (iso_time(back.deadline()) != iso_time(r.deadline()) ||
        iso_time(back.idle_deadline()) != iso_time(r.idle_deadline()))
      ++moved;
  }
  EXPECT_EQ(moved, 0);
  EXPECT_EQ(iso_time(recorded_time(1764336631.4395001)), "2025-11-28T13:30:31.440Z");
}

TEST(Store, ReplacingASessionKeepsItsPlaceInCreationOrder) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  for (const char* id : {"c", "a", "b"})
    commit_session(store, make_session(id));
  commit_session(store, make_session("c", "default", "destroyed"));
  commit_session(store, make_session("d"));

  const auto sessions = store.load_sessions();
  EXPECT_EQ(ids(sessions), (std::vector<std::string>{"c", "a", "b", "d"}));
  EXPECT_EQ(sessions[0].state, "destroyed");
  EXPECT_EQ(sessions[0].record.at("state"), "destroyed");
}

TEST(Store, EventsGetIncreasingIdsWrittenBack) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  EXPECT_EQ(store.last_event_id(), 0);
  EXPECT_TRUE(store.events_after(0, std::nullopt, 10).empty());

  Change first = session_change(make_session("s1", "acme"));
  first.events = {make_event("created", "acme", "s1"), make_event("ready", "acme", "s1")};
  first.events[0].id = 77;  // ignored: the store assigns ids
  store.commit(first);
  ASSERT_GT(first.events[0].id, 0);
  EXPECT_GT(first.events[1].id, first.events[0].id);

  Change second;
  second.events = {make_event("quota_refused", "other", "")};
  store.commit(second);
  EXPECT_GT(second.events[0].id, first.events[1].id);
  EXPECT_EQ(store.last_event_id(), second.events[0].id);

  const auto events = store.events_after(0, std::nullopt, 10);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].id, first.events[0].id);
  EXPECT_EQ(events[0].type, "created");
  EXPECT_EQ(events[0].tenant, "acme");
  EXPECT_EQ(events[0].session_id, "s1");
  EXPECT_EQ(events[0].actor, "key:alice");
  EXPECT_EQ(events[0].request_id, "req-1");
  EXPECT_DOUBLE_EQ(events[0].time, 1700000000.25);
  EXPECT_EQ(events[0].data, (json::object{{"reason", "test"}}));
  EXPECT_EQ(events[2].session_id, "");
}

TEST(Store, EventsAfterFiltersByTenantAndLimitAndResumes) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  Change change;
  for (int i = 0; i < 6; ++i)
    change.events.push_back(make_event(std::to_string(i), i % 2 == 0 ? "acme" : "other", ""));
  store.commit(change);
  const auto all = ids(change.events);

  EXPECT_EQ(ids(store.events_after(0, std::nullopt, 100)), all);
  EXPECT_EQ(ids(store.events_after(0, std::nullopt, 2)), (std::vector{all[0], all[1]}));
  EXPECT_EQ(ids(store.events_after(all[1], std::nullopt, 2)), (std::vector{all[2], all[3]}));
  EXPECT_EQ(ids(store.events_after(all[5], std::nullopt, 2)), std::vector<std::int64_t>{});
  EXPECT_TRUE(store.events_after(0, std::nullopt, 0).empty());

  const std::optional<std::string> acme = "acme";
  EXPECT_EQ(ids(store.events_after(0, acme, 100)), (std::vector{all[0], all[2], all[4]}));
  EXPECT_EQ(ids(store.events_after(0, acme, 2)), (std::vector{all[0], all[2]}));
  EXPECT_EQ(ids(store.events_after(all[2], acme, 2)), (std::vector{all[4]}));
  EXPECT_EQ(ids(store.events_after(all[1], std::string("other"), 100)),
            (std::vector{all[3], all[5]}));
  EXPECT_TRUE(store.events_after(0, std::string("nobody"), 100).empty());
}

// One session's events, through the index by session (not by reading the tenant's).
TEST(Store, EventsAfterFiltersBySessionThroughItsIndex) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  Store store(file);
  Change change;
  for (int i = 0; i < 6; ++i)
    change.events.push_back(
        make_event(std::to_string(i), i < 4 ? "acme" : "other", i % 2 == 0 ? "s1" : "s2"));
  store.commit(change);
  const auto all = ids(change.events);
  const std::optional<std::string> s1 = "s1";
  EXPECT_EQ(ids(store.events_after(0, std::nullopt, 100, s1)),
            (std::vector{all[0], all[2], all[4]}));
  EXPECT_EQ(ids(store.events_after(0, std::string("acme"), 100, s1)),
            (std::vector{all[0], all[2]}));
  EXPECT_EQ(ids(store.events_after(all[0], std::string("acme"), 1, s1)), (std::vector{all[2]}));
  EXPECT_EQ(ids(store.events_after(0, std::string("other"), 100, std::string("s2"))),
            (std::vector{all[5]}));
  EXPECT_TRUE(store.events_after(0, std::nullopt, 100, std::string("s3")).empty());

  RawDatabase raw(file);
  const std::string plan = raw.plan(
      "SELECT id FROM events WHERE id > 0 AND tenant = 'acme' AND "
      "session_id = 's1' ORDER BY id LIMIT 500");
  EXPECT_NE(plan.find("events_session"), std::string::npos) << plan;
}

// A file of version 3 (before the events' index by session) gains it, and keeps its events.
TEST(Store, MigratesAVersionThreeFileAndIndexesEventsBySession) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  write_file_of_version(file, 3);
  EXPECT_EQ(
      RawDatabase(file).query("SELECT count(*) FROM sqlite_schema WHERE name = 'events_session'"),
      "0");
  Store store(file);
  EXPECT_EQ(RawDatabase(file).query("PRAGMA user_version"), "4");
  EXPECT_EQ(
      RawDatabase(file).query("SELECT count(*) FROM sqlite_schema WHERE name = 'events_session'"),
      "1");
  EXPECT_EQ(store.events_after(0, std::nullopt, 10, std::string("s1")).size(), 1u);
}

TEST(Store, EventIdsAreNeverReused) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  std::int64_t last = 0;
  {
    Store store(file);
    Change change;
    change.events = {make_event("a", "t", ""), make_event("b", "t", "")};
    store.commit(change);
    last = change.events[1].id;
  }
  RawDatabase(file).exec("DELETE FROM events");  // what a future pruning would do
  Store store(file);
  EXPECT_EQ(store.last_event_id(), 0);
  Change change;
  change.events = {make_event("c", "t", "")};
  store.commit(change);
  EXPECT_GT(change.events[0].id, last);
}

TEST(Store, RecordsAndLooksUpIdempotencyKeys) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  Change change = session_change(make_session("s1", "acme"));
  change.idempotency =
      IdempotencyKey{.tenant = "acme", .key = "create-1", .body_hash = "h1", .session_id = "s1"};
  store.commit(change);

  const auto found = store.idempotency("acme", "create-1");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->tenant, "acme");
  EXPECT_EQ(found->key, "create-1");
  EXPECT_EQ(found->body_hash, "h1");
  EXPECT_EQ(found->session_id, "s1");
  EXPECT_FALSE(store.idempotency("other", "create-1"));  // keys are per tenant
  EXPECT_FALSE(store.idempotency("acme", "create-2"));

  // All of them, as a restarted gateway loads them, body hashes included.
  Change other = session_change(make_session("s2", "beta"));
  other.idempotency =
      IdempotencyKey{.tenant = "beta", .key = "create-1", .body_hash = "h2", .session_id = "s2"};
  store.commit(other);
  auto keys = Store(fs::path(dir.path()) / "sessions").idempotency_keys();
  std::sort(keys.begin(), keys.end(),
            [](const IdempotencyKey& a, const IdempotencyKey& b) { return a.tenant < b.tenant; });
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ((std::vector<std::string>{keys[0].tenant, keys[0].key, keys[0].body_hash,
                                      keys[0].session_id}),
            (std::vector<std::string>{"acme", "create-1", "h1", "s1"}));
  EXPECT_EQ((std::vector<std::string>{keys[1].tenant, keys[1].key, keys[1].body_hash,
                                      keys[1].session_id}),
            (std::vector<std::string>{"beta", "create-1", "h2", "s2"}));
}

TEST(Store, ADuplicateIdempotencyKeyWritesNothingOfItsChange) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  Change first = session_change(make_session("s1", "acme"));
  first.events = {make_event("created", "acme", "s1")};
  first.idempotency =
      IdempotencyKey{.tenant = "acme", .key = "create-1", .body_hash = "h1", .session_id = "s1"};
  store.commit(first);
  const std::int64_t last = store.last_event_id();

  Change second = session_change(make_session("s2", "acme"));
  second.events = {make_event("created", "acme", "s2")};
  second.idempotency =
      IdempotencyKey{.tenant = "acme", .key = "create-1", .body_hash = "h2", .session_id = "s2"};
  second.artifacts = {make_artifact("s2", "out.txt", 10)};
  EXPECT_THROW_CONTAINING(store.commit(second), DuplicateIdempotencyKey, "create-1");
  EXPECT_THROW(store.commit(second), StoreError);  // the type the interface promises

  EXPECT_FALSE(store.session("s2"));
  EXPECT_EQ(ids(store.load_sessions()), std::vector<std::string>{"s1"});
  EXPECT_EQ(store.last_event_id(), last);
  EXPECT_EQ(second.events[0].id, 0);  // not written back
  EXPECT_TRUE(store.artifacts("s2").empty());
  EXPECT_EQ(store.idempotency("acme", "create-1")->session_id, "s1");

  // The store is still usable, and a later event takes an id past the rolled-back one.
  Change third;
  third.events = {make_event("later", "acme", "")};
  store.commit(third);
  EXPECT_GT(third.events[0].id, last);
}

TEST(Store, AChangeNamingAnUnknownSessionWritesNothing) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  Change change;
  change.events = {make_event("copied", "acme", "ghost")};
  change.artifacts = {make_artifact("ghost", "out.txt", 10)};
  EXPECT_THROW_CONTAINING(store.commit(change), StoreError, "FOREIGN KEY");
  EXPECT_EQ(store.last_event_id(), 0);
  EXPECT_TRUE(store.artifacts("ghost").empty());

  Change key;
  key.idempotency = IdempotencyKey{.tenant = "t", .key = "k", .body_hash = "h", .session_id = "x"};
  EXPECT_THROW(store.commit(key), StoreError);
  EXPECT_FALSE(store.idempotency("t", "k"));
}

TEST(Store, PartsOfAChangeMayComeInAnyOrderWithinIt) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  // The session is written first, but the foreign keys are checked at commit in any case.
  Change change = session_change(make_session("s1"));
  change.artifacts = {make_artifact("s1", "a", 1)};
  change.idempotency =
      IdempotencyKey{.tenant = "default", .key = "k", .body_hash = "h", .session_id = "s1"};
  EXPECT_NO_THROW(store.commit(change));
  EXPECT_TRUE(store.artifact("s1", "a"));
}

TEST(Store, StoresReplacesAndSumsArtifacts) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  commit_session(store, make_session("a1", "acme"));
  commit_session(store, make_session("a2", "acme"));
  commit_session(store, make_session("o1", "other"));
  EXPECT_EQ(store.artifact_bytes("acme"), 0u);

  Change change;
  change.artifacts = {make_artifact("a1", "zeta.log", 100), make_artifact("a1", "alpha.txt", 20),
                      make_artifact("a2", "out.bin", 3), make_artifact("o1", "big", 5000)};
  store.commit(change);

  const auto listed = store.artifacts("a1");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name, "alpha.txt");  // by name
  EXPECT_EQ(listed[1].name, "zeta.log");
  EXPECT_EQ(listed[0].session_id, "a1");
  EXPECT_EQ(listed[0].path, "/work/alpha.txt");
  EXPECT_EQ(listed[0].sha256, std::string(64, 'a'));
  EXPECT_EQ(listed[0].size, 20u);
  EXPECT_DOUBLE_EQ(listed[0].created_at, 1700000001.5);
  EXPECT_TRUE(store.artifacts("nope").empty());
  EXPECT_EQ(store.artifact_bytes("acme"), 123u);
  EXPECT_EQ(store.artifact_bytes("other"), 5000u);
  EXPECT_EQ(store.artifact_bytes("nobody"), 0u);

  StoredArtifact replaced = make_artifact("a1", "zeta.log", 7);
  replaced.sha256 = std::string(64, 'b');
  change.artifacts = {replaced};
  store.commit(change);
  const auto got = store.artifact("a1", "zeta.log");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size, 7u);
  EXPECT_EQ(got->sha256, std::string(64, 'b'));
  EXPECT_EQ(store.artifacts("a1").size(), 2u);
  EXPECT_EQ(store.artifact_bytes("acme"), 30u);
  EXPECT_FALSE(store.artifact("a1", "missing"));
  EXPECT_FALSE(store.artifact("a2", "zeta.log"));
}

TEST(Store, AnEmptyChangeWritesNothing) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  Change change;
  store.commit(change);
  EXPECT_TRUE(store.load_sessions().empty());
  EXPECT_EQ(store.last_event_id(), 0);
}

TEST(Store, DataSurvivesReopeningAndIsSharedBetweenInstances) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  std::int64_t event_id = 0;
  {
    Store store(file);
    Change change = session_change(make_session("s1", "acme", "ready"));
    change.events = {make_event("ready", "acme", "s1")};
    change.idempotency =
        IdempotencyKey{.tenant = "acme", .key = "k", .body_hash = "h", .session_id = "s1"};
    change.artifacts = {make_artifact("s1", "out.txt", 42)};
    store.commit(change);
    event_id = change.events[0].id;

    Store second(file);  // a second connection sees what the first committed
    EXPECT_TRUE(second.session("s1"));
    commit_session(second, make_session("s2", "acme"));
    EXPECT_TRUE(store.session("s2"));
  }
  Store store(file);
  EXPECT_EQ(ids(store.load_sessions()), (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(store.session("s1")->state, "ready");
  EXPECT_EQ(store.last_event_id(), event_id);
  EXPECT_EQ(store.idempotency("acme", "k")->session_id, "s1");
  EXPECT_EQ(store.artifact_bytes("acme"), 42u);
}

TEST(Store, ACommitSurvivesItsProcessBeingKilled) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  { Store created(file); }  // created here, so the child only commits
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      Store store(file);
      commit_session(store, make_session("acknowledged", "default", "ready"));
      ::raise(SIGKILL);  // dies with the database open, as kill -9 leaves it
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_TRUE(fs::exists(fs::path(file.string() + "-wal")));  // recovered from the log
  const auto session = Store(file).session("acknowledged");
  ASSERT_TRUE(session);
  EXPECT_EQ(session->state, "ready");
}

TEST(Store, ItsDescriptorsAreCloseOnExec) {
  test::TempDir dir;
  Store store(fs::path(dir.path()) / "sessions");
  commit_session(store, make_session("s1"));
  int seen = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const fs::path target = fs::read_symlink(entry.path(), error);
    if (error || target.string().rfind(dir.path(), 0) != 0)
      continue;
    ++seen;
    const int fd = std::stoi(entry.path().filename().string());
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << target;
  }
  EXPECT_GE(seen, 2);  // the database and its WAL at least
}

TEST(Store, RefusesAFileThatIsNotADatabase) {
  test::TempDir dir;
  const std::string garbage(4096, '\x5a');
  const std::string file = dir.file("sessions", "this is no database\n" + garbage);
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, file);
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, "not a database");
  EXPECT_EQ(test::read_text(file), "this is no database\n" + garbage);  // left as it was

  const std::string tiny = dir.file("tiny", "xyz");
  EXPECT_THROW_CONTAINING(Store{tiny}, StoreError, tiny);
}

TEST(Store, RefusesAnotherProgramsDatabase) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "theirs.db";
  RawDatabase(file).exec("CREATE TABLE accounts (name TEXT); INSERT INTO accounts VALUES ('x')");
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, file.string());
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, "not a rex gateway database");
  RawDatabase raw(file);
  EXPECT_EQ(raw.query("PRAGMA journal_mode"), "delete");  // not switched to WAL
  EXPECT_EQ(raw.query("SELECT count(*) FROM sqlite_schema"), "1");
}

TEST(Store, RefusesANewerSchemaVersion) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  { Store store(file); }
  RawDatabase(file).exec("PRAGMA user_version = 99");
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, file.string());
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, "schema version 99, newer");
}

TEST(Store, RefusesADamagedDatabase) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  { Store store(file); }
  RawDatabase(file).exec("DROP TABLE artifacts");
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, "table artifacts is missing");
}

TEST(Store, SaysWhenTheDirectoryIsMissing) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "absent" / "sessions";
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, file.string());
  EXPECT_THROW_CONTAINING(Store{file}, StoreError, "directory does not exist");
  EXPECT_FALSE(fs::exists(file.parent_path()));
}

TEST(Store, MovesAndRefusesUseAfterMove) {
  test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "sessions";
  Store first(file);
  const std::string id = first.gateway_id();
  Store moved(std::move(first));
  EXPECT_EQ(moved.gateway_id(), id);
  EXPECT_EQ(moved.file(), file);
  commit_session(moved, make_session("s1"));
  EXPECT_THROW_CONTAINING(first.load_sessions(), StoreError, "moved from");  // NOLINT

  Store other(fs::path(dir.path()) / "other");
  other = std::move(moved);
  EXPECT_EQ(other.gateway_id(), id);
  EXPECT_TRUE(other.session("s1"));
}

}  // namespace
}  // namespace rex::gateway
