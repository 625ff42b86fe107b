// SandboxPool and fan_out with deployments that start at once (dummy, local) and a scripted one
// that fails, dies or takes its time, so every rule of the pool is checked in milliseconds.
#include <rex/backends/dummy/dummy_deployment.hpp>
#include <rex/backends/local/local_deployment.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/dummy_runtime.hpp>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>

#include "support/async_test.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// What the scripted deployments of one test share: how they behave and what they saw.
struct Probe {
  int fail_first = 0;  // the first N start() calls fail
  std::chrono::milliseconds start_delay{0};
  int starts = 0;
  int stops = 0;
  int existing = 0;  // starting or started, not yet stopped
  int max_existing = 0;
  std::vector<class ScriptedDeployment*> live;
};

class ScriptedDeployment final : public Deployment {
 public:
  ScriptedDeployment(asio::any_io_executor executor, std::shared_ptr<Probe> probe)
      : executor_(std::move(executor)), probe_(std::move(probe)) {}
  ~ScriptedDeployment() override { forget(); }

  asio::awaitable<void> start() override {
    const int n = ++probe_->starts;
    ++probe_->existing;
    probe_->max_existing = std::max(probe_->max_existing, probe_->existing);
    exists_ = true;
    if (probe_->start_delay.count() > 0) {
      asio::steady_timer timer(executor_, probe_->start_delay);
      co_await timer.async_wait(asio::use_awaitable);
    }
    if (n <= probe_->fail_first) {
      exists_ = false;
      --probe_->existing;
      throw DeploymentStartupError(fmt::format("container exited: boom {}", n));
    }
    started_ = true;
    probe_->live.push_back(this);
  }
  asio::awaitable<void> stop() override {
    if (exists_) {
      exists_ = false;
      --probe_->existing;
      ++probe_->stops;
    }
    started_ = false;
    forget();
    co_return;
  }
  asio::awaitable<IsAliveResponse> is_alive() override {
    IsAliveResponse r;
    r.is_alive = started_ && alive_;
    if (!r.is_alive)
      r.message = "killed";
    co_return r;
  }
  Runtime& runtime() override {
    if (!started_)
      throw DeploymentNotStartedError("not started");
    return runtime_;
  }
  bool started() const noexcept override { return started_; }
  void kill() { alive_ = false; }

 private:
  void forget() {
    auto& live = probe_->live;
    live.erase(std::remove(live.begin(), live.end(), this), live.end());
  }
  asio::any_io_executor executor_;
  std::shared_ptr<Probe> probe_;
  DummyRuntime runtime_;
  bool started_ = false;
  bool exists_ = false;
  bool alive_ = true;
};

