// The gateway's lifecycle rules as pure functions: the moves between a session's states, when a
// session expires, and what reconcile (at start) and the drift check (while running) do about the
// sandboxes the providers list against the records. Time comes in as an argument and nothing
// here does I/O: Gateway::Impl carries the decisions out (records, removals, ends), and the unit
// tests (tests/unit/test_lifecycle.cpp) check each rule on times of their choosing.
#pragma once

#include <rex/gateway/provider.hpp>

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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
/// deadline; nothing while it may live on (or when it is not ready).
std::optional<std::string_view> expiry(const SessionRecord& rec, double now);

/// A session as reconcile sees it.
struct SessionView {
  std::string id;
  std::string state;
  std::string sandbox_id;
  bool stopping_now = false;  // its end is being carried out already
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
  double orphan_grace = 0;  // seconds a sandbox of no session is left alone after its start
  std::vector<SessionView> sessions;    // this provider's sessions, ended ones too
  std::vector<SandboxListing> listing;  // what the provider runs for this gateway
  std::set<std::string> being_removed;  // sandbox ids whose removal is under way
};

/// The decisions, in order: the sessions' (in the order given), then the removals, each
/// sandbox at most once and none that is being removed already.
std::vector<Step> plan(const Inputs& in);

}  // namespace rex::gateway::lifecycle
