// Runs a coroutine to completion on a fresh io_context under a deadline, so a hang fails the
// test instead of blocking the suite. Exceptions from the coroutine are rethrown.
#pragma once

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <optional>
#include <type_traits>

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
      if (!e) result.emplace(std::move(value)...);
    }
    done = true;
  });
  io.restart();
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!done && std::chrono::steady_clock::now() < until) {
    io.run_one_until(until);
  }
  if (!done) {
    ADD_FAILURE() << "async test exceeded its deadline";
    io.stop();
    throw std::runtime_error("deadline exceeded");
  }
  if (error) std::rethrow_exception(error);
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

/// Convenience: a fresh io_context per call.
template <class T>
T run_async(asio::awaitable<T> op,
            std::chrono::steady_clock::duration deadline = std::chrono::seconds(30)) {
  asio::io_context io;
  return run_async(io, std::move(op), deadline);
}

}  // namespace rex::test
