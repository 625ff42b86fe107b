#include <rex/core/backoff.hpp>

#include <algorithm>
#include <cmath>

namespace rex {

std::chrono::duration<double, std::milli> backoff_delay(const Backoff& backoff, unsigned retry,
                                                        double random01) noexcept {
  const double initial = static_cast<double>(backoff.initial_delay.count());
  const double cap = static_cast<double>(backoff.max_delay.count());
  const double growth = std::pow(std::max(backoff.multiplier, 1.0), retry > 0 ? retry - 1 : 0);
  const double base = std::min(cap, initial * growth);
  const double jitter = std::clamp(backoff.jitter, 0.0, 1.0);
  const double scaled = base * (1.0 - jitter * std::clamp(random01, 0.0, 1.0));
  return std::chrono::duration<double, std::milli>(std::max(scaled, 0.0));
}

}  // namespace rex
