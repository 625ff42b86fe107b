// Event: a flag that coroutines can wait for. set() wakes every waiter and lets later waits
// through at once until reset(). For "wake the coroutine that waits for this" between
// coroutines of one executor: a sandbox granted, a stop signal, work drained.
//
// Guarantees: wait() never throws; it completes with true once the event is set, or with false
// when the caller's cancellation (any type) ended the wait first. Waking costs one timer cancel.
//
// Threading: construct, call and destroy on the executor given (or its strand); nothing locks.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace rex {

namespace asio = boost::asio;

class Event {
 public:
  explicit Event(asio::any_io_executor executor);
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Sets the flag and wakes every waiter.
  void set();
  /// Clears the flag; later waits suspend until the next set().
  void reset() noexcept { set_ = false; }
  bool is_set() const noexcept { return set_; }

  /// Completes when the event is set (true, at once if it is) or when the caller's
  /// cancellation ends the wait (false). Obeys every cancellation type.
  asio::awaitable<bool> wait();

 private:
  // A timer that never expires: waiters wait on it, set() cancels it.
  asio::steady_timer timer_;
  bool set_ = false;
};

}  // namespace rex
