// The retry loop of rex's calls to the services behind its backends (AWS's APIs, Daytona's REST
// API, Modal's gRPC API): an attempt, and while it asks for another and attempts remain, a pause
// of the backoff's delay (rex/core/backoff.hpp) before the next. What counts as transient, and
// what a failure says, stays with each caller.
//
// Threading: a coroutine on the executor it is given.
#pragma once

#include <rex/core/backoff.hpp>
#include <rex/core/random.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

namespace rex {

/// How often a call is tried, and how long to wait between tries. The default is the one of the
/// services' calls: 5 attempts, 250 ms doubling to at most 8 s, with full jitter.
struct RetryLoop {
  unsigned max_attempts = 5;  // 1: no retry
  Backoff backoff{std::chrono::milliseconds(250), std::chrono::seconds(8), 2.0, 1.0};
};

/// Calls `attempt(n, last)` for n = 1, 2, ... (an awaitable of std::optional<T>): a value ends
/// the loop and is returned, and what the attempt throws goes on; nullopt asks for another
/// attempt, after backoff_delay(loop.backoff, n, random_unit()). `last` is true on the attempt
/// after which none follows: it must give a value or throw (nullopt there is std::logic_error).
template <class T, class F>
boost::asio::awaitable<T> retrying(boost::asio::any_io_executor executor, RetryLoop loop,
                                   F attempt) {
  boost::asio::steady_timer pause(executor);
  for (unsigned n = 1;; ++n) {
    const bool last = n >= loop.max_attempts;
    auto trying = attempt(n, last);
    std::optional<T> got = co_await std::move(trying);
    if (got)
      co_return std::move(*got);
    if (last)
      throw std::logic_error("retrying: the last attempt asked for another");
    pause.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        backoff_delay(loop.backoff, n, random_unit())));
    co_await pause.async_wait(boost::asio::use_awaitable);
  }
}

}  // namespace rex
