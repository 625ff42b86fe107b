#include <rex/core/event.hpp>
#include <rex/core/log.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/timeout.hpp>
#include <rex/pool/pool_errors.hpp>
#include <rex/pool/sandbox_lease.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include "pool/sandbox_pool_policy.hpp"

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <list>
#include <random>
#include <set>
#include <system_error>
#include <variant>
#include <vector>

namespace rex::detail {

struct PooledSandbox {
  std::unique_ptr<Deployment> deployment;
  std::uint64_t id = 0;
  bool broken = false;
  bool stopped_by_shutdown = false;
  std::chrono::steady_clock::time_point idle_since{};  // when it last became a spare
};

namespace {

using Sandbox = std::shared_ptr<PooledSandbox>;

// One acquire() waiting in line: woken once, with a sandbox or the error that ends its wait.
struct Waiter {
  explicit Waiter(const asio::any_io_executor& executor) : wake(executor) {}
  Event wake;
  Outcome<Sandbox> result;
};

// Logs what a background coroutine let escape; they catch everything they expect themselves.
struct LogEscape {
  void operator()(std::exception_ptr error) const {
    if (!error)
      return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      logging::error("sandbox pool: background task failed: {}", e.what());
    } catch (...) {
      logging::error("sandbox pool: background task failed");
    }
  }
};

}  // namespace

class SandboxPoolState : public std::enable_shared_from_this<SandboxPoolState> {
 public:
  SandboxPoolState(asio::any_io_executor ex, SandboxPoolConfig cfg)
      : executor(std::move(ex)),
        config(std::move(cfg)),
        policy(config),
        drained(executor),
        trim_timer(executor),
        rng(std::random_device{}()) {}

  asio::any_io_executor executor;
  SandboxPoolConfig config;
  SandboxPoolPolicy policy;  // every decision; this class carries them out
  std::deque<Sandbox> spares;
  std::set<Sandbox> leased;
  std::list<std::shared_ptr<Waiter>> waiters;
  std::set<asio::steady_timer*> backoff_timers;
  Event drained;  // set whenever a start or a return finishes; shutdown() re-checks
  // Wakes trim_later() when the longest-idle surplus spare is due to be stopped.
  asio::steady_timer trim_timer;
  asio::steady_timer::time_point trim_due{};
  bool trim_armed = false;
  std::mt19937_64 rng;
  std::size_t starting = 0;
  std::size_t returning = 0;  // handed back, being recycled or stopped
  SandboxPoolStats counters;  // started, failed_*, replaced; the rest is computed
  std::size_t stopped = 0;
  std::uint64_t next_id = 1;
  bool closed = false;
  bool spares_paused = false;  // the last start failed every attempt

  PoolCounts counts() const noexcept {
    return {.starting = starting,
            .spares = spares.size(),
            .leased = leased.size(),
            .returning = returning,
            .waiters = waiters.size(),
            .spares_paused = spares_paused,
            .closed = closed};
  }

  std::unique_ptr<Deployment> make() {
    if (config.factory)
      return config.factory(executor);
    return make_deployment(executor, config.deployment);
  }

  void notify() { drained.set(); }

  void add_spare(Sandbox sandbox, bool front = false) {
    sandbox->idle_since = PoolClock::now();
    if (front)
      spares.push_front(std::move(sandbox));
    else
      spares.push_back(std::move(sandbox));
  }

  // Hands spares to waiters in line, starts what waiters and spares still want, and stops
  // spares beyond warm_spares that nobody wanted for surplus_idle_timeout.
  void pump() {
    if (closed)
      return;
    while (!waiters.empty() && !spares.empty()) {
      auto waiter = waiters.front();
      waiters.pop_front();
      leased.insert(spares.front());
      waiter->result = Outcome<Sandbox>::success(spares.front());
      spares.pop_front();
      waiter->wake.set();
    }
    // Asked each round: a start may complete (and serve a waiter) inside co_spawn.
    while (policy.wants_start(counts())) {
      ++starting;
      asio::co_spawn(executor, start_one(shared_from_this()), LogEscape{});
    }
    trim_surplus();
  }

