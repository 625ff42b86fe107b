// Runs a coroutine to completion on a fresh io_context under a deadline, so a hang fails the
// test instead of blocking the suite. Exceptions from the coroutine are rethrown.
#pragma once

#include <gtest/gtest.h>
#include <boost/asio.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>

// EXPECT_THROW for coroutine bodies: gtest's macro jumps with `goto`, which g++ 12 miscompiles
// around co_await. This one only uses try/catch.
#define REX_CO_EXPECT_THROW(statement, exception_type)                                           \
  do {                                                                                           \
    bool rex_caught_ = false;                                                                    \
    try {                                                                                        \
      statement;                                                                                 \
    } catch (const exception_type&) {                                                            \
      rex_caught_ = true;                                                                        \
    } catch (const std::exception& rex_e_) {                                                     \
      rex_caught_ = true;                                                                        \
      ADD_FAILURE() << "expected " #exception_type ", got another exception: " << rex_e_.what(); \
    }                                                                                            \
    if (!rex_caught_)                                                                            \
      ADD_FAILURE() << "expected " #exception_type ": " #statement;                              \
  } while (false)

namespace rex::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

template <class T>
T run_async(asio::io_context& io, asio::awaitable<T> op,
            std::chrono::steady_clock::duration deadline = std::chrono::seconds(30)) {
  std::exception_ptr error;
  std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> result;
  bool done = false;
  asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, auto... value) {
    error = e;
    if constexpr (sizeof...(value) > 0) {
      if (!e)
        result.emplace(std::move(value)...);
    }
    done = true;
  });
  io.restart();
  // Work done elsewhere (a thread pool) must not let the io_context run dry and stop.
  auto work = asio::make_work_guard(io);
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!done && std::chrono::steady_clock::now() < until) {
    io.run_one_until(until);
  }
  if (!done) {
    ADD_FAILURE() << "async test exceeded its deadline";
    io.stop();
    throw std::runtime_error("deadline exceeded");
  }
  if (error)
    std::rethrow_exception(error);
  if constexpr (!std::is_void_v<T>)
    return std::move(*result);
}

/// Convenience: a fresh io_context per call.
template <class T>
T run_async(asio::awaitable<T> op,
            std::chrono::steady_clock::duration deadline = std::chrono::seconds(30)) {
  asio::io_context io;
  return run_async(io, std::move(op), deadline);
}

}  // namespace rex::test
