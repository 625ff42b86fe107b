// SandboxPool of real containers: jobs fanned out over a bounded pool, and nothing left behind
// after shutdown.
#include <rex/backends/docker/docker_config.hpp>
#include <rex/docker/engine.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "support/async_test.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;

struct Seen {
  int in_flight = 0;
  int max_in_flight = 0;
};

asio::awaitable<std::string> echo_job(SandboxPool& pool, int job, Seen& seen) {
  auto lease = co_await pool.acquire();
  ++seen.in_flight;
  seen.max_in_flight = std::max(seen.max_in_flight, seen.in_flight);
  CreateBashSessionRequest create;
  create.startup_timeout = 20;
  create.session = "job";
  co_await lease.runtime().create_session(create);
  BashAction action;
  action.session = "job";
  action.command = fmt::format("JOB={}; sleep 0.2; echo $JOB", job);
  action.timeout = 30;
  auto obs = co_await lease.runtime().run_in_session(action);
  --seen.in_flight;
  co_return obs.output;
}

asio::awaitable<void> pool_of_containers(std::string label_value) {
  auto executor = co_await asio::this_coro::executor;
  DockerDeploymentConfig docker;
  docker.image = "rex-test-nopython:latest";
  docker.pull = PullPolicy::never;
  docker.startup_timeout = Seconds(60);
  docker.labels = {{"rex.test", label_value}};
  SandboxPoolConfig config;
  config.deployment = docker;
  config.max_sandboxes = 8;
  config.warm_spares = 2;
  SandboxPool pool(executor, config);

  std::vector<int> jobs;
  for (int i = 0; i < 20; ++i)
    jobs.push_back(i);
  Seen seen;
  auto fn = [&](int& job) { return echo_job(pool, job, seen); };
  auto results = co_await fan_out(jobs, 10, fn);
  for (int i = 0; i < 20; ++i) {
    auto& r = results[static_cast<std::size_t>(i)];
    EXPECT_TRUE(r.has_value()) << r.error_message();
    if (r.has_value()) {
      EXPECT_EQ(r.value().find(std::to_string(i)), 0u) << r.value();
    }
  }
  EXPECT_LE(seen.max_in_flight, 8);
  EXPECT_LE(pool.stats().started, 8u);
  // On a busy machine the first containers may serve every job before the others are up.
  EXPECT_GE(pool.stats().started + pool.stats().starting, 2u);

  docker::Engine engine(executor);
  std::vector<std::string> filter{fmt::format("rex.test={}", label_value)};
  auto running = co_await engine.list_containers(filter, true);
  EXPECT_LE(running.size(), 8u);

  co_await pool.shutdown();
  EXPECT_EQ(pool.stats().running, 0u);
  auto left = co_await engine.list_containers(filter, true);
  EXPECT_TRUE(left.empty()) << left.size() << " containers left behind";
}

TEST(SandboxPoolDocker, FansJobsOutOverAPoolAndLeavesNoContainer) {
  test::run_async(pool_of_containers("sandbox-pool"), 180s);
}

}  // namespace
}  // namespace rex
