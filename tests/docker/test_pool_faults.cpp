// SandboxPool under faults of the real engine: a container killed under a lease, and dockerd
// restarted in the middle of a run. Either way a job succeeds or fails with a message, the pool
// replaces what died, and no container is left once the pool has shut down.
#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/docker/engine.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "docker/docker_support.hpp"
#include "support/async_test.hpp"

#ifndef REX_SOURCE_DIR
#error "REX_SOURCE_DIR must name the source tree (set by CMake)"
#endif

namespace rex {
namespace {

using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;

SandboxPoolConfig pool_config(std::string label_value) {
  DockerDeploymentConfig docker;
  docker.image = "rex-test-nopython:latest";
  docker.pull = PullPolicy::never;
  docker.startup_timeout = Seconds(60);
  docker.labels = {{"rex.test", std::move(label_value)}};
  SandboxPoolConfig config;
  config.deployment = docker;
  return config;
}

asio::awaitable<std::size_t> containers_left(std::string label_value) {
  docker::Engine engine(co_await asio::this_coro::executor);
  std::vector<std::string> filter{"rex.test=" + label_value};
  auto left = co_await engine.list_containers(filter, true);
  co_return left.size();
}

asio::awaitable<void> killed_under_a_lease() {
  auto executor = co_await asio::this_coro::executor;
  auto config = pool_config("pool-faults-kill");
  config.max_sandboxes = 2;
  SandboxPool pool(executor, config);

  auto lease = co_await pool.acquire();
  const auto first = lease.sandbox_id();
  auto& deployment = dynamic_cast<DockerDeployment&>(lease.deployment());
  docker::Engine engine(executor);
  co_await engine.kill_container(deployment.container_id());

  // A call on the dead sandbox fails with a message instead of hanging.
  std::string failure;
  try {
    co_await test::run_in_own_session(lease.runtime(), "echo unreachable");
  } catch (const std::exception& e) {
    failure = e.what();
  }
  EXPECT_FALSE(failure.empty()) << "a command ran in a killed container";
  const auto alive = co_await lease.check();
  EXPECT_FALSE(alive.is_alive);
  EXPECT_FALSE(alive.message.empty());
  EXPECT_TRUE(lease.broken());
  co_await lease.release();

  // The next lease is a new sandbox, and it works.
  auto next = co_await pool.acquire();
  EXPECT_NE(next.sandbox_id(), first);
  const auto obs = co_await test::run_in_own_session(next.runtime(), "echo replaced");
  EXPECT_EQ(obs.output, "replaced\n");
  co_await next.release();
  co_await pool.shutdown();
  EXPECT_EQ(co_await containers_left("pool-faults-kill"), 0u);
}

TEST(SandboxPoolFaults, ContainerKilledUnderALeaseIsReportedAndReplaced) {
  test::run_async(killed_under_a_lease(), 180s);
}

// --- dockerd restarted mid-run ---------------------------------------------------------------
//
// What the pool promises (and README says): a job holding a sandbox when the engine stops loses
// that sandbox (dockerd stops its containers) and fails with a message; a start that falls while
// the engine is away is retried until it is back; every job whose sandbox was not running when
// the engine went away succeeds; nothing is left once the pool has shut down.

using Clock = std::chrono::steady_clock;

struct JobTimes {
  Clock::time_point acquiring{};  // acquire() called
  Clock::time_point leased{};     // acquire() returned (max: never)
  Clock::time_point ended{};
};

struct RestartRun {
  static constexpr int kJobs = 15;
  std::atomic<int> finished{0};
  std::atomic<int> holding{0};  // jobs holding a sandbox
  std::atomic<bool> jobs_done{false};
  std::atomic<std::size_t> failed_attempts{0};  // the pool's failed starts, published by watch()
  std::atomic<Clock::rep> down_at{0};           // SIGTERM sent to dockerd
  std::atomic<Clock::rep> restart_at{0};        // dockerd being started again (gone until then)
  std::atomic<Clock::rep> up_at{0};             // dockerd answering again
  std::atomic<bool> restarted{false};
  int stop_status = -1;
  int start_status = -1;
  std::vector<JobTimes> times = std::vector<JobTimes>(kJobs);

