#include <rex/core/backoff.hpp>

#include <gtest/gtest.h>

namespace rex {
namespace {

using namespace std::chrono_literals;
using Ms = std::chrono::duration<double, std::milli>;

TEST(Backoff, GrowsIsCappedAndJittered) {
  const Backoff b{.initial_delay = 100ms, .max_delay = 1s, .multiplier = 3.0, .jitter = 0.5};
  EXPECT_EQ(backoff_delay(b, 1, 0.0), Ms(100));
  EXPECT_EQ(backoff_delay(b, 2, 0.0), Ms(300));
  EXPECT_EQ(backoff_delay(b, 4, 0.0), Ms(1000));
  EXPECT_EQ(backoff_delay(b, 400, 0.0), Ms(1000));
  EXPECT_EQ(backoff_delay(b, 2, 0.5), Ms(225));
  EXPECT_GE(backoff_delay(b, 2, 0.999999), Ms(150));
  EXPECT_EQ(backoff_delay(b, 0, 0.0), Ms(100));  // "retry 0" is treated as the first
}

TEST(Backoff, OutOfRangeSettingsAreClamped) {
  const Backoff shrinking{.initial_delay = 100ms, .max_delay = 1s, .multiplier = 0.5, .jitter = 2};
  EXPECT_EQ(backoff_delay(shrinking, 3, 0.0), Ms(100));  // never shrinks
  EXPECT_EQ(backoff_delay(shrinking, 1, 1.0), Ms(0));    // jitter at most 1
}

}  // namespace
}  // namespace rex
