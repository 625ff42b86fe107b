// Checkpoints of a sandbox on Docker's engine and Podman's: a checkpoint carries the file system
// and each bash session's state (a `cd`, an `export`, a function, an activated venv), forks start
// from it and differ from then on, a rewind goes back with the sandbox's runtime kept, a pause
// keeps memory (an open python3 and its variables) or ends the container and resumes from a
// checkpoint, and metrics come from the engine. Every test removes the forks and images it made.
#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/docker/engine.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>
#include <rex/protocol/exceptions.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "docker/docker_support.hpp"
#include "support/async_test.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

struct Engine {
  std::string name;  // the container runtime: docker, podman
};

void PrintTo(const Engine& e, std::ostream* os) {
  *os << e.name;
}

BashAction in(std::string session, std::string command) {
  BashAction a;
  a.session = std::move(session);
  a.command = std::move(command);
  a.timeout = 30;
  return a;
}

BashAction interactive(std::string command) {
  BashAction a = in("repl", std::move(command));
  a.is_interactive_command = true;
  a.expect = {">>> "};
  return a;
}

BashAction quit(std::string command) {
  BashAction a = in("repl", std::move(command));
  a.is_interactive_quit = true;
  return a;
}

CreateBashSessionRequest session(std::string name) {
  CreateBashSessionRequest r;
  r.session = std::move(name);
  r.startup_timeout = 20;
  return r;
}

asio::awaitable<std::string> out(Runtime& rt, std::string command,
                                 std::string session = "default") {
  auto obs = co_await rt.run_in_session(in(std::move(session), std::move(command)));
  co_return obs.output;
}

class CheckpointTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    engine_ = std::make_unique<docker::Engine>(
        io_.get_executor(), docker::engine_config_from_environment(GetParam().name));
    if (const std::string why = test::engine_missing(io_, *engine_); !why.empty())
      FAIL() << why;
  }

  DockerDeploymentConfig config() const {
    DockerDeploymentConfig c;
    c.container_runtime = GetParam().name;
    c.image = "rex-test-bookworm:latest";
    c.pull = PullPolicy::never;
    c.startup_timeout = Seconds(60);
    c.labels = {{"rex.test", "checkpoints"}};
    return c;
  }

  // A sandbox with a repository and a session set up the way an agent leaves one: in the repo,
  // a variable exported, a function defined, a venv activated.
  asio::awaitable<void> set_up(Deployment& d) {
    Runtime& rt = d.runtime();
    co_await rt.create_session(session("default"));
    co_await rt.run_in_session(in("default",
                                  "mkdir -p /srv/repo && cd /srv/repo && echo base > state.txt && "
                                  "python3 -m venv --without-pip /srv/venv && "
                                  "source /srv/venv/bin/activate"));
    co_await rt.run_in_session(
        in("default", "export TASK='fix the bug'; score() { echo \"score $1\"; }; umask 077"));
  }

  // The state set_up left, as one line per check.
  static asio::awaitable<std::string> state_of(Runtime& rt) {
    co_return co_await out(
        rt,
        "pwd; cat state.txt; echo \"$TASK\"; score 7; umask; command -v python3; "
        "echo ${VIRTUAL_ENV-none}");
  }

  static constexpr const char* kSetUpState =
      "/srv/repo\nbase\nfix the bug\nscore 7\n0077\n/srv/venv/bin/python3\n/srv/venv\n";

  bool checkpoint_images_gone(const std::string& sandbox) {
    auto images =
        test::run_async(io_, engine_->list_images({"rex.checkpoint.sandbox=" + sandbox}), 30s);
    return images.empty();
  }

  bool container_exists(const std::string& id) {
    return test::run_async(io_, probe(*engine_, id), 30s);
  }

  static asio::awaitable<bool> probe(docker::Engine& engine, std::string id) {
    try {
      co_await engine.inspect_container(std::move(id));
      co_return true;
    } catch (const docker::EngineError& e) {
      if (e.status() == 404)
        co_return false;
      throw;
    }
  }

  asio::io_context io_;
  std::unique_ptr<docker::Engine> engine_;
};

