#include <rex/core/async_mutex.hpp>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>

namespace rex {

struct AsyncMutex::Waiter {
  Waiter(const asio::any_io_executor& executor, Clock::time_point deadline)
      : timer(executor, deadline) {}
  asio::steady_timer timer;  // expires at the deadline; unlock() cancels it to hand over
  bool granted = false;
  bool taken = false;  // the guard reached the caller
};

asio::awaitable<AsyncMutex::Guard> AsyncMutex::lock(std::optional<Clock::time_point> deadline) {
  if (!locked_ && waiters_.empty()) {
    locked_ = true;
    co_return Guard(this);
  }
  Waiter waiter(executor_, deadline.value_or(Clock::time_point::max()));
  waiters_.push_back(&waiter);
  // Runs when the wait ends in any way, including the coroutine's destruction while queued:
  // leaves the line, and passes on ownership granted to a caller that never received it.
  struct Leave {
    AsyncMutex& mutex;
    Waiter& waiter;
    ~Leave() {
      if (!waiter.granted)
        std::erase(mutex.waiters_, &waiter);
      else if (!waiter.taken)
        mutex.unlock();
    }
  } leave{*this, waiter};
  boost::system::error_code ec;
  co_await waiter.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (waiter.granted) {
    waiter.taken = true;
    co_return Guard(this);
  }
  if (!ec)
    co_return Guard();  // the deadline passed
  throw boost::system::system_error(asio::error::operation_aborted,
                                    "AsyncMutex::lock: cancelled while waiting");
}

AsyncMutex::Guard AsyncMutex::try_lock() noexcept {
  if (locked_ || !waiters_.empty())
    return Guard();
  locked_ = true;
  return Guard(this);
}

void AsyncMutex::unlock() noexcept {
  if (waiters_.empty()) {
    locked_ = false;
    return;
  }
  Waiter* next = waiters_.front();
  waiters_.pop_front();
  next->granted = true;  // ownership passes on; locked_ stays true
  next->timer.cancel();
}

}  // namespace rex
