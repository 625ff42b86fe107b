#include <rex/pool/pool_errors.hpp>
#include <rex/pool/sandbox_lease.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
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

// A one-shot wake-up for a coroutine on the same executor: the waiter waits on a timer that
// never expires; fire() cancels it.
struct Signal {
  explicit Signal(const asio::any_io_executor& executor)
      : timer(executor, asio::steady_timer::time_point::max()) {}
  void fire() {
    fired = true;
    timer.cancel();
  }
  asio::steady_timer timer;
  bool fired = false;
};

// One acquire() waiting in line.
struct Waiter {
  explicit Waiter(const asio::any_io_executor& executor) : wake(executor) {}
  Signal wake;
  Sandbox granted;
  std::exception_ptr error;
};

// Logs what a background coroutine let escape; they catch everything they expect themselves.
struct LogEscape {
  void operator()(std::exception_ptr error) const {
    if (!error)
      return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      spdlog::error("sandbox pool: background task failed: {}", e.what());
    } catch (...) {
      spdlog::error("sandbox pool: background task failed");
    }
  }
};

}  // namespace

class SandboxPoolState : public std::enable_shared_from_this<SandboxPoolState> {
 public:
  SandboxPoolState(asio::any_io_executor ex, SandboxPoolConfig cfg)
      : executor(std::move(ex)),
        config(std::move(cfg)),
        drained(executor),
        trim_timer(executor),
        rng(std::random_device{}()) {}

  asio::any_io_executor executor;
  SandboxPoolConfig config;
  std::deque<Sandbox> spares;
  std::set<Sandbox> leased;
  std::list<std::shared_ptr<Waiter>> waiters;
  std::set<asio::steady_timer*> backoff_timers;
  Signal drained;  // fired whenever a start or a return finishes; shutdown() re-checks
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

  std::size_t in_use() const noexcept {
    return starting + spares.size() + leased.size() + returning;
  }

  std::unique_ptr<Deployment> make() {
    if (config.factory)
      return config.factory(executor);
    return make_deployment(executor, config.deployment);
  }

  void notify() { drained.timer.cancel(); }