TEST_P(CheckpointTest, ForksCarryFilesAndSessionsAndDifferFromThenOn) {
  DockerDeployment d(io_.get_executor(), config());
  std::string sandbox;
  test::run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await d.start();
        sandbox = d.deployment_id();
        co_await set_up(d);
        // A session whose foreground program still runs is named, not carried.
        co_await d.runtime().create_session(session("repl"));
        co_await d.runtime().run_in_session(interactive("python3 -q"));

        const Checkpoint cp = co_await d.checkpoint();
        EXPECT_THAT(cp.id, ::testing::StartsWith("ckpt-"));
        EXPECT_EQ(cp.sandbox, d.deployment_id());
        EXPECT_EQ(cp.backend, GetParam().name);
        EXPECT_EQ(cp.parent, "");
        EXPECT_EQ(cp.sessions.size(), 1u);
        EXPECT_EQ(cp.not_carried.size(), 1u);
        if (!cp.not_carried.empty()) {
          EXPECT_EQ(cp.not_carried[0].session, "repl");
        }

        auto forks = co_await d.fork_sandboxes(cp, 3);
        EXPECT_EQ(forks.size(), 3u);
        for (std::size_t i = 0; i < forks.size(); ++i) {
          Runtime& rt = forks[i]->runtime();
          EXPECT_NE(forks[i]->deployment_id(), d.deployment_id());
          EXPECT_EQ(co_await state_of(rt), kSetUpState) << "fork " << i;
          // Each goes its own way.
          co_await rt.run_in_session(
              in("default", "echo fork" + std::to_string(i) + " > state.txt; export TASK=mine"));
        }
        EXPECT_EQ(co_await out(forks[1]->runtime(), "cat state.txt"), "fork1\n");
        EXPECT_EQ(co_await out(forks[2]->runtime(), "cat state.txt"), "fork2\n");
        EXPECT_EQ(co_await out(d.runtime(), "cat state.txt; echo $TASK"), "base\nfix the bug\n");
        // The interactive session was left behind: it is not in the forks.
        REX_CO_EXPECT_THROW(co_await forks[0]->runtime().run_in_session(in("repl", "echo x")),
                            SessionDoesNotExistError);

        // A fork's checkpoint names the one it came from.
        const Checkpoint child = co_await forks[0]->checkpoint();
        EXPECT_EQ(child.parent, cp.id);
        EXPECT_EQ(child.sandbox, forks[0]->deployment_id());
        auto grandchildren = co_await forks[0]->fork_sandboxes(child, 1);
        EXPECT_EQ(co_await out(grandchildren[0]->runtime(), "cat state.txt; echo $TASK"),
                  "fork0\nmine\n");

        // Bad input changes nothing.
        REX_CO_EXPECT_THROW(co_await d.fork_sandboxes(cp, 0), std::invalid_argument);
        Checkpoint foreign = cp;
        foreign.backend = "kubernetes";
        REX_CO_EXPECT_THROW(co_await d.fork_sandboxes(foreign, 1), std::invalid_argument);

        // A checkpoint that sandboxes still start from is not removed.
        REX_CO_EXPECT_THROW(co_await d.remove_checkpoint(cp), std::runtime_error);
        co_await grandchildren[0]->stop();
        co_await forks[0]->remove_checkpoint(child);
        for (auto& f : forks)
          co_await f->stop();
        co_await d.runtime().run_in_session(quit("exit()"));
        co_await d.remove_checkpoint(cp);
        co_await d.stop();
      }(),
      240s);
  EXPECT_TRUE(checkpoint_images_gone(sandbox));
}

TEST_P(CheckpointTest, RewindGoesBackWithTheRuntimeKept) {
  DockerDeployment d(io_.get_executor(), config());
  DockerDeployment other(io_.get_executor(), config());
  std::string sandbox;
  test::run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await d.start();
        sandbox = d.deployment_id();
        co_await set_up(d);
        Runtime& rt = d.runtime();
        const Checkpoint first = co_await d.checkpoint();
        co_await rt.run_in_session(
            in("default", "echo later > state.txt; cd /; export TASK=other; unset -f score"));
        const Checkpoint second = co_await d.checkpoint();
        EXPECT_EQ(second.parent, first.id);
        const std::string container = d.sandbox_id();

        co_await d.rewind(first);
        EXPECT_NE(d.sandbox_id(), container);
        EXPECT_EQ(co_await state_of(rt), kSetUpState);
        // Forward again, to the later checkpoint.
        co_await d.rewind(second);
        EXPECT_EQ(
            co_await out(rt, "pwd; cat /srv/repo/state.txt; echo $TASK; type score 2>&1 || :"),
            "/\nlater\nother\nbash: type: score: not found\n");

        // A checkpoint of another sandbox is refused, and nothing changes.
        co_await other.start();
        const Checkpoint theirs = co_await other.checkpoint();
        REX_CO_EXPECT_THROW(co_await d.rewind(theirs), std::invalid_argument);
        EXPECT_EQ(co_await out(rt, "cat /srv/repo/state.txt"), "later\n");
        co_await other.stop();
        co_await other.remove_checkpoint(theirs);

        co_await d.stop();
        co_await d.remove_checkpoint(first);
        co_await d.remove_checkpoint(second);
      }(),
      240s);
  EXPECT_TRUE(checkpoint_images_gone(sandbox));
}