SandboxPoolConfig scripted(const std::shared_ptr<Probe>& probe, std::size_t max = 4,
                           std::size_t spares = 0) {
  SandboxPoolConfig c;
  c.factory = [probe](asio::any_io_executor executor) -> std::unique_ptr<Deployment> {
    return std::make_unique<ScriptedDeployment>(std::move(executor), probe);
  };
  c.max_sandboxes = max;
  c.warm_spares = spares;
  c.retry_backoff.initial_delay = 10ms;
  c.retry_backoff.max_delay = 40ms;
  c.health_check_timeout = 1000ms;
  return c;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

// Polls until cond holds; the test's deadline bounds it.
asio::awaitable<void> until(std::function<bool()> cond) {
  while (!cond())
    co_await sleep_for(1ms);
}

asio::awaitable<std::size_t> hold(SandboxPool& pool, std::chrono::milliseconds d, int& in_flight,
                                  int& max_in_flight) {
  auto lease = co_await pool.acquire();
  ++in_flight;
  max_in_flight = std::max(max_in_flight, in_flight);
  co_await sleep_for(d);
  --in_flight;
  co_return lease.sandbox_id();
}

// Acquires, notes the sandbox's id, and hands it back at once.
asio::awaitable<void> take_id(SandboxPool& pool, std::uint64_t& id) {
  auto lease = co_await pool.acquire();
  id = lease.sandbox_id();
}

TEST(SandboxPoolConfig, RefusesSettingsThatCannotWork) {
  SandboxPoolConfig c;
  c.max_sandboxes = 0;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.max_sandboxes = 2;
  c.warm_spares = 3;
  try {
    validate(c);
    ADD_FAILURE() << "warm_spares above the maximum accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("SandboxPoolConfig.warm_spares"));
  }
  c.warm_spares = 0;
  c.start_attempts = 0;
  EXPECT_THROW(validate(c), std::invalid_argument);
}

TEST(SandboxPoolConfig, RetryDelayDoublesUpToTheMaximumMinusJitter) {
  SandboxPoolConfig c;
  c.retry_backoff.initial_delay = 100ms;
  c.retry_backoff.max_delay = 1000ms;
  c.retry_backoff.jitter = 0.5;
  EXPECT_EQ(retry_delay(c, 1, 0.0), 100ms);
  EXPECT_EQ(retry_delay(c, 2, 0.0), 200ms);
  EXPECT_EQ(retry_delay(c, 3, 0.0), 400ms);
  EXPECT_EQ(retry_delay(c, 5, 0.0), 1000ms);
  EXPECT_EQ(retry_delay(c, 50, 0.0), 1000ms);
  EXPECT_EQ(retry_delay(c, 1, 0.999), 51ms);
}

asio::awaitable<void> respects_max(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe, 3));
  int in_flight = 0;
  int max_in_flight = 0;
  std::vector<int> jobs(12);
  auto job = [&](int&) { return hold(pool, 5ms, in_flight, max_in_flight); };
  auto results = co_await fan_out(jobs, 12, job);
  for (auto& r : results)
    EXPECT_TRUE(r.has_value()) << r.error_message();
  EXPECT_LE(max_in_flight, 3);
  EXPECT_EQ(max_in_flight, 3);
  EXPECT_LE(probe->max_existing, 3);
  EXPECT_EQ(pool.stats().waiters, 0u);
  co_await pool.shutdown();
  EXPECT_EQ(probe->existing, 0);
}

TEST(SandboxPool, NeverRunsMoreThanMaxSandboxes) {
  auto probe = std::make_shared<Probe>();
  probe->start_delay = 3ms;
  test::run_async(respects_max(probe), 20s);
}

asio::awaitable<void> warm_spares(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe, 4, 2));
  std::function<bool()> two_spares = [&] { return pool.stats().spares == 2; };
  co_await until(two_spares);
  EXPECT_EQ(probe->starts, 2);
  const auto t0 = Clock::now();
  auto lease = co_await pool.acquire();
  EXPECT_LT(Clock::now() - t0, 50ms);  // a start takes 200 ms
  EXPECT_EQ(pool.stats().leased, 1u);
  co_await until(two_spares);  // topped up again
  EXPECT_EQ(probe->starts, 3);
  co_await pool.shutdown();
  EXPECT_EQ(probe->existing, 0);
}

TEST(SandboxPool, WarmSparesAreStartedAheadAndServeAtOnce) {
  auto probe = std::make_shared<Probe>();
  probe->start_delay = 200ms;
  test::run_async(warm_spares(probe), 20s);
}

asio::awaitable<void> retries(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe));
  const auto t0 = Clock::now();
  auto lease = co_await pool.acquire();
  EXPECT_GE(Clock::now() - t0, 24ms);  // 10 + 20 ms less at most 20% jitter
  EXPECT_EQ(probe->starts, 3);
  EXPECT_EQ(pool.stats().failed_attempts, 2u);
  EXPECT_EQ(pool.stats().failed_starts, 0u);
  auto alive = co_await lease.check();
  EXPECT_TRUE(alive.is_alive);
  co_await pool.shutdown();
}

TEST(SandboxPool, RetriesAFailingStartWithBackoff) {
  auto probe = std::make_shared<Probe>();
  probe->fail_first = 2;
  test::run_async(retries(probe), 20s);
}