  void add_spare(Sandbox sandbox, bool front = false) {
    sandbox->idle_since = std::chrono::steady_clock::now();
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
      waiter->granted = spares.front();
      spares.pop_front();
      leased.insert(waiter->granted);
      waiter->wake.fire();
    }
    // Recomputed each round: a start may complete (and serve a waiter) inside co_spawn.
    auto wanted = [this] { return waiters.size() + (spares_paused ? 0 : config.warm_spares); };
    while (spares.size() + starting < wanted() && in_use() < config.max_sandboxes) {
      ++starting;
      asio::co_spawn(executor, start_one(shared_from_this()), LogEscape{});
    }
    trim_surplus();
  }

  // Stops spares, the longest idle first, while more than warm_spares of them have been idle
  // for surplus_idle_timeout. Counting only those that have been idle that long (rather than
  // all spares) means a sandbox just handed back never pushes an old warm spare out: a caller
  // that hands back and acquires again causes no stop and no start.
  void trim_surplus() {
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::chrono::steady_clock::time_point> idle;
    while (waiters.empty() && spares.size() > config.warm_spares) {
      idle.clear();
      for (const auto& spare : spares)
        idle.push_back(spare->idle_since);
      const auto nth = idle.begin() + static_cast<std::ptrdiff_t>(config.warm_spares);
      std::nth_element(idle.begin(), nth, idle.end());
      const auto due = *nth + config.surplus_idle_timeout;  // then warm_spares + 1 are idle
      if (due > now) {
        arm_trim(due);
        return;
      }
      auto oldest = std::min_element(
          spares.begin(), spares.end(),
          [](const auto& a, const auto& b) { return a->idle_since < b->idle_since; });
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
    waiter->error = std::move(error);
    waiter->wake.fire();
  }

  // Starts one sandbox with retries; it becomes a spare (and pump() hands it to a waiter).
  static asio::awaitable<void> start_one(std::shared_ptr<SandboxPoolState> self) {
    const int attempts = self->config.start_attempts;
    int attempt = 0;
    std::string cause;
    bool fatal = false;
    while (attempt < attempts && !self->closed && !fatal) {
      ++attempt;
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
      spdlog::warn("sandbox pool: start attempt {}/{} failed: {}", attempt, attempts, cause);
      if (deployment) {
        try {
          co_await deployment->stop();  // a failed start released everything; stop() is cheap
        } catch (const std::exception& e) {
          spdlog::warn("sandbox pool: stop after a failed start: {}", e.what());
        }
      }
      if (attempt < attempts && !self->closed && !fatal)
        co_await backoff(self, attempt);
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

  static asio::awaitable<void> backoff(std::shared_ptr<SandboxPoolState> self, int failed) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    asio::steady_timer timer(self->executor, retry_delay(self->config, failed, unit(self->rng)));
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
      spdlog::warn("sandbox pool: stopping sandbox {} failed: {}", sandbox->id, e.what());
    }
    ++self->stopped;
    --self->returning;
    self->pump();
    self->notify();
  }

  // is_alive within the health-check timeout; an error or no answer counts as dead.
  static asio::awaitable<IsAliveResponse> health(std::shared_ptr<SandboxPoolState> self,
                                                 Sandbox sandbox) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer timer(self->executor, self->config.health_check_timeout);
    IsAliveResponse answer;
    std::exception_ptr error;
    try {
      auto result =
          co_await (sandbox->deployment->is_alive() || timer.async_wait(asio::use_awaitable));
      if (result.index() == 0) {
        answer = std::get<0>(std::move(result));
      } else {
        answer.is_alive = false;
        answer.message = fmt::format("sandbox {} did not answer is_alive within {} ms", sandbox->id,
                                     self->config.health_check_timeout.count());
      }
    } catch (const std::exception& e) {
      answer.is_alive = false;
      answer.message = fmt::format("sandbox {}: is_alive failed: {}", sandbox->id, e.what());
      error = std::current_exception();
    }
    auto state = co_await asio::this_coro::cancellation_state;
    if (error && state.cancelled() != asio::cancellation_type::none)
      std::rethrow_exception(error);  // the caller gave up: not the sandbox's fault
    co_return answer;
  }

  // Recycles or stops a sandbox handed back (counted in `returning`).
  static asio::awaitable<void> take_back(std::shared_ptr<SandboxPoolState> self, Sandbox sandbox) {
    bool reuse =
        !self->closed && !sandbox->broken && self->config.return_policy == ReturnPolicy::recycle;
    if (reuse) {
      using namespace asio::experimental::awaitable_operators;
      try {
        asio::steady_timer timer(self->executor, self->config.health_check_timeout);
        auto closed = co_await (sandbox->deployment->runtime().close() ||
                                timer.async_wait(asio::use_awaitable));
        reuse = closed.index() == 0;
      } catch (const std::exception& e) {
        spdlog::warn("sandbox pool: closing sandbox {} failed: {}", sandbox->id, e.what());
        reuse = false;
      }
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
    if (!self->closed && (sandbox->broken || self->config.return_policy == ReturnPolicy::recycle))
      ++self->counters.replaced;  // not reusable although the policy wanted it back
    co_await stop_sandbox(self, std::move(sandbox));
  }

  static asio::awaitable<void> take_back_then_signal(std::shared_ptr<SandboxPoolState> self,
                                                     Sandbox sandbox,
                                                     std::shared_ptr<Signal> done) {
    try {
      co_await take_back(self, std::move(sandbox));
    } catch (...) {
      done->fire();
      throw;
    }
    done->fire();
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
    if ((self->waiters.empty() || first_in_line) && !self->spares.empty()) {
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
    boost::system::error_code ec;
    if (!waiter->wake.fired)
      co_await waiter->wake.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    auto state = co_await asio::this_coro::cancellation_state;
    const bool cancelled = state.cancelled() != asio::cancellation_type::none;
    if (!waiter->wake.fired) {
      // Woken by the caller's cancellation: leave the line; a start made for this waiter ends
      // up as a spare.
      self->waiters.remove(waiter);
      self->pump();
      throw boost::system::system_error(asio::error::operation_aborted,
                                        "acquire: cancelled while waiting for a sandbox");
    }
    if (waiter->error)
      std::rethrow_exception(waiter->error);
    if (cancelled) {
      self->give_back_unused(waiter->granted);
      throw boost::system::system_error(asio::error::operation_aborted,
                                        "acquire: cancelled while waiting for a sandbox");
    }
    co_return waiter->granted;
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
      spdlog::info("sandbox pool: replacing a dead spare: {}", alive.message);
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
      boost::system::error_code ec;
      co_await self->drained.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
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
  auto done = std::make_shared<detail::Signal>(pool->executor);
  asio::co_spawn(pool->executor, SandboxPoolState::take_back_then_signal(pool, sandbox, done),
                 detail::LogEscape{});
  boost::system::error_code ec;
  if (!done->fired)
    co_await done->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (!done->fired)
    throw boost::system::system_error(asio::error::operation_aborted,
                                      "release: cancelled (the sandbox is still handed back)");
}

}  // namespace rex
