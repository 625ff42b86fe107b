// SandboxPool: many sandboxes of one kind, started ahead of demand and lent out one at a time,
// for running many independent jobs (benchmark instances) in parallel.
//
// Guarantees:
// - At most config.max_sandboxes deployments exist at once: starting, spare, leased, or being
//   recycled or stopped. A deployment counts until its stop() has finished.
// - config.warm_spares sandboxes are started ahead and topped up (within the maximum), so an
//   acquire() finding a spare completes without suspending (after the health check).
// - An idle pool shrinks back to warm_spares: spares beyond them (sandboxes recycled after their
//   lease, or started for a waiter that gave up) serve acquire() calls that come within
//   config.surplus_idle_timeout; once more than warm_spares spares have been idle that long,
//   the longest idle are stopped (stats().trimmed counts them).
// - acquire() calls that must wait are served first come, first served. A waiting acquire()
//   obeys terminal cancellation (e.g. racing a timer with awaitable operators) and gives up its
//   place without losing a slot: a sandbox started for it becomes a spare.
// - A failing start is retried (config.start_attempts, with backoff and jitter); when every
//   attempt fails, the waiter first in line gets SandboxStartError with the attempt count and
//   the last error, and spares are not topped up again until a start succeeds.
// - A spare that fails the health check is stopped and replaced without the caller noticing.
// - shutdown() refuses new acquires (SandboxPoolClosedError), wakes waiters with that error,
//   stops spares AND leased sandboxes at once, waits for starts in progress and stops them too,
//   and returns when no deployment of the pool is left running. Idempotent.
// - Destroying the pool without shutdown() starts one in the background; keep the executor
//   running until it is done or deployments (containers) are left behind.
//
// Threading: everything runs on the executor given; call every member from it. Nothing locks
// and nothing blocks.
#pragma once

#include <rex/pool/pool_errors.hpp>
#include <rex/pool/sandbox_lease.hpp>
#include <rex/pool/sandbox_pool_config.hpp>
#include <rex/pool/sandbox_pool_stats.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <memory>

namespace rex {

class SandboxPool {
 public:
  /// Starts the warm spares. std::invalid_argument for a config validate() refuses.
  SandboxPool(asio::any_io_executor executor, SandboxPoolConfig config);
  ~SandboxPool();
  SandboxPool(const SandboxPool&) = delete;
  SandboxPool& operator=(const SandboxPool&) = delete;

  /// A sandbox for the caller alone: a spare, or one started for the caller, waiting in line
  /// while max_sandboxes are in use. Throws SandboxStartError (every start attempt failed),
  /// SandboxPoolClosedError (shut down), or operation_aborted when cancelled.
  asio::awaitable<SandboxLease> acquire();

  /// Stops everything (see above). Later calls wait for the first to finish.
  asio::awaitable<void> shutdown();

  SandboxPoolStats stats() const noexcept;
  const SandboxPoolConfig& config() const noexcept;
  asio::any_io_executor executor() const noexcept;

 private:
  std::shared_ptr<detail::SandboxPoolState> state_;
};

}  // namespace rex
