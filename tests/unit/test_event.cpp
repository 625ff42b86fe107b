#include <rex/core/event.hpp>

#include "support/async_test.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

namespace rex {
namespace {

namespace asio = boost::asio;

TEST(Event, SetWakesEveryWaiterAndLetsLaterWaitsThrough) {
  asio::io_context io;
  Event event(io.get_executor());
  int woken = 0;
  auto waiter = [&]() -> asio::awaitable<void> {
    if (co_await event.wait())
      ++woken;
  };
  asio::co_spawn(io, waiter(), asio::detached);
  asio::co_spawn(io, waiter(), asio::detached);
  io.poll();
  EXPECT_EQ(woken, 0);
  event.set();
  io.poll();
  EXPECT_EQ(woken, 2);
  asio::co_spawn(io, waiter(), asio::detached);
  io.restart();
  io.poll();
  EXPECT_EQ(woken, 3);  // already set: no suspension
}

TEST(Event, ResetMakesWaitsSuspendAgain) {
  asio::io_context io;
  Event event(io.get_executor());
  event.set();
  event.reset();
  EXPECT_FALSE(event.is_set());
  bool woken = false;
  auto waiter = [&]() -> asio::awaitable<void> { woken = co_await event.wait(); };
  asio::co_spawn(io, waiter(), asio::detached);
  io.poll();
  EXPECT_FALSE(woken);
  event.set();
  io.poll();
  EXPECT_TRUE(woken);
}

TEST(Event, CancellationEndsTheWaitWithFalse) {
  asio::io_context io;
  Event event(io.get_executor());
  std::optional<bool> result;
  asio::cancellation_signal cancel;
  auto waiter = [&]() -> asio::awaitable<void> { result = co_await event.wait(); };
  asio::co_spawn(io, waiter(),
                 asio::bind_cancellation_slot(cancel.slot(), [](std::exception_ptr) {}));
  io.poll();
  EXPECT_FALSE(result.has_value());
  cancel.emit(asio::cancellation_type::terminal);
  io.poll();
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(*result);
  EXPECT_FALSE(event.is_set());
}

}  // namespace
}  // namespace rex
