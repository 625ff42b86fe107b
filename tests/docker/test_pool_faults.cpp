// SandboxPool under faults of the real engine: a container killed under a lease, and dockerd
// restarted in the middle of a run. Either way jobs succeed or fail with a message, the pool
// replaces what died, and no container is left once the pool has shut down.
#include <rex/deployment/docker_deployment.hpp>
#include <rex/docker/engine.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "docker/docker_support.hpp"
#include "support/async_test.hpp"

#ifndef REX_SOURCE_DIR
#error "REX_SOURCE_DIR must name the source tree (set by CMake)"
#endif

namespace rex {
namespace {

using namespace std::chrono_literals;

SandboxPoolConfig pool_config(std::string label_value) {
  DockerDeploymentConfig docker;
  docker.image = "rex-test-nopython:latest";
  docker.pull = PullPolicy::never;
  docker.startup_timeout = 60;
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

struct RestartRun {
  std::atomic<int> finished{0};
  std::atomic<bool> restarted{false};
  int restart_status = -1;
};

asio::awaitable<std::string> job(SandboxPool& pool, int number, RestartRun& run) {
  struct Count {
    RestartRun& run;
    ~Count() { ++run.finished; }
  } count{run};
  auto lease = co_await pool.acquire();
  const std::string command = fmt::format("sleep 0.5; echo job {}", number);
  const auto obs = co_await test::run_in_own_session(lease.runtime(), command);
  if (obs.exit_code != 0)
    lease.mark_broken();
  co_return obs.output;
}

asio::awaitable<void> restart_mid_run(RestartRun& run) {
  auto executor = co_await asio::this_coro::executor;
  auto config = pool_config("pool-faults-restart");
  config.max_sandboxes = 3;
  config.return_policy = ReturnPolicy::stop;
  // Starts during the engine's absence are retried until it is back (a restart takes seconds).
  config.start_attempts = 8;
  config.retry_backoff_initial = 500ms;
  config.retry_backoff_max = 4s;
  SandboxPool pool(executor, config);

  std::vector<int> jobs;
  for (int i = 0; i < 15; ++i)
    jobs.push_back(i);
  auto fn = [&](int& number) { return job(pool, number, run); };
  auto results = co_await fan_out(jobs, 3, fn);

  int ok = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i].has_value()) {
      EXPECT_EQ(results[i].value(), fmt::format("job {}\n", i));
      ++ok;
    } else {
      // A job that met the restart fails with a message saying what happened.
      EXPECT_FALSE(results[i].error_message().empty()) << "job " << i;
      std::cerr << "job " << i << " failed: " << results[i].error_message() << '\n';
    }
  }
  EXPECT_TRUE(run.restarted.load());
  // Jobs before the restart and the last ones, started after it, succeed.
  EXPECT_GE(ok, 6) << ok << " of 15 jobs succeeded";
  EXPECT_TRUE(results.back().has_value()) << "the pool did not recover after the restart";
  co_await pool.shutdown();
  EXPECT_EQ(pool.stats().running, 0u);
  EXPECT_EQ(co_await containers_left("pool-faults-restart"), 0u);
}

// Disabled in the ordinary run: it restarts the engine every other docker test uses, so CTest
// runs it alone (RUN_SERIAL, tests/CMakeLists.txt).
TEST(SandboxPoolFaults, DISABLED_DockerdRestartedMidRun) {
  RestartRun run;
  std::thread restarter([&run] {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (run.finished.load() < 3 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    const std::string command =
        "bash -c 'source " REX_SOURCE_DIR "/scripts/common.sh && rex_dockerd_restart'";
    run.restart_status = std::system(command.c_str());
    run.restarted = true;
  });
  try {
    test::run_async(restart_mid_run(run), 240s);
  } catch (...) {
    restarter.join();
    throw;
  }
  restarter.join();
  EXPECT_EQ(run.restart_status, 0);
}

}  // namespace
}  // namespace rex
