// AsyncMutex: mutual exclusion between coroutines of one executor, e.g. one command at a time
// on a shell. lock() suspends instead of blocking and hands out a move-only Guard that unlocks
// when it goes away.
//
// Guarantees: waiters are served first come, first served; ownership passes straight to the
// next waiter, so nobody can barge in between. A waiter whose deadline passes, or whose
// coroutine is cancelled or destroyed, leaves the line without ever holding the mutex.
//
// Threading: construct, lock, unlock and destroy on the executor given (or its strand). The
// mutex must outlive its guards and waiters.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <deque>
#include <optional>
#include <utility>

namespace rex {

namespace asio = boost::asio;

class AsyncMutex {
 public:
  using Clock = std::chrono::steady_clock;

  /// Ownership of the mutex; empty when a lock's deadline passed. Move-only.
  class Guard {
   public:
    Guard() noexcept = default;
    Guard(Guard&& other) noexcept : mutex_(std::exchange(other.mutex_, nullptr)) {}
    Guard& operator=(Guard&& other) noexcept {
      if (this != &other) {
        unlock();
        mutex_ = std::exchange(other.mutex_, nullptr);
      }
      return *this;
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { unlock(); }

    explicit operator bool() const noexcept { return mutex_ != nullptr; }
    /// Unlocks early; the guard is empty afterwards.
    void unlock() noexcept {
      if (mutex_ != nullptr)
        std::exchange(mutex_, nullptr)->unlock();
    }

   private:
    friend class AsyncMutex;
    explicit Guard(AsyncMutex* mutex) noexcept : mutex_(mutex) {}
    AsyncMutex* mutex_ = nullptr;
  };

  explicit AsyncMutex(asio::any_io_executor executor) : executor_(std::move(executor)) {}
  AsyncMutex(const AsyncMutex&) = delete;
  AsyncMutex& operator=(const AsyncMutex&) = delete;

  /// Waits in line for the mutex. With a deadline, an empty guard when it passes first.
  /// Obeys terminal cancellation: leaves the line and throws operation_aborted.
  asio::awaitable<Guard> lock(std::optional<Clock::time_point> deadline = std::nullopt);

  /// The mutex when it is free and nobody waits; an empty guard otherwise.
  Guard try_lock() noexcept;

  bool locked() const noexcept { return locked_; }
  /// Unlocked and nobody waiting.
  bool idle() const noexcept { return !locked_ && waiters_.empty(); }

 private:
  struct Waiter;
  void unlock() noexcept;

  asio::any_io_executor executor_;
  bool locked_ = false;
  std::deque<Waiter*> waiters_;
};

}  // namespace rex
