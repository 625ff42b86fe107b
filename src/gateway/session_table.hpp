// The sessions a gateway knows, in memory: every record (ended ones too) with what the gateway
// holds beside it, the index of the Idempotency-Keys creates came with, and each tenant's window
// of recent creates. Nothing here does I/O or reads a clock: the gateway loads the table from its
// store at start, asks it to admit each create at a time it passes in, and writes what changes
// through the store itself. Unit-tested in tests/unit/test_session_table.cpp.
#pragma once

#include <rex/core/event.hpp>
#include <rex/gateway/store.hpp>
#include <rex/runtime/remote_runtime.hpp>
#include <rex/server/route_table.hpp>

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/unique_fd.hpp"
#include "gateway/lifecycle.hpp"
#include "gateway/notebook.hpp"
#include "gateway/session_record.hpp"

namespace rex::gateway {

/// The connection to a ready session's sandbox (made when first needed, not stored).
struct Live {
  std::unique_ptr<RemoteRuntime> runtime;
  std::unique_ptr<Notebook> notebook;
  std::optional<server::RouteTable> swerex;  // SWE-ReX's routes over `runtime`
  rex::detail::UniqueFd transcript;          // the session's log, open for appending
};

struct Entry {
  explicit Entry(asio::any_io_executor ex) : settled(std::move(ex)) {}
  SessionRecord rec;
  std::shared_ptr<Live> live;
  Event settled;                  // set while the session is neither creating nor stopping
  double persisted_activity = 0;  // last_active as last committed
  std::string body_hash;          // of the create request (idempotency)
  bool stopping_now = false;      // finish_stop() is running for it
  bool shell_started = false;     // the provider started the notebook's shell (a spare)
  // A checkpoint, rewind, pause or resume of it is under way (another is refused meanwhile).
  std::string operation;
};

/// A tenant's limits (GatewayConfig's, or its tenant entry's).
struct Quota {
  std::size_t max_sessions = 0;  // 0: unlimited
  double creates_per_minute = 0;
  std::uint64_t max_storage_bytes = 0;
};

/// A create as the table admits it.
struct CreateRequest {
  std::string tenant;
  std::string key;        // its Idempotency-Key; empty: none
  std::string body_hash;  // of the request's body and provider
  Quota quota;
  double now = 0;  // unix seconds
};

class SessionTable {
 public:
  using Map = std::map<std::string, Entry, std::less<>>;

  explicit SessionTable(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  Entry* find(std::string_view id);
  const Entry* find(std::string_view id) const;
  /// The entry of `id`; std::out_of_range naming it when there is none.
  Entry& at(std::string_view id);
  bool contains(std::string_view id) const { return find(id) != nullptr; }
  std::size_t size() const { return entries_.size(); }
  Map::iterator begin() { return entries_.begin(); }
  Map::iterator end() { return entries_.end(); }
  Map::const_iterator begin() const { return entries_.begin(); }
  Map::const_iterator end() const { return entries_.end(); }

  /// The tenant's active sessions (creating, ready, stopping).
  std::size_t active_of(std::string_view tenant) const;
  /// The session an Idempotency-Key of the tenant made, if it made one.
  std::optional<std::string> session_of_key(std::string_view tenant, std::string_view key) const;

  /// Admission of a create (lifecycle::decide_create over this table): a key used before
  /// answers its session (or 422 for another body), then the quotas. An admitted create is
  /// counted in its tenant's window at once, so creates admitted together cannot pass a quota
  /// together; the caller then opens its entry.
  lifecycle::CreateDecision admit(const CreateRequest& ask);
  /// Admission of `count` creates together (a fork): all of them, or none (the refusal of the
  /// first that the quotas would refuse). They carry no key.
  std::optional<ApiError> admit_many(const CreateRequest& ask, std::size_t count);
  /// The entry of an admitted create, its key bound to it (a repeat of the key now answers it).
  Entry& open(const std::string& id, const CreateRequest& ask);
  /// Unbinds a key whose session could not be recorded: the key is free for a new attempt.
  void forget_key(std::string_view tenant, std::string_view key);

  /// At start: a record read back from the store. A session neither creating nor stopping is
  /// settled.
  Entry& restore(SessionRecord rec);
  /// At start: a key stored with its session's first record, and the body it was first used
  /// with (a key reused with another body is refused after a restart as before it). False
  /// when its session is not in the table (its record was damaged).
  bool restore_key(const IdempotencyKey& key);

 private:
  using KeyIndex = std::map<std::pair<std::string, std::string>, std::string>;
  asio::any_io_executor ex_;
  Map entries_;
  KeyIndex keys_;                                                  // (tenant, key) -> session id
  std::map<std::string, std::deque<double>, std::less<>> recent_;  // by tenant, unix seconds
};

}  // namespace rex::gateway
