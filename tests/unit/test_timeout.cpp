#include <rex/core/timeout.hpp>

#include "support/async_test.hpp"

#include <boost/asio/steady_timer.hpp>

#include <stdexcept>

namespace rex {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<int> answer_after(std::chrono::milliseconds delay, int value) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
  co_return value;
}

asio::awaitable<void> pause(std::chrono::milliseconds delay, bool* finished) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
  *finished = true;
}

asio::awaitable<int> throws_boom() {
  throw std::runtime_error("boom");
  co_return 0;
}

TEST(Timeout, TheOperationWinsInTime) {
  auto op = answer_after(1ms, 42);
  auto result = test::run_async(with_timeout(std::move(op), 10s));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(*result, 42);
}

TEST(Timeout, TheLimitWinsAndTheOperationIsCancelled) {
  bool finished = false;
  auto op = pause(10s, &finished);
  EXPECT_FALSE(test::run_async(with_timeout(std::move(op), 5ms), 5s));
  EXPECT_FALSE(finished);
  auto quick = pause(0ms, &finished);
  EXPECT_TRUE(test::run_async(with_timeout(std::move(quick), 10s)));
  EXPECT_TRUE(finished);
}

TEST(Timeout, TheOperationsExceptionPropagatesAtOnce) {
  auto op = throws_boom();
  // Bounded well below the limit: a failure does not wait for the timer.
  EXPECT_THROW(test::run_async(with_timeout(std::move(op), 60s), 5s), std::runtime_error);
  auto slow = answer_after(60s, 1);
  auto failing = throws_boom();
  EXPECT_THROW(test::run_async(first_of(std::move(slow), std::move(failing)), 5s),
               std::runtime_error);
}

TEST(Timeout, FirstOfSaysWhichFinishedFirst) {
  auto slow = answer_after(10s, 1);
  auto fast = answer_after(1ms, 2);
  auto result = test::run_async(first_of(std::move(slow), std::move(fast)), 5s);
  ASSERT_EQ(result.index(), 1u);
  EXPECT_EQ(std::get<1>(result), 2);
}

TEST(Timeout, AllOfWaitsForEveryOperation) {
  bool a = false;
  bool b = false;
  bool c = false;
  auto first = pause(1ms, &a);
  auto second = pause(2ms, &b);
  auto third = pause(0ms, &c);
  test::run_async(all_of(std::move(first), std::move(second), std::move(third)));
  EXPECT_TRUE(a && b && c);
}

}  // namespace
}  // namespace rex