TEST_P(CheckpointTest, PauseKeepsMemoryAndAPausedSandboxForks) {
  DockerDeployment d(io_.get_executor(), config());
  std::string sandbox;
  test::run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await d.start();
        sandbox = d.deployment_id();
        co_await set_up(d);
        Runtime& rt = d.runtime();
        co_await rt.create_session(session("repl"));
        co_await rt.run_in_session(interactive("python3 -q"));
        co_await rt.run_in_session(interactive("x = 6 * 7"));

        co_await d.pause();
        EXPECT_TRUE(d.paused());
        const auto info = co_await engine_->inspect_container(d.sandbox_id());
        EXPECT_EQ(info.at("State").at("Status").as_string(), "paused");

        // A fork of the paused sandbox, its sessions as they were when it froze.
        const Checkpoint cp = co_await d.checkpoint();
        auto forks = co_await d.fork_sandboxes(cp, 1);
        EXPECT_EQ(co_await state_of(forks[0]->runtime()), kSetUpState);
        co_await forks[0]->stop();

        co_await d.resume();
        EXPECT_FALSE(d.paused());
        // The very same processes: python still holds x.
        auto obs = co_await rt.run_in_session(interactive("print(x)"));
        EXPECT_EQ(obs.output, "42");
        co_await rt.run_in_session(quit("exit()"));
        EXPECT_EQ(co_await state_of(rt), kSetUpState);
        co_await d.stop();
        co_await d.remove_checkpoint(cp);
      }(),
      240s);
  EXPECT_TRUE(checkpoint_images_gone(sandbox));
}

TEST_P(CheckpointTest, PauseWithoutMemoryEndsTheContainerAndResumesFromItsCheckpoint) {
  DockerDeployment d(io_.get_executor(), config());
  std::string sandbox;
  test::run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await d.start();
        sandbox = d.deployment_id();
        co_await set_up(d);
        const std::string container = d.sandbox_id();
        co_await d.pause(false);
        EXPECT_TRUE(d.paused());
        EXPECT_FALSE(co_await probe(*engine_, container)) << "the container should be gone";
        const SandboxMetrics idle = co_await d.metrics();
        EXPECT_EQ(idle.memory_used, 0u);

        co_await d.resume();
        EXPECT_FALSE(d.paused());
        EXPECT_NE(d.sandbox_id(), container);
        EXPECT_EQ(co_await state_of(d.runtime()), kSetUpState);
        co_await d.stop();
      }(),
      240s);
  // The pause's own checkpoint went with the resume.
  EXPECT_TRUE(checkpoint_images_gone(sandbox));
}

// A pool hands out forks of one checkpoint: each job gets one of its own, with the set-up
// session, and what a job does is seen by no other.
TEST_P(CheckpointTest, APoolHandsOutForksOfOneCheckpoint) {
  DockerDeployment d(io_.get_executor(), config());
  std::string sandbox;
  test::run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await d.start();
        sandbox = d.deployment_id();
        co_await set_up(d);
        const Checkpoint cp = co_await d.checkpoint();
        co_await d.stop();  // the forks need the checkpoint, not the sandbox
        SandboxPool pool(io_.get_executor(), forks_of(d, cp, 2));
        std::vector<int> jobs{0, 1, 2, 3};
        auto job = [&pool](int& n) -> asio::awaitable<std::string> {
          SandboxLease lease = co_await pool.acquire();
          auto state = state_of(lease.runtime());
          std::string seen = co_await std::move(state);
          // A file and a variable of this job's own: the next job's fork has neither.
          auto writing = lease.runtime().run_in_session(in(
              "default", "cat mine.txt 2>/dev/null; echo job" + std::to_string(n) + " > mine.txt"));
          seen += (co_await std::move(writing)).output;
          co_await lease.release();
          co_return seen;
        };
        auto running = fan_out(jobs, 4, job);
        auto results = co_await std::move(running);
        for (auto& r : results) {
          EXPECT_TRUE(r.has_value());
          if (r.has_value()) {
            EXPECT_EQ(*r, kSetUpState);
          }
        }
        co_await pool.shutdown();
        EXPECT_EQ(pool.stats().started, 4u);
        co_await d.remove_checkpoint(cp);
      }(),
      240s);
  EXPECT_TRUE(checkpoint_images_gone(sandbox));
}

TEST_P(CheckpointTest, MetricsComeFromTheEngine) {
  DockerDeploymentConfig c = config();
  c.memory = "512m";
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await d.start();
        co_await d.runtime().create_session(session("default"));
        co_await d.runtime().run_in_session(
            in("default", "head -c 3000000 /dev/urandom > /srv/blob"));
        const SandboxMetrics m = co_await d.metrics();
        EXPECT_GT(m.cpu_count, 0);
        EXPECT_GT(m.memory_used, 0u);
        EXPECT_EQ(m.memory_limit, 512u * 1024 * 1024);
        EXPECT_GE(m.disk_used, 3000000u);
        EXPECT_GT(m.disk_total, m.disk_used);
        EXPECT_GT(m.timestamp, 1.7e9);
        co_await d.stop();
      }(),
      120s);
}

INSTANTIATE_TEST_SUITE_P(Engines, CheckpointTest,
                         ::testing::Values(Engine{"docker"}, Engine{"podman"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex
