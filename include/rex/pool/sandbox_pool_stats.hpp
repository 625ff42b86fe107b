// SandboxPoolStats: a snapshot of a SandboxPool's counters, for progress lines and tests.
#pragma once

#include <cstddef>

namespace rex {

struct SandboxPoolStats {
  std::size_t started = 0;          // successful starts since the pool was made
  std::size_t running = 0;          // started and not yet stopped
  std::size_t starting = 0;         // starts in progress (with their retries)
  std::size_t leased = 0;           // held by leases
  std::size_t spares = 0;           // started, idle, ready to hand out
  std::size_t waiters = 0;          // acquire() calls waiting for a sandbox
  std::size_t failed_attempts = 0;  // start() calls that failed
  std::size_t failed_starts = 0;    // sandboxes that failed every attempt
  std::size_t replaced = 0;         // stopped because dead or marked broken
  std::size_t trimmed = 0;          // surplus spares stopped (beyond warm_spares, idle)
};

}  // namespace rex
