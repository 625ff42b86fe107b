// Local, remote and dummy deployments with their real parts: bash in a pty, and a rex Server on
// loopback in this process for the remote one.
#include <rex/backends/backends.hpp>
#include <rex/backends/dummy/dummy_deployment.hpp>
#include <rex/backends/local/local_deployment.hpp>
#include <rex/backends/remote/remote_deployment.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/server/server.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <filesystem>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

BashAction bash_action(std::string text) {
  BashAction a;
  a.command = std::move(text);
  a.timeout = 10;
  return a;
}

CreateBashSessionRequest session() {
  CreateBashSessionRequest r;
  r.startup_timeout = 10;
  return r;
}

// Records the stages a deployment reports.
struct StageLog {
  std::vector<std::string> stages;
  DeploymentHook hook() {
    return [this](const DeploymentEvent& e) { stages.emplace_back(to_string(e.stage)); };
  }
};

asio::awaitable<std::string> run_one(Deployment& d, std::string text) {
  auto created = session();
  co_await d.runtime().create_session(created);
  auto obs = co_await d.runtime().run_in_session(bash_action(std::move(text)));
  co_return obs.output;
}

TEST(LocalDeployment, RunsSessionsInItsWorkingDirWithItsEnvironment) {
  asio::io_context io;
  test::TempDir dir;
  const std::string work = dir.path() + "/new/work";
  auto config = deployment_config_from_json(
      json::parse(R"({"type":"local","env":{"REX_DEPLOYMENT_TEST":"hello"}})"));
  config.get<LocalDeploymentConfig>().working_dir = work;
  auto deployment = make_deployment(io.get_executor(), config);
  StageLog log;
  deployment->add_hook(log.hook());

  EXPECT_FALSE(deployment->started());
  EXPECT_THROW(deployment->runtime(), DeploymentNotStartedError);
  EXPECT_FALSE(test::run_async(io, deployment->is_alive()).is_alive);

  test::run_async(io, deployment->start());
  EXPECT_TRUE(deployment->started());
  EXPECT_TRUE(test::run_async(io, deployment->is_alive()).is_alive);
  const std::string out =
      test::run_async(io, run_one(*deployment, "pwd; echo $REX_DEPLOYMENT_TEST"));
  EXPECT_EQ(out, work + "\nhello\n");

  test::run_async(io, deployment->stop());
  EXPECT_FALSE(deployment->started());
  EXPECT_THROW(deployment->runtime(), DeploymentNotStartedError);
  test::run_async(io, deployment->stop());  // twice is fine
  EXPECT_THROW(test::run_async(io, deployment->start()), DeploymentStartupError);
  EXPECT_THAT(log.stages, ElementsAre("starting", "ready", "stopping", "stopped"));
}

TEST(LocalDeployment, StopEndsEveryShell) {
  asio::io_context io;
  LocalDeployment deployment(io.get_executor());
  test::run_async(io, deployment.start());
  const std::string pid = test::run_async(io, run_one(deployment, "echo $$"));
  ASSERT_FALSE(pid.empty());
  test::run_async(io, deployment.stop());
  // The shell is gone (a zombie at most until the runtime reaps it).
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    EXPECT_THAT(line.substr(line.rfind(')') + 2, 1), ::testing::AnyOf("Z", "X"));
  }
}

asio::awaitable<void> run_long(Runtime& runtime, bool& ended) {
  try {
    co_await runtime.run_in_session(bash_action("sleep 10"));
  } catch (const std::exception&) {
  }
  ended = true;
}

// A pool may stop a sandbox while its holder is inside a runtime call: the call must end,
// not resume on a destroyed runtime.
TEST(LocalDeployment, StopWhileACommandRunsEndsTheCommand) {
  asio::io_context io;
  LocalDeployment deployment(io.get_executor());
  test::run_async(io, deployment.start());
  test::run_async(io, deployment.runtime().create_session(session()));
  bool ended = false;
  asio::co_spawn(io, run_long(deployment.runtime(), ended), asio::detached);
  io.run_for(200ms);
  const auto t0 = Clock::now();
  test::run_async(io, deployment.stop());
  const auto until = Clock::now() + 5s;
  while (!ended && Clock::now() < until)
    io.run_one_for(10ms);
  EXPECT_TRUE(ended);
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_THROW(deployment.runtime(), DeploymentNotStartedError);
}

