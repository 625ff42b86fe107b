// SandboxPoolPolicy: every decision of a SandboxPool, with no I/O and no clock of its own. The
// pool describes its state (PoolCounts, the spares' idle times) and the time; the policy answers
// what to do next: start another sandbox, stop the longest-idle spare or wake later, retry a
// failed start after a delay or give up, reuse a sandbox handed back or stop it. Pure, so the
// pool's schedule is tested with a fake clock (tests/unit/test_sandbox_pool_policy.cpp).
//
// Threading: a value; call it from anywhere.
#pragma once

#include <rex/pool/sandbox_pool_config.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>

namespace rex::detail {

using PoolClock = std::chrono::steady_clock;

/// What the pool holds, as the policy needs it.
struct PoolCounts {
  std::size_t starting = 0;    // starts in progress (with their retries)
  std::size_t spares = 0;      // started and idle
  std::size_t leased = 0;      // held by leases
  std::size_t returning = 0;   // handed back, being recycled or stopped
  std::size_t waiters = 0;     // acquire() calls in line
  bool spares_paused = false;  // the last start failed every attempt: no warm spares for now
  bool closed = false;         // shut down

  std::size_t in_use() const noexcept { return starting + spares + leased + returning; }
};

/// The next step of trimming surplus spares.
struct TrimStep {
  std::optional<std::size_t> stop;            // index of the spare to stop now
  std::optional<PoolClock::time_point> wake;  // else: look again at this time
};

/// After a start attempt failed.
struct StartRetry {
  bool retry = false;                  // try again after `delay`; else give up
  std::chrono::milliseconds delay{0};  // the backoff (with jitter) before the next attempt
};

class SandboxPoolPolicy {
 public:
  explicit SandboxPoolPolicy(const SandboxPoolConfig& config) noexcept : config_(&config) {}

  /// Whether another start should begin now: waiters and warm spares want more sandboxes than
  /// are spare or starting, and max_sandboxes leaves room. Asked again after each start, since
  /// a start may complete before the next question.
  bool wants_start(const PoolCounts& counts) const noexcept;

  /// Whether trim() can find anything to do: more spares than warm_spares and nobody waiting.
  /// Cheap, so the pool asks it before gathering the spares' idle times.
  bool has_surplus(std::size_t spares, std::size_t waiters) const noexcept {
    return waiters == 0 && spares > config_->warm_spares;
  }

  /// Surplus trimming: while more than warm_spares spares have been idle for
  /// surplus_idle_timeout (and nobody waits), the longest idle is stopped; otherwise the time
  /// at which that will first be so. `idle_since` holds each spare's time of becoming idle, in
  /// the pool's order.
  TrimStep trim(std::span<const PoolClock::time_point> idle_since, std::size_t waiters,
                PoolClock::time_point now) const;

  /// After attempt number `attempt` (1 for the first) failed: retry after the backoff delay
  /// (`random01` in [0, 1) picks the jitter), or give up when the attempts are spent, the error
  /// is one a retry cannot fix (`fatal`), or the pool is closed.
  StartRetry after_failed_start(int attempt, bool fatal, bool closed,
                                double random01) const noexcept;

  /// Whether a sandbox handed back is worth closing and checking for reuse.
  bool try_reuse(bool broken, bool closed) const noexcept;
  /// Whether stopping a sandbox handed back counts as a replacement (stats().replaced): the
  /// policy wanted it back but it was broken or failed its checks.
  bool counts_as_replaced(bool broken, bool closed) const noexcept;

  /// Whether acquire() takes a spare at once rather than queueing: there is one, and nobody is
  /// ahead (`first_in_line`: a caller retrying after a dead spare keeps its place).
  static bool serve_at_once(const PoolCounts& counts, bool first_in_line) noexcept;

 private:
  const SandboxPoolConfig* config_;
};

}  // namespace rex::detail
