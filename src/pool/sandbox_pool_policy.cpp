#include "pool/sandbox_pool_policy.hpp"

#include <algorithm>
#include <vector>

namespace rex::detail {

bool SandboxPoolPolicy::wants_start(const PoolCounts& counts) const noexcept {
  if (counts.closed)
    return false;
  const std::size_t wanted = counts.waiters + (counts.spares_paused ? 0 : config_->warm_spares);
  return counts.spares + counts.starting < wanted && counts.in_use() < config_->max_sandboxes;
}

TrimStep SandboxPoolPolicy::trim(std::span<const PoolClock::time_point> idle_since,
                                 std::size_t waiters, PoolClock::time_point now) const {
  if (!has_surplus(idle_since.size(), waiters))
    return {};
  // Counting only the spares idle for the whole timeout (rather than all spares) means a
  // sandbox just handed back never pushes an old warm spare out: a caller that hands back and
  // acquires again causes no stop and no start.
  std::vector<PoolClock::time_point> idle(idle_since.begin(), idle_since.end());
  const auto nth = idle.begin() + static_cast<std::ptrdiff_t>(config_->warm_spares);
  std::nth_element(idle.begin(), nth, idle.end());
  const auto due = *nth + config_->surplus_idle_timeout;  // then warm_spares + 1 are idle
  if (due > now)
    return {.stop = std::nullopt, .wake = due};
  const auto oldest = std::min_element(idle_since.begin(), idle_since.end());
  return {.stop = static_cast<std::size_t>(oldest - idle_since.begin()), .wake = std::nullopt};
}

StartRetry SandboxPoolPolicy::after_failed_start(int attempt, bool fatal, bool closed,
                                                 double random01) const noexcept {
  if (fatal || closed || attempt >= config_->start_attempts)
    return {};
  return {.retry = true, .delay = retry_delay(*config_, attempt, random01)};
}

bool SandboxPoolPolicy::try_reuse(bool broken, bool closed) const noexcept {
  return !closed && !broken && config_->return_policy == ReturnPolicy::recycle;
}

bool SandboxPoolPolicy::counts_as_replaced(bool broken, bool closed) const noexcept {
  return !closed && (broken || config_->return_policy == ReturnPolicy::recycle);
}

bool SandboxPoolPolicy::serve_at_once(const PoolCounts& counts, bool first_in_line) noexcept {
  return (counts.waiters == 0 || first_in_line) && counts.spares > 0;
}

}  // namespace rex::detail
