// The evaluation with its real parts: run_eval_instance over a LocalRuntime (bash in a pty), and
// Evaluation over local sandboxes, including a stop in the middle and sandboxes that never start.
#include <rex/backends/remote/remote_config.hpp>
#include <rex/eval/evaluation.hpp>
#include <rex/eval/instance_runner.hpp>
#include <rex/runtime/local_runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

using test::read_text;

EvalInstance instance(std::string id, std::string run) {
  EvalInstance i;
  i.id = std::move(id);
  i.run = std::move(run);
  return i;
}

struct RunnerTest : ::testing::Test {
  asio::io_context io;
  test::TempDir dir;
  LocalRuntime runtime{io.get_executor()};

  EvalRunnerSettings settings() {
    EvalRunnerSettings s;
    s.artifacts_dir = dir.path() + "/artifacts";
    s.artifacts_prefix = "artifacts/x";
    s.working_dir = dir.path() + "/work";
    std::filesystem::create_directories(s.working_dir);
    return s;
  }
};

TEST_F(RunnerTest, SetupStateCarriesIntoRunAndArtifactsComeBack) {
  const std::string source = dir.file("input.txt", "payload\n");
  EvalInstance i =
      instance("x", "cat ../data/input.txt > result.txt\necho \"$GREETING from $PWD\"");
  i.upload = {{source, "data/input.txt"}};
  i.setup = {"mkdir -p sub", "cd sub", "export GREETING=hi"};
  i.artifacts = {"sub/result.txt", "missing.txt"};
  const auto s = settings();
  const EvalRun run = test::run_async(io, run_eval_instance(runtime, i, s), 30s);
  const EvalResult& r = run.result;
  EXPECT_EQ(r.status, EvalStatus::passed) << (r.error ? r.error->message : "");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.setup_exit_codes, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(r.output, "hi from " + s.working_dir + "/sub\n");
  EXPECT_EQ(run.run_log, r.output);
  EXPECT_EQ(run.setup_log,
            "$ mkdir -p sub\n[exit 0]\n$ cd sub\n[exit 0]\n$ export GREETING=hi\n"
            "[exit 0]\n");
  ASSERT_EQ(r.artifacts.size(), 2u);
  EXPECT_EQ(r.artifacts[0].saved, "artifacts/x/result.txt");
  EXPECT_EQ(read_text(s.artifacts_dir + "/result.txt"), "payload\n");
  EXPECT_FALSE(r.artifacts[1].saved);
  EXPECT_THAT(r.artifacts[1].error.value_or(""), HasSubstr("No such file"));
  EXPECT_TRUE(r.times.start && r.times.setup && r.times.run && r.times.teardown);
  EXPECT_EQ(runtime.session_count(), 0u);  // the session is closed
}

TEST_F(RunnerTest, ExitInRunEndsOnlyItsSubshell) {
  const EvalRun run = test::run_async(
      io, run_eval_instance(runtime, instance("x", "set -e\nfalse\necho no"), settings()), 30s);
  EXPECT_EQ(run.result.status, EvalStatus::failed);
  EXPECT_EQ(run.result.exit_code, 1);
  const EvalRun exits = test::run_async(
      io, run_eval_instance(runtime, instance("x", "echo bye; exit 7"), settings()), 30s);
  EXPECT_EQ(exits.result.status, EvalStatus::failed);
  EXPECT_EQ(exits.result.exit_code, 7);
  EXPECT_EQ(exits.result.output, "bye\n");
}