asio::awaitable<void> persistent_failure(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe));
  bool thrown = false;
  try {
    co_await pool.acquire();
  } catch (const SandboxStartError& e) {
    thrown = true;
    EXPECT_EQ(e.attempts(), 3);
    EXPECT_EQ(e.cause(), "container exited: boom 3");
    EXPECT_THAT(e.what(), HasSubstr("after 3 attempts: container exited: boom 3"));
  }
  EXPECT_TRUE(thrown);
  EXPECT_EQ(pool.stats().failed_starts, 1u);
  EXPECT_EQ(pool.stats().starting, 0u);
  // The slot is free again: a later acquire starts afresh (and succeeds once starts work).
  probe->fail_first = 0;
  auto lease = co_await pool.acquire();
  EXPECT_TRUE(static_cast<bool>(lease));
  co_await pool.shutdown();
}

TEST(SandboxPool, PersistentStartFailureCarriesTheCause) {
  auto probe = std::make_shared<Probe>();
  probe->fail_first = 1000;
  test::run_async(persistent_failure(probe), 20s);
}

asio::awaitable<void> queue_up(SandboxPool& pool, int number, std::vector<int>& order) {
  auto lease = co_await pool.acquire();
  order.push_back(number);
  co_await sleep_for(2ms);
}

asio::awaitable<void> fifo(std::shared_ptr<Probe> probe) {
  auto executor = co_await asio::this_coro::executor;
  SandboxPool pool(executor, scripted(probe, 1));
  auto first = co_await pool.acquire();
  std::vector<int> order;
  for (int i = 1; i <= 4; ++i)
    asio::co_spawn(executor, queue_up(pool, i, order), asio::detached);
  std::function<bool()> four_waiting = [&] { return pool.stats().waiters == 4; };
  co_await until(four_waiting);
  first = SandboxLease();
  std::function<bool()> all_served = [&] { return order.size() == 4; };
  co_await until(all_served);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(probe->starts, 1);  // recycled from one to the next
  co_await pool.shutdown();
}

