#include "pool/sandbox_pool_policy.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace rex::detail {
namespace {

using namespace std::chrono_literals;

// The policy reads no clock: a fixed origin plus offsets stands in for it.
const PoolClock::time_point t0 = PoolClock::time_point() + 1h;

SandboxPoolConfig config(std::size_t max, std::size_t warm) {
  SandboxPoolConfig c;
  c.max_sandboxes = max;
  c.warm_spares = warm;
  c.surplus_idle_timeout = 1000ms;
  c.start_attempts = 3;
  c.retry_backoff.initial_delay = 100ms;
  c.retry_backoff.max_delay = 1000ms;
  c.retry_backoff.jitter = 0.5;
  return c;
}

TEST(SandboxPoolPolicy, StartsWarmSparesAndWaitersWithinTheMaximum) {
  const auto c = config(4, 2);
  const SandboxPoolPolicy policy(c);
  PoolCounts counts;
  EXPECT_TRUE(policy.wants_start(counts));
  counts.starting = 2;
  EXPECT_FALSE(policy.wants_start(counts));  // both warm spares on their way
  counts.waiters = 1;
  EXPECT_TRUE(policy.wants_start(counts));  // one more for the waiter
  counts.leased = 1;
  counts.starting = 3;
  EXPECT_FALSE(policy.wants_start(counts));  // 4 in use: the maximum
  counts = PoolCounts{.spares = 1, .spares_paused = true};
  EXPECT_FALSE(policy.wants_start(counts));  // failing starts pause the spares...
  counts.waiters = 2;
  EXPECT_TRUE(policy.wants_start(counts));  // ...but not the waiters
  counts.closed = true;
  EXPECT_FALSE(policy.wants_start(counts));
}

TEST(SandboxPoolPolicy, TrimsTheLongestIdleSurplusSpareOnceIdleLongEnough) {
  const auto c = config(8, 1);
  const SandboxPoolPolicy policy(c);
  // A warm spare idle since t0, two handed back at t0 + 5s and t0 + 6s.
  std::vector<PoolClock::time_point> idle{t0 + 5s, t0, t0 + 6s};
  auto step = policy.trim(idle, 0, t0 + 5500ms);
  EXPECT_FALSE(step.stop);
  ASSERT_TRUE(step.wake);
  EXPECT_EQ(*step.wake, t0 + 6s);  // then two are idle for the timeout

  step = policy.trim(idle, 0, t0 + 6s);
  ASSERT_TRUE(step.stop);
  EXPECT_EQ(*step.stop, 1u);  // the longest idle goes first
  idle.erase(idle.begin() + 1);
  step = policy.trim(idle, 0, t0 + 6s);
  EXPECT_FALSE(step.stop);
  EXPECT_EQ(step.wake, t0 + 7s);

  EXPECT_FALSE(policy.trim(idle, 1, t0 + 1h).stop);  // a waiter will want it
  idle.pop_back();
  const auto single = policy.trim(idle, 0, t0 + 1h);
  EXPECT_FALSE(single.stop);  // only warm spares left: nothing to do, no wake-up
  EXPECT_FALSE(single.wake);
}

TEST(SandboxPoolPolicy, ZeroTimeoutTrimsAtOnce) {
  auto c = config(8, 0);
  c.surplus_idle_timeout = 0ms;
  const SandboxPoolPolicy policy(c);
  const std::vector<PoolClock::time_point> idle{t0};
  const auto step = policy.trim(idle, 0, t0);
  ASSERT_TRUE(step.stop);
  EXPECT_EQ(*step.stop, 0u);
}

TEST(SandboxPoolPolicy, RetriesFailedStartsWithBackoffThenGivesUp) {
  const auto c = config(4, 0);
  const SandboxPoolPolicy policy(c);
  auto next = policy.after_failed_start(1, false, false, 0.0);
  EXPECT_TRUE(next.retry);
  EXPECT_EQ(next.delay, 100ms);
  next = policy.after_failed_start(2, false, false, 0.999);
  EXPECT_TRUE(next.retry);
  EXPECT_EQ(next.delay, 101ms);  // 200 ms less up to half of it, rounded up
  EXPECT_FALSE(policy.after_failed_start(3, false, false, 0.0).retry);  // attempts spent
  EXPECT_FALSE(policy.after_failed_start(1, true, false, 0.0).retry);   // a config error
  EXPECT_FALSE(policy.after_failed_start(1, false, true, 0.0).retry);   // shut down
}

TEST(SandboxPoolPolicy, RecyclesWhatThePolicyWantsBackAndCountsReplacements) {
  auto c = config(4, 0);
  const SandboxPoolPolicy recycle(c);
  EXPECT_TRUE(recycle.try_reuse(false, false));
  EXPECT_FALSE(recycle.try_reuse(true, false));
  EXPECT_FALSE(recycle.try_reuse(false, true));
  EXPECT_TRUE(recycle.counts_as_replaced(false, false));  // failed its checks
  EXPECT_FALSE(recycle.counts_as_replaced(true, true));   // shutdown stops everything
  c.return_policy = ReturnPolicy::stop;
  const SandboxPoolPolicy stop(c);
  EXPECT_FALSE(stop.try_reuse(false, false));
  EXPECT_FALSE(stop.counts_as_replaced(false, false));
  EXPECT_TRUE(stop.counts_as_replaced(true, false));
}

TEST(SandboxPoolPolicy, AcquireTakesASpareOnlyWhenNobodyIsAhead) {
  EXPECT_TRUE(SandboxPoolPolicy::serve_at_once({.spares = 1}, false));
  EXPECT_FALSE(SandboxPoolPolicy::serve_at_once({.spares = 1, .waiters = 1}, false));
  EXPECT_TRUE(SandboxPoolPolicy::serve_at_once({.spares = 1, .waiters = 1}, true));
  EXPECT_FALSE(SandboxPoolPolicy::serve_at_once({}, true));
}

}  // namespace
}  // namespace rex::detail