TEST_F(RunnerTest, TimeoutInterruptsTheRun) {
  EvalInstance i = instance("x", "echo begun; sleep 30");
  i.timeout = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRun run = test::run_async(io, run_eval_instance(runtime, i, settings()), 30s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(run.result.status, EvalStatus::timeout);
  EXPECT_FALSE(run.result.exit_code);
  EXPECT_FALSE(run.result.error);
  EXPECT_THAT(run.run_log, HasSubstr("begun"));
}

TEST_F(RunnerTest, SetupFailuresAndUploadFailuresAreErrors) {
  EvalInstance i = instance("x", "echo never");
  i.setup = {"echo first", "exit_with() { return $1; }; exit_with 4", "echo not run"};
  const EvalRun run = test::run_async(io, run_eval_instance(runtime, i, settings()), 30s);
  EXPECT_EQ(run.result.status, EvalStatus::error);
  EXPECT_EQ(run.result.setup_exit_codes, (std::vector<int>{0, 4}));
  ASSERT_TRUE(run.result.error);
  EXPECT_EQ(run.result.error->phase, "setup");
  EXPECT_EQ(run.result.error->type, "SetupCommandFailed");
  EXPECT_THAT(run.result.error->message, HasSubstr("setup command 2 of 3 exited with 4"));
  EXPECT_FALSE(run.result.times.run);

  EvalInstance slow = instance("x", "echo never");
  slow.setup = {"sleep 30"};
  auto s = settings();
  s.setup_timeout = 0.3;
  const EvalRun late = test::run_async(io, run_eval_instance(runtime, slow, s), 30s);
  EXPECT_EQ(late.result.status, EvalStatus::error);
  EXPECT_EQ(late.result.error->type, "CommandTimeoutError");
  EXPECT_THAT(late.setup_log, HasSubstr("[timeout after 0.3 s]"));

  EvalInstance upload = instance("x", "echo never");
  upload.upload = {{dir.path() + "/does-not-exist", "target"}};
  const EvalRun failed = test::run_async(io, run_eval_instance(runtime, upload, settings()), 30s);
  EXPECT_EQ(failed.result.status, EvalStatus::error);
  EXPECT_EQ(failed.result.error->phase, "upload");
  EXPECT_EQ(failed.result.error->type, "FileNotFoundError");
}

// ---- Evaluation ----------------------------------------------------------------------------

TEST(Evaluation, RunsEachInstanceInItsOwnDirectoryAndResumes) {
  asio::io_context io;
  test::TempDir dir;
  std::vector<EvalInstance> instances;
  for (int n = 0; n < 12; ++n)
    instances.push_back(instance("i" + std::to_string(n), "pwd; ls | wc -l; touch mine"));
  EvaluationConfig config;
  config.output_dir = dir.path() + "/out";
  config.parallel = 4;
  {
    Evaluation evaluation(io.get_executor(), config, instances);
    EXPECT_EQ(evaluation.pending(), 12u);
    std::size_t started = 0, finished = 0, most_running = 0;
    EvaluationObserver observer;
    observer.started = [&](const EvalInstance&) {
      ++started;
      most_running = std::max(most_running, evaluation.running());
    };
    observer.finished = [&](const EvalInstance&, const EvalResult&) { ++finished; };
    const auto report = test::run_async(io, evaluation.run(observer), 60s);
    EXPECT_EQ(report.results.size(), 12u);
    EXPECT_FALSE(report.stopped);
    EXPECT_EQ(report.unfinished, 0u);
    EXPECT_EQ(started, 12u);
    EXPECT_EQ(finished, 12u);
    EXPECT_LE(most_running, 4u);
    for (const auto& r : report.results) {
      EXPECT_EQ(r.status, EvalStatus::passed);
      // A fresh, empty directory of its own: nothing of another instance in it.
      EXPECT_EQ(r.output, config.output_dir + "/work/" + r.id + "\n0\n");
    }
  }
  Evaluation again(io.get_executor(), config, instances);
  EXPECT_EQ(again.pending(), 0u);
  EXPECT_EQ(again.skipped(), 12u);
  EXPECT_EQ(again.recorded().size(), 12u);
}

asio::awaitable<void> stop_when_running(Evaluation& evaluation, std::size_t count) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  while (evaluation.running() < count) {
    timer.expires_after(10ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  // Give the commands a moment to be inside their sleep.
  timer.expires_after(200ms);
  co_await timer.async_wait(asio::use_awaitable);
  evaluation.stop();
}

asio::awaitable<EvaluationReport> run_and_stop(Evaluation& evaluation, std::size_t count) {
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, stop_when_running(evaluation, count), asio::detached);
  co_return co_await evaluation.run();
}

TEST(Evaluation, StopRecordsNothingUnfinished) {
  asio::io_context io;
  test::TempDir dir;
  std::vector<EvalInstance> instances = {instance("quick", "true")};
  for (int n = 0; n < 5; ++n)
    instances.push_back(instance("slow" + std::to_string(n), "sleep 30"));
  EvaluationConfig config;
  config.output_dir = dir.path();
  config.parallel = 2;
  Evaluation evaluation(io.get_executor(), config, instances);
  const auto t0 = std::chrono::steady_clock::now();
  const auto report = test::run_async(io, run_and_stop(evaluation, 2), 30s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);
  EXPECT_TRUE(report.stopped);
  ASSERT_EQ(report.results.size(), 1u);
  EXPECT_EQ(report.results[0].id, "quick");
  EXPECT_EQ(report.unfinished, 5u);
  EXPECT_EQ(evaluation.running(), 0u);
  EXPECT_EQ(evaluation.recorded().size(), 1u);
}

TEST(Evaluation, ASandboxThatDoesNotStartIsAnErrorAtStart) {
  asio::io_context io;
  test::TempDir dir;
  EvaluationConfig config;
  config.output_dir = dir.path();
  RemoteDeploymentConfig nowhere;
  nowhere.host = "http://127.0.0.1:1";  // nothing listens on port 1
  nowhere.startup_timeout = Seconds(0.2);
  config.deployment = nowhere;
  config.start_attempts = 1;
  Evaluation evaluation(io.get_executor(), config, {instance("a", "true")});
  const auto report = test::run_async(io, evaluation.run(), 30s);
  ASSERT_EQ(report.results.size(), 1u);
  const EvalResult& r = report.results[0];
  EXPECT_EQ(r.status, EvalStatus::error);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->phase, "start");
  EXPECT_EQ(r.error->type, "SandboxStartError");
  EXPECT_TRUE(r.times.start);
  EXPECT_FALSE(r.times.run);
}

TEST(Evaluation, ImagesNeedADockerDeployment) {
  asio::io_context io;
  test::TempDir dir;
  EvaluationConfig config;
  config.output_dir = dir.path() + "/never";
  EvalInstance i = instance("a", "true");
  i.image = "python:3.12";
  i.line = 3;
  EXPECT_THROW_MESSAGE(Evaluation(io.get_executor(), config, {i}), EvalInstanceError,
                       "instance \"a\" (line 3): image: a local deployment cannot start a sandbox "
                       "from an image (docker, kubernetes, " +
                           std::string(REX_WITH_MODAL ? "fargate, daytona and modal can)"
                                                      : "fargate and daytona can)"));
  EXPECT_FALSE(std::filesystem::exists(config.output_dir));  // nothing created
}

}  // namespace
}  // namespace rex