  // Stops spares, the longest idle first, while the policy finds more than warm_spares of them
  // idle for surplus_idle_timeout; else arms the timer for when that will be so.
  void trim_surplus() {
    const auto now = PoolClock::now();
    std::vector<PoolClock::time_point> idle;
    while (policy.has_surplus(spares.size(), waiters.size())) {
      idle.clear();
      for (const auto& spare : spares)
        idle.push_back(spare->idle_since);
      const TrimStep step = policy.trim(idle, waiters.size(), now);
      if (step.wake)
        arm_trim(*step.wake);
      if (!step.stop)
        return;
      const auto oldest = spares.begin() + static_cast<std::ptrdiff_t>(*step.stop);
      Sandbox sandbox = *oldest;
      spares.erase(oldest);
      ++counters.trimmed;
      ++returning;
      asio::co_spawn(executor, stop_sandbox(shared_from_this(), std::move(sandbox)), LogEscape{});
    }
  }

  void arm_trim(asio::steady_timer::time_point due) {
    if (trim_armed) {
      if (due < trim_due) {
        trim_due = due;
        trim_timer.cancel();  // trim_later() waits again, for the earlier time
      }
      return;
    }
    trim_armed = true;
    trim_due = due;
    asio::co_spawn(executor, trim_later(shared_from_this()), LogEscape{});
  }

