#include <rex/core/async_mutex.hpp>

#include "support/async_test.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <string>
#include <vector>

namespace rex {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

TEST(AsyncMutex, ServesWaitersInOrderAndHandsOwnershipOn) {
  asio::io_context io;
  AsyncMutex mutex(io.get_executor());
  AsyncMutex::Guard first = mutex.try_lock();
  ASSERT_TRUE(first);
  EXPECT_FALSE(mutex.try_lock());
  std::vector<int> order;
  std::vector<AsyncMutex::Guard> held(3);
  auto waiter = [&](int n) -> asio::awaitable<void> {
    held[static_cast<std::size_t>(n)] = co_await mutex.lock();
    order.push_back(n);
  };
  for (int n = 0; n < 3; ++n)
    asio::co_spawn(io, waiter(n), asio::detached);
  io.poll();
  EXPECT_TRUE(order.empty());
  first.unlock();
  io.poll();
  EXPECT_EQ(order, std::vector<int>{0});
  EXPECT_FALSE(mutex.try_lock());  // handed on, not free for a newcomer
  held[0] = AsyncMutex::Guard();
  io.poll();
  held[1].unlock();
  io.poll();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  held[2].unlock();
  EXPECT_TRUE(mutex.idle());
}

TEST(AsyncMutex, DeadlineGivesAnEmptyGuardAndLeavesTheLine) {
  asio::io_context io;
  AsyncMutex mutex(io.get_executor());
  auto held = mutex.try_lock();
  auto attempt = [&]() -> asio::awaitable<bool> {
    auto guard = co_await mutex.lock(std::chrono::steady_clock::now() + 10ms);
    co_return static_cast<bool>(guard);
  };
  EXPECT_FALSE(test::run_async(io, attempt()));
  held.unlock();
  EXPECT_TRUE(mutex.idle());
  EXPECT_TRUE(test::run_async(io, attempt()));  // free: at once, whatever the deadline
  EXPECT_TRUE(mutex.idle());
}

TEST(AsyncMutex, CancelledWaiterThrowsAndNeverHoldsTheMutex) {
  asio::io_context io;
  AsyncMutex mutex(io.get_executor());
  auto held = mutex.try_lock();
  asio::cancellation_signal cancel;
  std::string outcome;
  auto waiter = [&]() -> asio::awaitable<void> {
    try {
      auto guard = co_await mutex.lock();
      outcome = "locked";
    } catch (const boost::system::system_error& e) {
      outcome = e.code() == asio::error::operation_aborted ? "aborted" : e.what();
    }
  };
  asio::co_spawn(io, waiter(),
                 asio::bind_cancellation_slot(cancel.slot(), [](std::exception_ptr) {}));
  io.poll();
  cancel.emit(asio::cancellation_type::terminal);
  io.poll();
  EXPECT_EQ(outcome, "aborted");
  held.unlock();
  EXPECT_TRUE(mutex.idle());
}

}  // namespace
}  // namespace rex
