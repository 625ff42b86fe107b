// SessionRecord: what the gateway knows of one session, as stored (Store keeps its JSON form)
// and, without its secrets, as the API shows it. Pure data with its JSON mapping and the
// lifecycle's rules (states, deadlines), no I/O.
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::gateway {

/// creating -> ready -> stopping -> destroyed; or failed, or lost.
namespace state {
inline constexpr std::string_view creating = "creating";
inline constexpr std::string_view ready = "ready";
inline constexpr std::string_view stopping = "stopping";
inline constexpr std::string_view destroyed = "destroyed";
inline constexpr std::string_view failed = "failed";
inline constexpr std::string_view lost = "lost";
/// creating, ready or stopping: a session in it holds a sandbox (and its tenant's quota).
inline bool is_active(std::string_view s) {
  return s == creating || s == ready || s == stopping;
}
}  // namespace state

struct SessionRecord {
  std::string id;
  std::string tenant;
  std::string provider;
  std::string environment;
  std::string state{state::creating};
  std::string reason;  // why it ended: deleted, ttl_idle, ttl_max, lost, interrupted, error
  std::string error;   // what went wrong, for failed and lost
  // How the sandbox is reached (empty until ready).
  std::string sandbox_id;
  std::string url;
  std::string token;
  std::string working_dir;
  std::string scratch_dir;  // empty: /tmp/rex-notebook-<id> in the sandbox
  // Sent with every request to the sandbox's server (SandboxAddress::headers).
  std::vector<std::pair<std::string, std::string>> headers;
  boost::json::object metadata;
  std::map<std::string, std::string> env;
  // Unix seconds; 0 when not yet.
  double created_at = 0;
  double ready_at = 0;
  double ended_at = 0;
  double last_active = 0;
  std::string last_call;  // what last kept it alive: "execute", "swerex/run_in_session", ...
  // Seconds; idle_timeout 0: never idle-expires. max_lifetime is always set (> 0).
  double idle_timeout = 0;
  double max_lifetime = 0;
  std::string idempotency_key;
  std::uint64_t calls = 0;
  // Checkpoints: the one the sandbox last came from or took (empty: none), and a pause: "" (none),
  // "memory" (its processes frozen) or "disk" (its pause checkpoint `pause_checkpoint`; no
  // sandbox runs, sandbox_id and url are empty).
  std::string origin;
  std::string started_from;  // the checkpoint whose image its sandbox started from; empty: none
  std::string paused;
  std::string pause_checkpoint;

  /// When the session ends whatever happens: created_at + max_lifetime.
  double deadline() const { return created_at + max_lifetime; }
  /// When it expires if nothing touches it (never past the deadline); 0 for none.
  double idle_deadline() const;
  /// creating, ready or stopping: it holds a sandbox (and its tenant's quota).
  bool active() const;
  /// destroyed, failed or lost: nothing more will happen to it.
  bool ended() const { return !active(); }

  /// Everything, secrets included: what the store keeps.
  boost::json::object to_json() const;
  /// The API's view: no token, and the expiry times spelled out.
  boost::json::object public_json() const;
  /// Throws std::invalid_argument naming the field when the stored form is damaged.
  static SessionRecord from_json(const boost::json::object& o);
};

/// "2026-11-24T12:00:00.000Z" for unix seconds (empty for 0).
std::string iso_time(double unix_seconds);

/// A time as records keep it: unix seconds rounded to the millisecond. Boost.JSON (1.81) reads
/// some doubles back a few units in the last place off, which could move a time printed to the
/// millisecond across a rounding boundary between a gateway and its restart; a time on a whole
/// millisecond prints the same however it comes back.
double recorded_time(double unix_seconds);
/// The current time as records keep it (recorded_time).
double unix_now();

}  // namespace rex::gateway