  static asio::awaitable<void> trim_later(std::shared_ptr<SandboxPoolState> self) {
    while (!self->closed && asio::steady_timer::clock_type::now() < self->trim_due) {
      self->trim_timer.expires_at(self->trim_due);
      boost::system::error_code ec;
      co_await self->trim_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    self->trim_armed = false;
    self->pump();
  }

  void fail_first_waiter(std::exception_ptr error) {
    if (waiters.empty())
      return;
    auto waiter = waiters.front();
    waiters.pop_front();
    waiter->result = Outcome<Sandbox>::failure(std::move(error));
    waiter->wake.set();
  }

  // Starts one sandbox with retries; it becomes a spare (and pump() hands it to a waiter).
  static asio::awaitable<void> start_one(std::shared_ptr<SandboxPoolState> self) {
    const int attempts = self->config.start_attempts;
    int attempt = 0;
    std::string cause;
    while (!self->closed) {
      ++attempt;
      bool fatal = false;
      std::unique_ptr<Deployment> deployment;
      bool ok = false;
      try {
        deployment = self->make();
        co_await deployment->start();
        ok = true;
      } catch (const DeploymentConfigError& e) {
        cause = e.what();
        fatal = true;  // the same config fails the same way: no point in retrying
      } catch (const std::exception& e) {
        cause = e.what();
      }
      if (ok) {
        auto sandbox = std::make_shared<PooledSandbox>();
        sandbox->deployment = std::move(deployment);
        sandbox->id = self->next_id++;
        ++self->counters.started;
        --self->starting;
        self->spares_paused = false;
        if (self->closed) {
          ++self->returning;
          co_await stop_sandbox(self, sandbox);
        } else {
          self->add_spare(std::move(sandbox));
          self->pump();
        }
        self->notify();
        co_return;
      }
      ++self->counters.failed_attempts;
      logging::warn("sandbox pool: start attempt {}/{} failed: {}", attempt, attempts, cause);
      if (deployment) {
        try {
          co_await deployment->stop();  // a failed start released everything; stop() is cheap
        } catch (const std::exception& e) {
          logging::warn("sandbox pool: stop after a failed start: {}", e.what());
        }
      }
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      const StartRetry next =
          self->policy.after_failed_start(attempt, fatal, self->closed, unit(self->rng));
      if (!next.retry)
        break;
      co_await backoff(self, next.delay);
    }
    --self->starting;
    ++self->counters.failed_starts;
    if (!self->closed) {
      self->spares_paused = true;
      self->fail_first_waiter(std::make_exception_ptr(SandboxStartError(attempt, cause)));
      self->pump();
    }
    self->notify();
  }

  static asio::awaitable<void> backoff(std::shared_ptr<SandboxPoolState> self,
                                       std::chrono::milliseconds delay) {
    asio::steady_timer timer(self->executor, delay);
    self->backoff_timers.insert(&timer);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    self->backoff_timers.erase(&timer);
  }

  // Stops a sandbox counted in `returning`, and uncounts it.
  static asio::awaitable<void> stop_sandbox(std::shared_ptr<SandboxPoolState> self,
                                            Sandbox sandbox) {
    try {
      co_await sandbox->deployment->stop();
    } catch (const std::exception& e) {
      logging::warn("sandbox pool: stopping sandbox {} failed: {}", sandbox->id, e.what());
    }
    ++self->stopped;
    --self->returning;
    self->pump();
    self->notify();
  }

  // is_alive within the health-check timeout; an error or no answer counts as dead.
  static asio::awaitable<IsAliveResponse> health(std::shared_ptr<SandboxPoolState> self,
                                                 Sandbox sandbox) {
    auto asking = sandbox->deployment->is_alive();
    auto limited = with_timeout(std::move(asking), self->config.health_check_timeout);
    auto result = co_await capture(std::move(limited));
    IsAliveResponse answer;
    if (result && *result) {
      answer = std::move(**result);
    } else if (result) {
      answer.is_alive = false;
      answer.message = fmt::format("sandbox {} did not answer is_alive within {} ms", sandbox->id,
                                   self->config.health_check_timeout.count());
    } else {
      answer.is_alive = false;
      answer.message =
          fmt::format("sandbox {}: is_alive failed: {}", sandbox->id, result.error_message());
      auto state = co_await asio::this_coro::cancellation_state;
      if (state.cancelled() != asio::cancellation_type::none)
        std::rethrow_exception(result.error());  // the caller gave up: not the sandbox's fault
    }
    co_return answer;
  }

  // Recycles or stops a sandbox handed back (counted in `returning`).
  static asio::awaitable<void> take_back(std::shared_ptr<SandboxPoolState> self, Sandbox sandbox) {
    bool reuse = self->policy.try_reuse(sandbox->broken, self->closed);
    if (reuse) {
      auto closing = sandbox->deployment->runtime().close();
      auto limited = with_timeout(std::move(closing), self->config.health_check_timeout);
      auto closed = co_await capture(std::move(limited));
      if (!closed)
        logging::warn("sandbox pool: closing sandbox {} failed: {}", sandbox->id,
                      closed.error_message());
      reuse = closed && closed->has_value();
      if (reuse) {
        auto alive = co_await health(self, sandbox);
        reuse = alive.is_alive;
      }
    }
    if (reuse && !self->closed) {
      --self->returning;
      self->add_spare(std::move(sandbox));
      self->pump();
      self->notify();
      co_return;
    }
    if (self->policy.counts_as_replaced(sandbox->broken, self->closed))
      ++self->counters.replaced;  // not reusable although the policy wanted it back
    co_await stop_sandbox(self, std::move(sandbox));
  }

  static asio::awaitable<void> take_back_then_signal(std::shared_ptr<SandboxPoolState> self,
                                                     Sandbox sandbox, std::shared_ptr<Event> done) {
    auto taking = take_back(self, std::move(sandbox));
    auto taken = co_await capture(std::move(taking));
    done->set();
    taken.value();  // rethrows for LogEscape
  }

  // The synchronous half of ending a lease. Returns false when nothing more is to be done.
  bool detach_lease(const Sandbox& sandbox) {
    leased.erase(sandbox);
    if (sandbox->stopped_by_shutdown) {
      notify();
      return false;
    }
    ++returning;
    return true;
  }

  void end_lease(Sandbox sandbox) {
    if (detach_lease(sandbox))
      asio::co_spawn(executor, take_back(shared_from_this(), std::move(sandbox)), LogEscape{});
  }

  // A sandbox granted to a caller that gave up before using it: straight back to the spares.
  void give_back_unused(Sandbox sandbox) {
    leased.erase(sandbox);
    if (closed) {
      ++returning;
      asio::co_spawn(executor, stop_sandbox(shared_from_this(), std::move(sandbox)), LogEscape{});
      return;
    }
    add_spare(std::move(sandbox), true);
    pump();
  }

  // Waits in line (or not at all, with a spare and nobody ahead) for a sandbox now counted as
  // leased.
  static asio::awaitable<Sandbox> wait_for_sandbox(std::shared_ptr<SandboxPoolState> self,
                                                   bool first_in_line) {
    if (self->closed)
      throw SandboxPoolClosedError("acquire: the sandbox pool is shut down");
    if (SandboxPoolPolicy::serve_at_once(self->counts(), first_in_line)) {
      auto sandbox = self->spares.front();
      self->spares.pop_front();
      self->leased.insert(sandbox);
      self->pump();  // top the spares up again
      co_return sandbox;
    }
    auto waiter = std::make_shared<Waiter>(self->executor);
    if (first_in_line)
      self->waiters.push_front(waiter);
    else
      self->waiters.push_back(waiter);
    self->pump();
    co_await waiter->wake.wait();
    auto state = co_await asio::this_coro::cancellation_state;
    const bool cancelled = state.cancelled() != asio::cancellation_type::none;
    if (!waiter->wake.is_set()) {
      // Woken by the caller's cancellation: leave the line; a start made for this waiter ends
      // up as a spare.
      self->waiters.remove(waiter);
      self->pump();
      throw boost::system::system_error(asio::error::operation_aborted,
                                        "acquire: cancelled while waiting for a sandbox");
    }
    Sandbox granted = std::move(waiter->result).value();  // rethrows the error that woke it
    if (cancelled) {
      self->give_back_unused(std::move(granted));
      throw boost::system::system_error(asio::error::operation_aborted,
                                        "acquire: cancelled while waiting for a sandbox");
    }
    co_return granted;
  }

  static asio::awaitable<SandboxLease> acquire(std::shared_ptr<SandboxPoolState> self) {
    bool retry = false;
    for (;;) {
      auto sandbox = co_await wait_for_sandbox(self, retry);
      SandboxLease lease(self, sandbox);
      if (!self->config.health_check_on_acquire)
        co_return lease;
      auto alive = co_await health(self, sandbox);
      if (alive.is_alive)
        co_return lease;
      logging::info("sandbox pool: replacing a dead spare: {}", alive.message);
      lease.mark_broken();
      lease = SandboxLease();  // hands it back: stopped in the background, then replaced
      retry = true;
    }
  }

  static asio::awaitable<void> shutdown(std::shared_ptr<SandboxPoolState> self) {
    if (!self->closed) {
      self->closed = true;
      auto error = std::make_exception_ptr(
          SandboxPoolClosedError("acquire: the sandbox pool was shut down while waiting"));
      while (!self->waiters.empty())
        self->fail_first_waiter(error);
      for (auto* timer : self->backoff_timers)
        timer->cancel();
      self->trim_timer.cancel();
      std::vector<Sandbox> to_stop(self->spares.begin(), self->spares.end());
      self->spares.clear();
      for (const auto& sandbox : self->leased) {
        sandbox->stopped_by_shutdown = true;
        to_stop.push_back(sandbox);
      }
      for (auto& sandbox : to_stop) {
        ++self->returning;
        asio::co_spawn(self->executor, stop_sandbox(self, std::move(sandbox)), LogEscape{});
      }
    }
    while (self->starting > 0 || self->returning > 0) {
      self->drained.reset();
      co_await self->drained.wait();
    }
  }

  SandboxPoolStats stats() const noexcept {
    SandboxPoolStats s = counters;
    s.running = counters.started - stopped;
    s.starting = starting;
    s.leased = leased.size();
    s.spares = spares.size();
    s.waiters = waiters.size();
    return s;
  }
};

}  // namespace rex::detail