  Clock::time_point down() const { return Clock::time_point(Clock::duration(down_at.load())); }
  Clock::time_point restart() const {
    return Clock::time_point(Clock::duration(restart_at.load()));
  }
  Clock::time_point up() const { return Clock::time_point(Clock::duration(up_at.load())); }
};

asio::awaitable<std::string> job(SandboxPool& pool, int number, RestartRun& run) {
  JobTimes& times = run.times[static_cast<std::size_t>(number)];
  struct Count {
    RestartRun& run;
    JobTimes& times;
    ~Count() {
      times.ended = Clock::now();
      ++run.finished;
    }
  } count{run, times};
  times.acquiring = Clock::now();
  times.leased = Clock::time_point::max();
  auto lease = co_await pool.acquire();
  times.leased = Clock::now();
  ++run.holding;
  struct Holding {
    RestartRun& run;
    ~Holding() { --run.holding; }
  } holding{run};
  const std::string command = fmt::format("sleep 0.5; echo job {}", number);
  const auto obs = co_await test::run_in_own_session(lease.runtime(), command);
  if (obs.exit_code != 0)
    lease.mark_broken();
  co_return obs.output;
}

asio::awaitable<std::vector<Outcome<std::string>>> run_jobs(SandboxPool& pool, RestartRun& run) {
  std::vector<int> jobs;
  for (int i = 0; i < RestartRun::kJobs; ++i)
    jobs.push_back(i);
  auto fn = [&](int& number) { return job(pool, number, run); };
  auto results = co_await fan_out(jobs, 3, fn);
  run.jobs_done = true;
  co_return results;
}

// Publishes the pool's count of failed starts for the restarting thread, until the jobs are done.
asio::awaitable<void> watch(SandboxPool& pool, RestartRun& run) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (!run.jobs_done) {
    run.failed_attempts = pool.stats().failed_attempts;
    tick.expires_after(50ms);
    co_await tick.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> restart_mid_run(RestartRun& run) {
  auto executor = co_await asio::this_coro::executor;
  auto config = pool_config("pool-faults-restart");
  // One more than the jobs run at once: when the engine stops under three leases, their three
  // sandboxes wait in `returning` (their stops wait for the engine) and take three places; the
  // fourth lets the next job's start meet the engine's absence. With three, a run in which all
  // three jobs held a sandbox at the stop could start nothing until the engine was back.
  config.max_sandboxes = 4;
  config.return_policy = ReturnPolicy::stop;
  // Starts during the engine's absence are retried until it is back (a restart takes seconds).
  config.start_attempts = 8;
  config.retry_backoff.initial_delay = 500ms;
  config.retry_backoff.max_delay = 4s;
  SandboxPool pool(executor, config);

  const auto results = co_await (run_jobs(pool, run) && watch(pool, run));
  EXPECT_TRUE(run.restarted.load());
  const SandboxPoolStats stats = pool.stats();
  // A start fell while the engine was away, failed, and was retried until it was back.
  EXPECT_GE(stats.failed_attempts, 1u);
  EXPECT_EQ(stats.failed_starts, 0u) << "a start gave up before the engine came back";

  int ok = 0, waited_and_served = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const JobTimes& t = run.times[i];
    // Held a sandbox at some moment the engine was away (or being stopped).
    const bool held_in_gap = t.leased < run.up() && t.ended > run.down();
    // Asked for a sandbox while the engine was gone and got one once it was being started again:
    // its start met the gap. (Not "after it was up": the engine answers a little before the
    // script that starts it returns, and a retried start may be served in between.)
    const bool waited_through_gap = t.acquiring < run.restart() && t.leased > run.restart();
    if (results[i].has_value()) {
      EXPECT_EQ(results[i].value(), fmt::format("job {}\n", i));
      ++ok;
      if (waited_through_gap)
        ++waited_and_served;
    } else {
      std::cerr << "job " << i << " failed: " << results[i].error_message() << '\n';
      EXPECT_TRUE(held_in_gap) << "job " << i
                               << " failed without holding a sandbox while the engine was away: "
                               << results[i].error_message();
      EXPECT_FALSE(results[i].error_message().empty()) << "job " << i;
    }
  }
  std::cerr << ok << " of " << results.size() << " jobs succeeded; " << waited_and_served
            << " waited for a sandbox while the engine was away and got it once it was back; "
            << stats.failed_attempts << " start attempts failed\n";
  EXPECT_GE(waited_and_served, 1) << "no job waited for a sandbox through the engine's absence";
  EXPECT_TRUE(results.back().has_value()) << "the pool did not recover after the restart";
  co_await pool.shutdown();
  EXPECT_EQ(pool.stats().running, 0u);
  EXPECT_EQ(co_await containers_left("pool-faults-restart"), 0u);
}

int engine_script(const char* function) {
  const std::string command =
      fmt::format("bash -c 'source {}/scripts/common.sh && {}'", REX_SOURCE_DIR, function);
  return std::system(command.c_str());
}

// Disabled in the ordinary run: it restarts the engine every other docker test uses, so CTest
// runs it alone (RUN_SERIAL, tests/CMakeLists.txt).
TEST(SandboxPoolFaults, DISABLED_DockerdRestartedMidRun) {
  RestartRun run;
  std::thread restarter([&run] {
    // Three jobs done and one holding a sandbox: stop the engine under it.
    const auto deadline = Clock::now() + 120s;
    while ((run.finished.load() < 3 || run.holding.load() == 0) && Clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    run.down_at = Clock::now().time_since_epoch().count();
    run.stop_status = engine_script("rex_dockerd_stop");
    // Start it again once a start has met its absence, or after 10 s. A start that fell into
    // the gap counts as failed only once its container is removed, and that removal waits up
    // to 30 s for the engine to come back: waiting for the count alone let it give up just
    // before the restart and leave the container behind.
    const auto gap_deadline = Clock::now() + 10s;
    while (run.failed_attempts.load() == 0 && !run.jobs_done.load() && Clock::now() < gap_deadline)
      std::this_thread::sleep_for(20ms);
    run.restart_at = Clock::now().time_since_epoch().count();
    run.start_status = engine_script("rex_dockerd_start");
    run.up_at = Clock::now().time_since_epoch().count();
    run.restarted = true;
  });
  try {
    test::run_async(restart_mid_run(run), 240s);
  } catch (...) {
    restarter.join();
    throw;
  }
  restarter.join();
  EXPECT_EQ(run.stop_status, 0);
  EXPECT_EQ(run.start_status, 0);
}

}  // namespace
}  // namespace rex