TEST(LocalDeployment, WorkingDirThatCannotBeMadeIsAStartupError) {
  asio::io_context io;
  LocalDeploymentConfig c;
  c.working_dir = "/proc/rex-cannot-exist/work";
  LocalDeployment deployment(io.get_executor(), c);
  try {
    test::run_async(io, deployment.start());
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/proc/rex-cannot-exist/work"));
  }
}

// A rex Server over a LocalRuntime on loopback, in this process.
class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerConfig cfg;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.auth_token = "secret";
    server_.emplace(io_.get_executor(), local_, cfg);
    server_->listen();
    asio::co_spawn(io_, server_->run(), [this](std::exception_ptr) { server_done_ = true; });
  }
  void TearDown() override {
    server_->stop();
    const auto until = std::chrono::steady_clock::now() + 10s;
    io_.restart();
    while (!server_done_ && std::chrono::steady_clock::now() < until)
      io_.run_one_for(10ms);
    EXPECT_TRUE(server_done_);
  }

  RemoteDeploymentConfig remote_config() const {
    RemoteDeploymentConfig c;
    c.host = "http://127.0.0.1";
    c.port = server_->port();
    c.auth_token = "secret";
    c.timeout = Seconds(1.0);
    return c;
  }

  asio::io_context io_;
  LocalRuntime local_{io_.get_executor()};
  std::optional<server::Server> server_;
  bool server_done_ = false;
};

using RemoteDeploymentTest = ServerFixture;

TEST_F(RemoteDeploymentTest, ConnectsRunsAndLeavesTheServerRunning) {
  RemoteDeployment deployment(io_.get_executor(), remote_config());
  StageLog log;
  deployment.add_hook(log.hook());
  test::run_async(io_, deployment.start());
  EXPECT_EQ(deployment.url(), fmt::format("http://127.0.0.1:{}", server_->port()));
  EXPECT_EQ(test::run_async(io_, run_one(deployment, "echo remote")), "remote\n");
  EXPECT_EQ(local_.session_count(), 1u);
  test::run_async(io_, deployment.stop());
  EXPECT_EQ(local_.session_count(), 0u);                          // its sessions were closed ...
  EXPECT_TRUE(test::run_async(io_, local_.is_alive()).is_alive);  // ... the server still runs
  EXPECT_THAT(log.stages, ElementsAre("waiting", "ready", "stopping", "stopped"));
}

asio::awaitable<std::vector<std::string>> stream_lines(Runtime& runtime, Clock::duration& first,
                                                       Clock::duration& total) {
  auto created = session();
  co_await runtime.create_session(created);
  std::vector<std::string> pieces;
  const auto t0 = Clock::now();
  auto listener = [&](std::string_view text) {
    if (pieces.empty())
      first = Clock::now() - t0;
    pieces.emplace_back(text);
  };
  auto obs = co_await runtime.run_in_session_streaming(
      bash_action("for i in 1 2 3; do echo line $i; sleep 0.3; done"), listener);
  total = Clock::now() - t0;
  EXPECT_EQ(obs.output, "line 1\nline 2\nline 3\n");
  co_return pieces;
}

TEST_F(RemoteDeploymentTest, OutputStreamsWhileTheCommandRuns) {
  RemoteDeployment deployment(io_.get_executor(), remote_config());
  test::run_async(io_, deployment.start());
  Clock::duration first{}, total{};
  const auto pieces = test::run_async(io_, stream_lines(deployment.runtime(), first, total));
  std::string joined;
  for (const auto& p : pieces)
    joined += p;
  EXPECT_EQ(joined, "line 1\nline 2\nline 3\n");
  // The first line arrived while the command still had most of its time to run.
  EXPECT_LT(first + 400ms, total);
  test::run_async(io_, deployment.stop());
}