TEST(SandboxPool, WaitersAreServedInOrder) {
  test::run_async(fifo(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> cancelled_waiter(std::shared_ptr<Probe> probe) {
  auto executor = co_await asio::this_coro::executor;
  SandboxPool pool(executor, scripted(probe, 1));
  auto held = co_await pool.acquire();
  asio::steady_timer timer(executor, 20ms);
  auto raced = co_await (pool.acquire() || timer.async_wait(asio::use_awaitable));
  EXPECT_EQ(raced.index(), 1u);
  EXPECT_EQ(pool.stats().waiters, 0u);
  co_await held.release();
  EXPECT_EQ(pool.stats().spares, 1u);
  auto again = co_await pool.acquire();
  EXPECT_EQ(probe->starts, 1);
  co_await pool.shutdown();
}

TEST(SandboxPool, ACancelledWaiterLeavesNoSlotBehind) {
  test::run_async(cancelled_waiter(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> raii(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe, 2));
  std::uint64_t id = 0;
  {
    auto lease = co_await pool.acquire();
    id = lease.sandbox_id();
    SandboxLease moved = std::move(lease);
    EXPECT_FALSE(static_cast<bool>(lease));
    EXPECT_EQ(pool.stats().leased, 1u);
  }
  std::function<bool()> back = [&] { return pool.stats().spares == 1; };
  co_await until(back);
  EXPECT_EQ(pool.stats().leased, 0u);
  auto lease = co_await pool.acquire();
  EXPECT_EQ(lease.sandbox_id(), id);
  co_await pool.shutdown();
}

TEST(SandboxPool, DestroyingALeaseHandsTheSandboxBack) {
  test::run_async(raii(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> recycle_local(std::string dir) {
  SandboxPoolConfig c;
  LocalDeploymentConfig local;
  local.working_dir = dir;
  c.deployment = local;
  c.max_sandboxes = 1;
  SandboxPool pool(co_await asio::this_coro::executor, c);
  CreateBashSessionRequest create;
  create.startup_timeout = 10;
  create.session = "s";
  std::uint64_t id = 0;
  {
    auto lease = co_await pool.acquire();
    id = lease.sandbox_id();
    co_await lease.runtime().create_session(create);
    co_await lease.release();
  }
  auto lease = co_await pool.acquire();
  EXPECT_EQ(lease.sandbox_id(), id);                // the same sandbox...
  co_await lease.runtime().create_session(create);  // ...without the old session
  BashAction a;
  a.command = "echo $((6*7))";
  a.session = "s";
  a.timeout = 10;
  auto obs = co_await lease.runtime().run_in_session(a);
  EXPECT_THAT(obs.output, HasSubstr("42"));
  co_await pool.shutdown();
}

TEST(SandboxPool, RecycleClosesTheSessionsOfTheLastLease) {
  test::run_async(recycle_local(::testing::TempDir()), 30s);
}

asio::awaitable<void> stop_policy(std::shared_ptr<Probe> probe) {
  auto config = scripted(probe, 1);
  config.return_policy = ReturnPolicy::stop;
  SandboxPool pool(co_await asio::this_coro::executor, config);
  auto lease = co_await pool.acquire();
  const auto first = lease.sandbox_id();
  co_await lease.release();
  EXPECT_EQ(probe->stops, 1);
  EXPECT_EQ(pool.stats().running, 0u);
  lease = co_await pool.acquire();
  EXPECT_NE(lease.sandbox_id(), first);
  EXPECT_EQ(probe->starts, 2);
  co_await pool.shutdown();
}

TEST(SandboxPool, StopPolicyStartsAFreshSandbox) {
  test::run_async(stop_policy(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> surplus_trimmed(std::shared_ptr<Probe> probe) {
  auto config = scripted(probe, 4, 1);
  config.surplus_idle_timeout = 300ms;
  SandboxPool pool(co_await asio::this_coro::executor, config);
  std::function<bool()> one_spare = [&] { return pool.stats().spares == 1; };
  co_await until(one_spare);
  std::vector<SandboxLease> leases;
  for (int i = 0; i < 3; ++i) {
    auto lease = co_await pool.acquire();
    leases.push_back(std::move(lease));
  }
  co_await until(one_spare);  // topped up: 3 leased + 1 spare = max_sandboxes
  EXPECT_EQ(probe->starts, 4);

  const auto released = Clock::now();
  for (auto& lease : leases)
    co_await lease.release();
  EXPECT_EQ(pool.stats().spares, 4u);  // recycled, not yet idle for surplus_idle_timeout

  // Within the timeout a surplus spare serves the next acquire: no start.
  auto again = co_await pool.acquire();
  EXPECT_EQ(probe->starts, 4);
  co_await again.release();

  co_await until(one_spare);  // the surplus is stopped, the warm spare stays
  EXPECT_GE(Clock::now() - released, 300ms);
  EXPECT_EQ(pool.stats().trimmed, 3u);
  EXPECT_EQ(probe->stops, 3);
  EXPECT_EQ(probe->existing, 1);
  EXPECT_EQ(pool.stats().running, 1u);
  co_await sleep_for(400ms);  // and nothing more goes
  EXPECT_EQ(pool.stats().spares, 1u);
  EXPECT_EQ(probe->starts, 4);
  co_await pool.shutdown();
  EXPECT_EQ(probe->existing, 0);
}

TEST(SandboxPool, RecycledSparesBeyondWarmSparesAreStoppedWhenIdle) {
  test::run_async(surplus_trimmed(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> surplus_at_once(std::shared_ptr<Probe> probe) {
  auto executor = co_await asio::this_coro::executor;
  auto config = scripted(probe, 1);
  config.surplus_idle_timeout = 0ms;
  SandboxPool pool(executor, config);
  // A waiter gets the recycled sandbox...
  auto lease = co_await pool.acquire();
  const auto first = lease.sandbox_id();
  std::uint64_t second = 0;
  asio::co_spawn(executor, take_id(pool, second), asio::detached);
  std::function<bool()> waiting = [&] { return pool.stats().waiters == 1; };
  co_await until(waiting);
  co_await lease.release();
  std::function<bool()> served = [&] { return second != 0; };
  co_await until(served);
  EXPECT_EQ(second, first);
  EXPECT_EQ(probe->starts, 1);
  // ...and without one, a recycled sandbox is stopped at once.
  std::function<bool()> stopped = [&] { return probe->stops == 1; };
  co_await until(stopped);
  EXPECT_EQ(pool.stats().trimmed, 1u);  // the second return only
  EXPECT_EQ(pool.stats().spares, 0u);
  EXPECT_EQ(pool.stats().running, 0u);
  co_await pool.shutdown();
}

TEST(SandboxPool, WithoutIdleTimeASurplusSpareIsStoppedUnlessAWaiterTakesIt) {
  test::run_async(surplus_at_once(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> broken(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe, 2));
  auto lease = co_await pool.acquire();
  const auto first = lease.sandbox_id();
  lease.mark_broken();
  co_await lease.release();
  EXPECT_EQ(pool.stats().replaced, 1u);
  EXPECT_EQ(probe->stops, 1);
  lease = co_await pool.acquire();
  EXPECT_NE(lease.sandbox_id(), first);
  co_await pool.shutdown();
}

TEST(SandboxPool, ABrokenLeaseIsReplaced) {
  test::run_async(broken(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> dead_spare(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe, 2, 1));
  std::function<bool()> spare = [&] { return pool.stats().spares == 1; };
  co_await until(spare);
  probe->live.front()->kill();
  auto lease = co_await pool.acquire();
  auto alive = co_await lease.check();
  EXPECT_TRUE(alive.is_alive);
  EXPECT_EQ(lease.sandbox_id(), 2u);
  EXPECT_EQ(pool.stats().replaced, 1u);
  co_await pool.shutdown();
  EXPECT_EQ(probe->existing, 0);
}

TEST(SandboxPool, ADeadSpareIsReplacedOnAcquire) {
  test::run_async(dead_spare(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> died_while_leased(std::shared_ptr<Probe> probe) {
  SandboxPool pool(co_await asio::this_coro::executor, scripted(probe, 2));
  auto lease = co_await pool.acquire();
  probe->live.front()->kill();
  auto alive = co_await lease.check();
  EXPECT_FALSE(alive.is_alive);
  EXPECT_EQ(alive.message, "killed");
  EXPECT_TRUE(lease.broken());
  co_await lease.release();
  EXPECT_EQ(pool.stats().replaced, 1u);
  EXPECT_EQ(pool.stats().running, 0u);
  co_await pool.shutdown();
}

TEST(SandboxPool, ALeaseSaysWhenItsSandboxDied) {
  test::run_async(died_while_leased(std::make_shared<Probe>()), 20s);
}

asio::awaitable<void> wait_and_record(SandboxPool& pool, std::string& error) {
  try {
    co_await pool.acquire();
  } catch (const SandboxPoolClosedError& e) {
    error = e.what();
  }
}

asio::awaitable<void> shutdown(std::shared_ptr<Probe> probe) {
  auto executor = co_await asio::this_coro::executor;
  SandboxPool pool(executor, scripted(probe, 2, 1));
  auto lease = co_await pool.acquire();
  auto second = co_await pool.acquire();
  std::string waiter_error;
  asio::co_spawn(executor, wait_and_record(pool, waiter_error), asio::detached);
  std::function<bool()> waiting = [&] { return pool.stats().waiters == 1; };
  co_await until(waiting);
  co_await pool.shutdown();
  EXPECT_EQ(probe->existing, 0);  // leased ones too
  EXPECT_EQ(pool.stats().running, 0u);
  std::function<bool()> woken = [&] { return !waiter_error.empty(); };
  co_await until(woken);
  EXPECT_THAT(waiter_error, HasSubstr("shut down"));
  REX_CO_EXPECT_THROW(lease.runtime(), SandboxPoolClosedError);
  REX_CO_EXPECT_THROW(co_await pool.acquire(), SandboxPoolClosedError);
  co_await pool.shutdown();  // again: nothing to do
  co_await second.release();
  lease = SandboxLease();
  EXPECT_EQ(probe->stops, 2);
}

TEST(SandboxPool, ShutdownStopsEverythingAndRefusesAcquires) {
  test::run_async(shutdown(std::make_shared<Probe>()), 20s);
}

// --- fan_out ----------------------------------------------------------------------------------

asio::awaitable<int> square_or_throw(int x, int& in_flight, int& max_in_flight) {
  ++in_flight;
  max_in_flight = std::max(max_in_flight, in_flight);
  co_await sleep_for(std::chrono::milliseconds(x % 3));
  --in_flight;
  if (x % 7 == 0)
    throw std::runtime_error(fmt::format("no {}", x));
  co_return x* x;
}

asio::awaitable<void> fan_out_basics() {
  std::vector<int> items;
  for (int i = 1; i <= 50; ++i)
    items.push_back(i);
  int in_flight = 0;
  int max_in_flight = 0;
  auto fn = [&](int& x) { return square_or_throw(x, in_flight, max_in_flight); };
  auto results = co_await fan_out(items, 4, fn);
  EXPECT_EQ(results.size(), 50u);
  EXPECT_EQ(max_in_flight, 4);
  for (int i = 1; i <= 50; ++i) {
    auto& r = results[static_cast<std::size_t>(i - 1)];
    if (i % 7 == 0) {
      EXPECT_FALSE(r.has_value());
      EXPECT_EQ(r.error_message(), fmt::format("no {}", i));
    } else {
      EXPECT_EQ(r.value(), i * i);
    }
  }
}

TEST(FanOut, KeepsOrderBoundsParallelismAndCapturesErrors) {
  test::run_async(fan_out_basics(), 20s);
}

asio::awaitable<std::string> use_dummy(SandboxPool& pool, int job) {
  auto lease = co_await pool.acquire();
  auto command = fmt::format("job {}", job);
  Command c;
  c.command = command;
  co_await lease.runtime().execute(c);
  co_return fmt::format("{}@{}", job, lease.sandbox_id());
}

asio::awaitable<void> fan_out_thousand() {
  SandboxPoolConfig c;
  c.deployment = DummyDeploymentConfig();
  c.max_sandboxes = 16;
  c.warm_spares = 4;
  SandboxPool pool(co_await asio::this_coro::executor, c);
  std::vector<int> items(1000);
  for (int i = 0; i < 1000; ++i)
    items[static_cast<std::size_t>(i)] = i;
  auto fn = [&pool](int& job) { return use_dummy(pool, job); };
  auto results = co_await fan_out(items, 64, fn);
  std::set<std::string> sandboxes;
  for (int i = 0; i < 1000; ++i) {
    auto& r = results[static_cast<std::size_t>(i)];
    EXPECT_TRUE(r.has_value()) << r.error_message();
    if (!r.has_value())
      continue;
    EXPECT_EQ(r.value().substr(0, r.value().find('@')), std::to_string(i));
    sandboxes.insert(r.value().substr(r.value().find('@')));
  }
  EXPECT_LE(sandboxes.size(), 16u);
  EXPECT_LE(pool.stats().started, 16u);
  co_await pool.shutdown();
}

TEST(FanOut, AThousandJobsThroughAPoolOfDummies) {
  test::run_async(fan_out_thousand(), 30s);
}

asio::awaitable<void> slow_job(int& aborted) {
  try {
    co_await sleep_for(10s);
  } catch (const boost::system::system_error&) {
    ++aborted;
    throw;
  }
}

asio::awaitable<void> fan_out_cancel() {
  std::vector<int> items(10);
  int aborted = 0;
  auto fn = [&](int&) { return slow_job(aborted); };
  asio::steady_timer timer(co_await asio::this_coro::executor, 30ms);
  const auto t0 = Clock::now();
  auto raced = co_await (fan_out(items, 3, fn) || timer.async_wait(asio::use_awaitable));
  EXPECT_EQ(raced.index(), 1u);
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(aborted, 3);  // the running ones; the rest never started
}

TEST(FanOut, CancellingTheFanOutCancelsItsJobs) {
  test::run_async(fan_out_cancel(), 20s);
}

}  // namespace
}  // namespace rex
