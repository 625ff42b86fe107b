// The gateway's lifecycle rules as pure functions: the moves between a session's states, when a
// session expires, and what reconcile (at start) and the drift check (while running) do about the
// sandboxes the providers list against the records. Time comes in as an argument and nothing
// here does I/O: Gateway::Impl carries the decisions out (records, removals, ends), and the unit
// tests (tests/unit/test_lifecycle.cpp) check each rule on times of their choosing.
#pragma once

#include <rex/gateway/provider.hpp>

#include <deque>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/api_error.hpp"
#include "gateway/session_record.hpp"

namespace rex::gateway::lifecycle {

/// What happens to a session. The only ways between its states:
///   creating --sandbox_up--> ready --stop--> stopping --removed--> destroyed
///   creating --create_failed / interrupted--> failed
///   ready --vanished--> lost
enum class Move { sandbox_up, create_failed, interrupted, stop, removed, vanished };

/// The state `move` leads to from `from`; std::logic_error naming both when there is no such
/// move (a bug: the gateway never asks for one).
std::string_view next_state(std::string_view from, Move move);
/// rec.state = next_state(rec.state, move), and the reason it ended (for failed, lost and
/// destroyed) and the time (ended_at) when it ends.
void apply(SessionRecord& rec, Move move, double now, std::string reason = {},
           std::string error = {});

/// Why a ready session ends at `now`: "ttl_max" at its deadline, "ttl_idle" past its idle
/// deadline unless it is paused; nothing while it may live on (or when it is not ready).
std::optional<std::string_view> expiry(const SessionRecord& rec, double now);

/// Activity of a ready session at `now` (a call, or an answer still flowing when `new_call` is
/// false): its idle clock starts again, and a new call is counted. True when the activity is to
/// be committed now: it is committed lazily (a commit per call would cost every call a disk
/// flush), at most max(1 s, a tenth of the idle timeout) behind `persisted`, the last activity
/// committed; a restart may expire a session that much early, never late.
/// `call` names what it was (the record's last_call).
bool note_activity(SessionRecord& rec, double now, std::string_view call, bool new_call,
                   double persisted);

/// A keepalive at `now`: the idle clock starts again, with `timeout` (seconds) as the session's
/// idle timeout from now on when one is given. The idle deadline never passes the deadline
/// (SessionRecord::idle_deadline). Its last_call is "keepalive".
void renew(SessionRecord& rec, double now, std::optional<double> timeout);

/// E2B's setTimeout (and connect) at `now`: the session expires `seconds` from now unless
/// renewed, and never after its deadline; its idle timeout becomes that, at least 1 s. `call`
/// names the E2B call that asked (the record's last_call).
void set_timeout(SessionRecord& rec, double now, double seconds, std::string_view call);

/// A create as admission sees it.
struct CreateAsk {
  std::string tenant;
  std::string body_hash;  // of the request's body and provider
  /// When the request's Idempotency-Key was used before (at any time: the keys and their
  /// bodies' hashes are durable): the session it made and the hash of the body it came with.
  struct KeyUse {
    std::string session_id;
    std::string body_hash;
  };
  std::optional<KeyUse> key_use;
  std::size_t active = 0;         // the tenant's active sessions (creating, ready, stopping)
  std::size_t max_sessions = 0;   // the tenant's quota; 0: none
  double creates_per_minute = 0;  // the tenant's rate; 0: none
  double now = 0;                 // unix seconds
};

struct CreateDecision {
  enum class Kind {
    admit,     // a new session: its create is counted in the rate window
    existing,  // the key's session: answered as that session is (once it is not creating)
    refuse,    // `refusal` says why
  };
  Kind kind = Kind::admit;
  std::string session_id;           // for existing
  std::optional<ApiError> refusal;  // for refuse
};

/// Admission of a create, in this order: a key used before answers its session when the body
/// is the same (422 idempotency.mismatch when not), whatever the quotas now say; then the
/// tenant's active sessions against max_sessions (429 quota.max_sessions, retry after 5 s);
/// then the creates of the last 60 s against creates_per_minute (429 quota.creates_per_minute,
/// retry when the oldest leaves the window, at least 1 s). `recent` is the tenant's window (unix
/// seconds of its admitted creates, oldest first): pruned to the last 60 s, and `now` added when
/// the create is admitted.
CreateDecision decide_create(const CreateAsk& ask, std::deque<double>& recent);

/// A session as reconcile sees it.
struct SessionView {
  std::string id;
  std::string state;
  std::string sandbox_id;
  bool stopping_now = false;     // its end is being carried out already
  double ready_at = 0;           // unix seconds; 0 while it is not
  bool without_sandbox = false;  // paused to its checkpoint: no sandbox runs for it
  // A rewind or a resume of it is under way: a sandbox that names it and its record does not
  // (yet) is the one being started, not a leftover.
  bool replacing = false;
};

/// One decision about a provider's sandboxes and the records of its sessions.
struct Step {
  enum class Kind {
    adopt,        // a ready session's sandbox runs: it stays as it is
    interrupted,  // a create cut off by a restart: the session fails (Move::interrupted)
    lost,         // a ready session's sandbox is gone or has ended (Move::vanished)
    finish_stop,  // an end cut off (or a failed destroy): carried on
    remove,       // a sandbox no active session owns (the interrupted's, the lost's, an
                  // orphan, an earlier run's spare): destroyed on its own
  };
  Kind kind;
  std::string session_id;  // empty for the removal of a sandbox with no session
  std::string sandbox_id;  // for remove
  std::string error;       // for interrupted and lost: what the record says
  bool operator==(const Step&) const = default;
};

/// At start (before readiness): sessions are matched to sandboxes by the session a sandbox
/// names; every session not ended gets a decision. While running (the drift check): a ready
/// session's sandbox is the one its record names; creates in progress are left alone, and so
/// is an end already being carried out.
enum class Pass { start, drift };

struct Inputs {
  Pass pass = Pass::start;
  double now = 0;           // unix seconds
  double listed_at = 0;     // when the listing was asked for: a session ready since then is
                            // not judged by it (its sandbox may not have run yet when listed)
  double orphan_grace = 0;  // seconds a sandbox of no session is left alone after its start
  std::vector<SessionView> sessions;    // this provider's sessions, ended ones too
  std::vector<SandboxListing> listing;  // what the provider runs for this gateway
  std::set<std::string> being_removed;  // sandbox ids whose removal is under way
};

/// The decisions, in order: the sessions' (in the order given), then the removals, each
/// sandbox at most once and none that is being removed already.
std::vector<Step> plan(const Inputs& in);

}  // namespace rex::gateway::lifecycle
