// Racing coroutines on Boost 1.81: an operation against a deadline (with_timeout), two
// operations against each other (first_of), several side by side (all_of). The only home of
// asio::experimental's awaitable operators in rex, so a Boost upgrade touches this file alone.
//
// Guarantees: the first operation to finish decides the race, whether it returned or threw (an
// exception propagates at once; asio's bare `||` would instead wait for the other operation);
// the loser is cancelled (terminal) and has finished before the race completes. all_of cancels
// the others when one throws and propagates that exception. Terminal cancellation of the caller
// reaches every operation.
//
// Threading: call from a coroutine; the timer runs on that coroutine's executor.
#pragma once

#include <rex/core/outcome.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

namespace rex {

namespace asio = boost::asio;

namespace detail {
template <class T>
using RaceValue = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// The value an Outcome of a race holds, rethrowing its exception.
template <class T>
RaceValue<T> race_value(Outcome<T>&& outcome) {
  if constexpr (std::is_void_v<T>) {
    outcome.value();
    return {};
  } else {
    return std::move(outcome).value();
  }
}
}  // namespace detail

/// Runs both; the first to finish wins and the other is cancelled. The variant's index says
/// which won (std::monostate stands for a void result); the winner's exception propagates.
template <class A, class B>
asio::awaitable<std::variant<detail::RaceValue<A>, detail::RaceValue<B>>> first_of(
    asio::awaitable<A> a, asio::awaitable<B> b) {
  using namespace asio::experimental::awaitable_operators;
  using Result = std::variant<detail::RaceValue<A>, detail::RaceValue<B>>;
  // Captured, neither side can fail: `||` then completes with whichever finishes first. g++ 12
  // miscompiles temporaries inside co_await expressions: each operand is a named local.
  auto first = capture(std::move(a));
  auto second = capture(std::move(b));
  auto winner = co_await (std::move(first) || std::move(second));
  if (winner.index() == 0)
    co_return Result(std::in_place_index<0>, detail::race_value(std::get<0>(std::move(winner))));
  co_return Result(std::in_place_index<1>, detail::race_value(std::get<1>(std::move(winner))));
}

/// A protocol's seconds as a clock duration: zero for zero, negative or NaN, at most 1e9 s
/// (about 30 years, "no limit" without overflowing the clock).
inline std::chrono::steady_clock::duration duration_from_seconds(double seconds) {
  constexpr double kLongest = 1e9;
  if (!(seconds > 0))
    return std::chrono::steady_clock::duration::zero();
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds < kLongest ? seconds : kLongest));
}

/// The operation's result, or nothing when `limit` passed first (the operation is cancelled).
template <class T>
asio::awaitable<std::optional<T>> with_timeout(asio::awaitable<T> operation,
                                               std::chrono::steady_clock::duration limit) {
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto expiry = timer.async_wait(asio::use_awaitable);
  auto race = first_of(std::move(operation), std::move(expiry));
  auto result = co_await std::move(race);
  if (result.index() != 0)
    co_return std::nullopt;
  co_return std::get<0>(std::move(result));
}

/// True when the operation completed, false when `limit` passed first (it is cancelled).
inline asio::awaitable<bool> with_timeout(asio::awaitable<void> operation,
                                          std::chrono::steady_clock::duration limit) {
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto expiry = timer.async_wait(asio::use_awaitable);
  auto race = first_of(std::move(operation), std::move(expiry));
  auto result = co_await std::move(race);
  co_return result.index() == 0;
}

/// Runs all of them side by side and completes when all have; the first exception cancels
/// the others and propagates once they have finished.
template <class... Ops>
asio::awaitable<void> all_of(asio::awaitable<void> first, Ops... rest) {
  using namespace asio::experimental::awaitable_operators;
  co_await (std::move(first) && ... && std::move(rest));
}

}  // namespace rex