namespace rex {

using detail::SandboxPoolState;

// --- SandboxPool ------------------------------------------------------------------------------

namespace {
std::shared_ptr<SandboxPoolState> make_state(asio::any_io_executor executor,
                                             SandboxPoolConfig config) {
  validate(config);
  return std::make_shared<SandboxPoolState>(std::move(executor), std::move(config));
}
}  // namespace

SandboxPool::SandboxPool(asio::any_io_executor executor, SandboxPoolConfig config)
    : state_(make_state(std::move(executor), std::move(config))) {
  state_->pump();
}

SandboxPool::~SandboxPool() {
  if (state_ && (!state_->closed || state_->starting > 0 || state_->returning > 0))
    asio::co_spawn(state_->executor, SandboxPoolState::shutdown(state_), detail::LogEscape{});
}

asio::awaitable<SandboxLease> SandboxPool::acquire() {
  return SandboxPoolState::acquire(state_);
}

asio::awaitable<void> SandboxPool::shutdown() {
  return SandboxPoolState::shutdown(state_);
}

SandboxPoolStats SandboxPool::stats() const noexcept {
  return state_->stats();
}

const SandboxPoolConfig& SandboxPool::config() const noexcept {
  return state_->config;
}

asio::any_io_executor SandboxPool::executor() const noexcept {
  return state_->executor;
}

// --- SandboxLease -----------------------------------------------------------------------------

SandboxLease::SandboxLease(std::shared_ptr<detail::SandboxPoolState> pool,
                           std::shared_ptr<detail::PooledSandbox> sandbox) noexcept
    : pool_(std::move(pool)), sandbox_(std::move(sandbox)) {}

SandboxLease& SandboxLease::operator=(SandboxLease&& other) noexcept {
  if (this != &other) {
    if (sandbox_)
      pool_->end_lease(std::move(sandbox_));
    pool_ = std::move(other.pool_);
    sandbox_ = std::move(other.sandbox_);
  }
  return *this;
}

SandboxLease::~SandboxLease() {
  if (sandbox_)
    pool_->end_lease(std::move(sandbox_));
}

const detail::PooledSandbox& SandboxLease::checked() const {
  if (!sandbox_)
    throw std::logic_error("SandboxLease: the lease is empty (moved from or released)");
  if (sandbox_->stopped_by_shutdown)
    throw SandboxPoolClosedError(
        fmt::format("sandbox {} was stopped because its pool was shut down", sandbox_->id));
  return *sandbox_;
}

Runtime& SandboxLease::runtime() const {
  return checked().deployment->runtime();
}

Deployment& SandboxLease::deployment() const {
  return *checked().deployment;
}

std::uint64_t SandboxLease::sandbox_id() const noexcept {
  return sandbox_ ? sandbox_->id : 0;
}

void SandboxLease::mark_broken() noexcept {
  if (sandbox_)
    sandbox_->broken = true;
}

bool SandboxLease::broken() const noexcept {
  return sandbox_ && sandbox_->broken;
}

asio::awaitable<IsAliveResponse> SandboxLease::check() {
  checked();
  auto pool = pool_;
  auto sandbox = sandbox_;
  auto answer = co_await SandboxPoolState::health(pool, sandbox);
  if (!answer.is_alive)
    sandbox->broken = true;
  co_return answer;
}

asio::awaitable<void> SandboxLease::release() {
  if (!sandbox_)
    co_return;
  auto pool = std::move(pool_);
  auto sandbox = std::move(sandbox_);
  if (!pool->detach_lease(sandbox))
    co_return;
  auto done = std::make_shared<Event>(pool->executor);
  asio::co_spawn(pool->executor, SandboxPoolState::take_back_then_signal(pool, sandbox, done),
                 detail::LogEscape{});
  const bool returned = co_await done->wait();
  if (!returned)
    throw boost::system::system_error(asio::error::operation_aborted,
                                      "release: cancelled (the sandbox is still handed back)");
}

}  // namespace rex
