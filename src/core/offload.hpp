// Runs blocking work (file system, archives) on a thread pool and resumes the awaiting
// coroutine on its own executor, so an io_context thread never waits for a disk.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <type_traits>

namespace rex::detail {

namespace asio = boost::asio;

/// `caller` is the awaiting coroutine's executor: it is kept busy meanwhile, so its io_context
/// does not run dry and return while only the pool has work.
template <class F>
asio::awaitable<std::invoke_result_t<F>> offload(asio::thread_pool& pool,
                                                 asio::any_io_executor caller, F work) {
  using R = std::invoke_result_t<F>;
  auto busy = asio::make_work_guard(caller);
  // g++ 12 miscompiles closures and braced temporaries inside co_await expressions: every
  // such object is a named local first.
  auto task = [work = std::move(work)]() mutable -> asio::awaitable<R> { co_return work(); };
  co_return co_await asio::co_spawn(pool.get_executor(), std::move(task), asio::use_awaitable);
}

}  // namespace rex::detail
