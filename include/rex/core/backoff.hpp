// Backoff: how long to wait before trying again after a failure, for every retry loop of rex
// (the HTTP client's reconnects, the sandbox pool's restarts). Plain settings, one computation.
//
// Delays grow exponentially from initial_delay by multiplier, are capped at max_delay, and are
// scaled down by up to `jitter` at random, so that many clients failing together do not retry
// in lock-step.
#pragma once

#include <chrono>

namespace rex {

struct Backoff {
  std::chrono::milliseconds initial_delay{100};                  // before the first retry
  std::chrono::milliseconds max_delay{std::chrono::seconds(5)};  // cap of any one delay
  double multiplier = 2.0;                                       // growth per retry (>= 1)
  double jitter = 0.5;  // fraction in [0, 1]: a delay is scaled by a factor in [1 - jitter, 1]
};

/// The exact delay before retry number `retry` (1 for the first), given `random01` drawn
/// uniformly from [0, 1): min(max_delay, initial_delay * multiplier^(retry-1)) * (1 - jitter *
/// random01). Pure, so a schedule can be tested without waiting.
std::chrono::duration<double, std::milli> backoff_delay(const Backoff& backoff, unsigned retry,
                                                        double random01) noexcept;

}  // namespace rex