TEST_F(RemoteDeploymentTest, WrongTokenIsAStartupErrorThatSaysSo) {
  auto c = remote_config();
  c.auth_token = "wrong";
  c.startup_timeout = Seconds(30);
  RemoteDeployment deployment(io_.get_executor(), c);
  const auto t0 = Clock::now();
  try {
    test::run_async(io_, deployment.start());
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("refused the auth_token"));
    EXPECT_THAT(e.what(), HasSubstr("401"));
  }
  EXPECT_LT(Clock::now() - t0, 5s);  // at once, not after startup_timeout
  EXPECT_FALSE(deployment.started());
}

TEST(RemoteDeployment, UnreachableServerFailsWithinTheStartupTimeout) {
  asio::io_context io;
  RemoteDeploymentConfig c;
  c.host = "http://127.0.0.1";
  c.port = 1;  // nothing listens on port 1
  c.startup_timeout = Seconds(0.3);
  RemoteDeployment deployment(io.get_executor(), c);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(test::run_async(io, deployment.start()), DeploymentStartupError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(RemoteDeployment, BadUrlIsAConfigError) {
  asio::io_context io;
  RemoteDeploymentConfig c;
  c.host = "ftp://example";
  EXPECT_THROW(RemoteDeployment(io.get_executor(), c), DeploymentConfigError);
}

TEST(DummyDeployment, HandsOutScriptedObservationsAndRecordsActions) {
  asio::io_context io;
  auto deployment = make_deployment(
      io.get_executor(),
      deployment_config_from_json(json::parse(
          R"({"type":"dummy","run_in_session_outputs":[{"output":"first","exit_code":0},
                                                       {"output":"second","exit_code":1}]})")));
  test::run_async(io, deployment->start());
  auto& runtime = deployment->runtime();
  EXPECT_THROW(test::run_async(io, runtime.run_in_session(bash_action("no session yet"))),
               SessionDoesNotExistError);
  test::run_async(io, runtime.create_session(session()));
  EXPECT_THROW(test::run_async(io, runtime.create_session(session())), SessionExistsError);
  EXPECT_EQ(test::run_async(io, runtime.run_in_session(bash_action("a"))).output, "first");
  EXPECT_EQ(test::run_async(io, runtime.run_in_session(bash_action("b"))).exit_code, 1);
  EXPECT_EQ(test::run_async(io, runtime.run_in_session(bash_action("c"))).exit_code, 0);  // default
  auto& dummy = static_cast<DummyDeployment&>(*deployment).dummy_runtime();
  ASSERT_EQ(dummy.received().size(), 3u);
  EXPECT_EQ(std::get<BashAction>(dummy.received()[1]).command, "b");

  dummy.queue_error(std::make_exception_ptr(CommandTimeoutError("scripted timeout")));
  EXPECT_THROW(test::run_async(io, runtime.run_in_session(bash_action("d"))), CommandTimeoutError);

  WriteFileRequest w;
  w.path = "/f.txt";
  w.content = "content";
  test::run_async(io, runtime.write_file(w));
  ReadFileRequest r;
  r.path = "/f.txt";
  EXPECT_EQ(test::run_async(io, runtime.read_file(r)).content, "content");
  r.path = "/missing";
  EXPECT_THROW(test::run_async(io, runtime.read_file(r)), FileNotFoundError);

  test::TempDir dir;
  DownloadRequest d;
  d.path = "/f.txt";
  d.target_path = dir.path() + "/out.txt";
  test::run_async(io, runtime.download(d));
  std::ifstream in(d.target_path);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "content");

  dummy.set_alive(false);
  EXPECT_FALSE(test::run_async(io, deployment->is_alive()).is_alive);
  test::run_async(io, deployment->stop());
  EXPECT_THROW(deployment->runtime(), DeploymentNotStartedError);
}

TEST(Deployment, AThrowingHookDoesNotBreakTheDeployment) {
  asio::io_context io;
  DummyDeployment deployment;
  deployment.add_hook([](const DeploymentEvent&) { throw std::runtime_error("hook failed"); });
  int calls = 0;
  deployment.add_hook([&](const DeploymentEvent&) { ++calls; });
  test::run_async(io, deployment.start());
  EXPECT_TRUE(deployment.started());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace rex
