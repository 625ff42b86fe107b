// Many operations side by side, at most so many at a time: closing every session of a runtime,
// stopping every sandbox of a pool. The whole takes about as long as the slowest share of the
// work, not the sum, and never starts more at once than the limit says (a container engine, a
// kernel's process table).
//
// Guarantees: every item's operation runs once, even when others throw; the first exception is
// rethrown once all have finished. Completes only when none is running any more.
//
// Threading: call from a coroutine; the operations run on that coroutine's executor.
#pragma once

#include <rex/core/event.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

namespace rex {

namespace asio = boost::asio;

namespace detail {
struct BoundedState {
  explicit BoundedState(asio::any_io_executor ex) : changed(std::move(ex)) {}
  std::size_t running = 0;
  Event changed;  // set whenever an operation finishes
  std::exception_ptr first_error;
};

template <class T, class F>
asio::awaitable<void> bounded_one(std::shared_ptr<BoundedState> state, F work, T item) {
  try {
    co_await work(std::move(item));
  } catch (...) {
    if (!state->first_error)
      state->first_error = std::current_exception();
  }
  --state->running;
  state->changed.set();
}
}  // namespace detail

/// Runs `work(item)` (a coroutine function) for every item, at most `limit` at once.
template <class T, class F>
asio::awaitable<void> for_each_bounded(std::vector<T> items, std::size_t limit, F work) {
  auto ex = co_await asio::this_coro::executor;
  auto state = std::make_shared<detail::BoundedState>(ex);
  limit = std::max<std::size_t>(limit, 1);
  for (T& item : items) {
    while (state->running >= limit) {
      state->changed.reset();
      co_await state->changed.wait();
    }
    ++state->running;
    auto one = detail::bounded_one(state, work, std::move(item));
    asio::co_spawn(ex, std::move(one), asio::detached);
  }
  while (state->running > 0) {
    state->changed.reset();
    co_await state->changed.wait();
  }
  if (state->first_error)
    std::rethrow_exception(state->first_error);
}

}  // namespace rex
