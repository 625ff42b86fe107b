// fan_out: runs `fn(item)` (a coroutine) for every item, at most `parallelism` at once, on the
// calling coroutine's executor, and returns one Outcome per item in the items' order. A job
// that throws is recorded in its Outcome; the others go on. Items are started in order.
//
// Cancellation: terminal cancellation of the fan_out's caller is passed to every running job;
// no new job starts, fan_out waits for the running ones to end and then throws
// operation_aborted.
//
// fn is kept for the whole fan_out, so a lambda coroutine may capture (its captures live as
// long as its jobs). It is called with a reference to the item, which also lives that long.
//
//   auto score = [&pool](Instance& i) -> awaitable<Score> {
//     auto lease = co_await pool.acquire();
//     co_return co_await evaluate(lease.runtime(), i);
//   };
//   auto results = co_await fan_out(instances, 16, score);
//
// (The lambda is named outside the co_await: g++ 12 mishandles lambdas and other temporaries
// inside a co_await expression.)
#pragma once

#include <rex/core/outcome.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace rex {

namespace asio = boost::asio;

namespace detail {

template <class A>
struct awaitable_value;
template <class T, class E>
struct awaitable_value<asio::awaitable<T, E>> {
  using type = T;
};

template <class Item, class Fn, class T>
struct FanOutState {
  FanOutState(std::vector<Item> items_in, Fn fn_in)
      : items(std::move(items_in)), fn(std::move(fn_in)), results(items.size()) {}
  std::vector<Item> items;
  Fn fn;
  std::vector<Outcome<T>> results;
  std::size_t next = 0;
};

template <class Item, class Fn, class T>
asio::awaitable<void> fan_out_worker(std::shared_ptr<FanOutState<Item, Fn, T>> state) {
  // Cancellation must reach the job, but must not turn into a throw at our own co_awaits: the
  // job's outcome records it.
  co_await asio::this_coro::throw_if_cancelled(false);
  while (state->next < state->items.size()) {
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
      co_return;
    const std::size_t index = state->next++;
    try {
      if constexpr (std::is_void_v<T>) {
        co_await state->fn(state->items[index]);
        state->results[index] = Outcome<void>::success();
      } else {
        auto value = co_await state->fn(state->items[index]);
        state->results[index] = Outcome<T>::success(std::move(value));
      }
    } catch (...) {
      state->results[index] = Outcome<T>::failure(std::current_exception());
    }
  }
}

}  // namespace detail

template <class Item, class Fn,
          class T = typename detail::awaitable_value<std::invoke_result_t<Fn&, Item&>>::type>
asio::awaitable<std::vector<Outcome<T>>> fan_out(std::vector<Item> items, std::size_t parallelism,
                                                 Fn fn) {
  if (parallelism == 0)
    throw std::invalid_argument("fan_out: parallelism must be at least 1");
  auto state = std::make_shared<detail::FanOutState<Item, Fn, T>>(std::move(items), std::move(fn));
  if (state->items.empty())
    co_return std::vector<Outcome<T>>();

  auto executor = co_await asio::this_coro::executor;
  const std::size_t workers = std::min(parallelism, state->items.size());
  using Op = decltype(asio::co_spawn(executor, detail::fan_out_worker<Item, Fn, T>(state),
                                     asio::deferred));
  std::vector<Op> ops;
  ops.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i)
    ops.push_back(
        asio::co_spawn(executor, detail::fan_out_worker<Item, Fn, T>(state), asio::deferred));
  auto group = asio::experimental::make_parallel_group(std::move(ops));
  auto token = asio::use_awaitable;
  auto condition = asio::experimental::wait_for_all();
  co_await group.async_wait(condition, token);

  auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none)
    throw boost::system::system_error(asio::error::operation_aborted, "fan_out: cancelled");
  co_return std::move(state->results);
}

}  // namespace rex
