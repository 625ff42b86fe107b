// DaytonaDeployment against a fake of Daytona's API and toolbox (tests/daytona/daytona_fake.py)
// that runs each sandbox's commands on this machine, behind Prism proxies that check every
// request and answer against Daytona's OpenAPI documents (daytona_stack.hpp): a sandbox's whole
// life, what is left in the fake afterwards, a refused key, throttling, a server that cannot
// start, a sandbox deleted behind the deployment's back, a SandboxPool of them, and the runtime
// conformance suite.
#include <rex/backends/daytona/daytona_deployment.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>

#include "conformance/backend_conformance.hpp"
#include "conformance/conformance.hpp"
#include "daytona/daytona_stack.hpp"
#include "support/async_test.hpp"
#include "support/deployed_runtime.hpp"

namespace rex::test {
namespace {

namespace json = boost::json;

[[maybe_unused]] ::testing::Environment* const kStackCheck =
    ::testing::AddGlobalTestEnvironment(new DaytonaStackCheck);

DaytonaDeploymentConfig sandbox_config() {
  DaytonaDeploymentConfig c;  // the API's URL and key from the environment, as the SDKs read them
  c.image = "python:3.12";
  // Each step of a start (the upload of rex-server above all: 250 MB under ASan, through the
  // upload front and the fake) gets the 120 s a default config gives it.
  c.startup_timeout = Seconds(120);
  c.runtime_timeout = Seconds(30);
  return c;
}

class DaytonaFake : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = DaytonaStack::unavailable(); !why.empty())
      GTEST_SKIP() << why;
    stack = &DaytonaStack::get();
  }

  std::string run(DaytonaDeployment& d, const std::string& command) {
    BashAction action;
    action.command = command;
    return run_async(io, d.runtime().run_in_session(Action(std::move(action)))).output;
  }

  asio::io_context io;
  DaytonaStack* stack = nullptr;
};

TEST_F(DaytonaFake, ASandboxRunsTheServerAndGoesWithTheDeployment) {
  DaytonaDeployment d(io.get_executor(), sandbox_config());
  std::vector<std::string> stages;
  d.add_hook(
      [&stages](const DeploymentEvent& e) { stages.push_back(std::string(to_string(e.stage))); });
  run_async(io, d.start(), std::chrono::seconds(90));
  ASSERT_TRUE(d.started());
  EXPECT_FALSE(d.sandbox_id().empty());
  EXPECT_EQ(d.url().rfind("http://127.0.0.1:", 0), 0u) << d.url();
  EXPECT_EQ(d.config().api_url, stack->api_url());

  run_async(io, d.runtime().create_session(CreateBashSessionRequest{}));
  // The sandbox's environment, and its address: the fake gives each sandbox one of its own.
  EXPECT_EQ(run(d, "echo $DAYTONA_SANDBOX_ID"), d.sandbox_id() + "\n");
  EXPECT_EQ(run(d, "cd /tmp && pwd"), "/tmp\n");
  EXPECT_EQ(run(d, "pwd"), "/tmp\n") << "the shell's state is kept between commands";
  EXPECT_TRUE(run_async(io, d.is_alive()).is_alive);

  // The sandbox carries rex's labels and the time to live of container_timeout.
  bool found = false;
  for (const auto& s : stack->remaining()) {
    if (s.at("id").as_string() != d.sandbox_id())
      continue;
    found = true;
    EXPECT_FALSE(s.at("processes").as_array().empty()) << "the server runs in the sandbox";
  }
  EXPECT_TRUE(found);

  run_async(io, d.stop(), std::chrono::seconds(60));
  EXPECT_FALSE(d.started());
  EXPECT_NE(std::find(stages.begin(), stages.end(), "ready"), stages.end());
  EXPECT_NE(std::find(stages.begin(), stages.end(), "stopped"), stages.end());
  const json::array left = stack->remaining_settled();
  EXPECT_TRUE(left.empty()) << "left in the fake: " << json::serialize(left);
}

TEST_F(DaytonaFake, AWrongKeyFailsTheStartAtOnceNamingWhereItCameFrom) {
  const std::size_t before = stack->remaining().size();
  ScopedEnv key("DAYTONA_API_KEY", "not-the-key");
  DaytonaDeployment d(io.get_executor(), sandbox_config());
  const auto start = std::chrono::steady_clock::now();
  try {
    run_async(io, d.start(), std::chrono::seconds(30));
    FAIL() << "started with a wrong key";
  } catch (const DeploymentStartupError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("POST /sandbox: the API key from DAYTONA_API_KEY was refused: HTTP 401"),
              std::string::npos)
        << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "it was retried";
  EXPECT_FALSE(d.started());
  EXPECT_EQ(stack->remaining().size(), before) << "a sandbox was made";
}

TEST_F(DaytonaFake, ThrottledCallsAreTriedAgain) {
  stack->throttle(3);
  DaytonaDeployment d(io.get_executor(), sandbox_config());
  run_async(io, d.start(), std::chrono::seconds(90));
  EXPECT_TRUE(d.started());
  run_async(io, d.stop(), std::chrono::seconds(60));

  // Throttled past the attempts: the start fails with Daytona's answer, and nothing is left.
  stack->throttle(100);
  DaytonaDeployment refused(io.get_executor(), sandbox_config());
  try {
    run_async(io, refused.start(), std::chrono::seconds(60));
    FAIL() << "started while every call was throttled";
  } catch (const DeploymentStartupError& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 429: ThrottlerException: Too Many Requests"),
              std::string::npos)
        << e.what();
  }
  stack->throttle(0);
  EXPECT_TRUE(stack->remaining_settled().empty());
}

TEST_F(DaytonaFake, AServerThatCannotStartIsReportedWithItsOutputAndTheSandboxDeleted) {
  TempDir dir;
  const std::string broken = dir.path() + "/rex-server";
  {
    std::ofstream out(broken);
    out << "#!/bin/sh\necho 'this is not rex-server' >&2\nexit 3\n";
  }
  std::filesystem::permissions(broken, std::filesystem::perms::owner_all);
  DaytonaDeploymentConfig c = sandbox_config();
  c.server_path = broken;
  c.runtime_timeout = Seconds(3);
  DaytonaDeployment d(io.get_executor(), c);
  try {
    run_async(io, d.start(), std::chrono::seconds(60));
    FAIL() << "started without a server";
  } catch (const DeploymentStartupError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("did not answer within 3 s"), std::string::npos) << what;
    EXPECT_NE(what.find("its output: this is not rex-server"), std::string::npos) << what;
  }
  const json::array left = stack->remaining_settled();
  EXPECT_TRUE(left.empty()) << "left in the fake: " << json::serialize(left);
}

TEST_F(DaytonaFake, ASandboxDeletedBehindItsBackIsReportedByIsAlive) {
  DaytonaDeployment d(io.get_executor(), sandbox_config());
  run_async(io, d.start(), std::chrono::seconds(90));
  {
    http::Client client(io.get_executor(), stack->api_url());
    http::ClientRequest r;
    r.method = "DELETE";
    r.target = "/sandbox/" + d.sandbox_id();
    r.headers.emplace_back("Authorization", "Bearer " + stack->api_key());
    EXPECT_EQ(run_async(io, client.request(std::move(r))).status, 200u);
  }
  const IsAliveResponse alive = run_async(io, d.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_NE(alive.message.find(d.sandbox_id()), std::string::npos) << alive.message;
  // A call into it fails with Daytona's account of it, not a bare connection error.
  Command c;
  c.command = "true";
  c.shell = true;
  c.timeout = 10;
  try {
    run_async(io, d.runtime().execute(c), std::chrono::seconds(60));
    ADD_FAILURE() << "a command ran in a deleted sandbox";
  } catch (const SandboxLostError& e) {
    EXPECT_NE(std::string(e.what()).find("the sandbox is gone: the sandbox " + d.sandbox_id()),
              std::string::npos)
        << e.what();
  }
  run_async(io, d.stop(), std::chrono::seconds(60));  // the sandbox is gone already: no error
  EXPECT_TRUE(stack->remaining_settled().empty());
}

// A SandboxPool of these sandboxes: two leased at once, each with its own shell, all gone once
// the pool shuts down.
TEST_F(DaytonaFake, ASandboxPoolLeasesThemAndLeavesNothing) {
  SandboxPoolConfig pc;
  pc.deployment = sandbox_config();
  pc.max_sandboxes = 2;
  SandboxPool pool(io.get_executor(), pc);
  // g++ 12 miscompiles temporaries inside co_await expressions: every one is named first.
  auto body = [&]() -> asio::awaitable<void> {
    auto taking_first = pool.acquire();
    auto first = co_await std::move(taking_first);
    auto taking_second = pool.acquire();
    auto second = co_await std::move(taking_second);
    EXPECT_NE(first.sandbox_id(), second.sandbox_id());
    for (SandboxLease* lease : {&first, &second}) {
      const CreateBashSessionRequest request;
      auto creating = lease->runtime().create_session(request);
      co_await std::move(creating);
    }
    BashAction cd;
    cd.command = "cd /tmp && echo one";
    auto running_first = first.runtime().run_in_session(Action(cd));
    const BashObservation one = co_await std::move(running_first);
    EXPECT_EQ(one.output, "one\n");
    BashAction pwd;
    pwd.command = "pwd";
    auto running_second = second.runtime().run_in_session(Action(pwd));
    const BashObservation two = co_await std::move(running_second);
    EXPECT_NE(two.output, "/tmp\n") << "the sandboxes share a shell";
    auto releasing_first = first.release();
    co_await std::move(releasing_first);
    auto releasing_second = second.release();
    co_await std::move(releasing_second);
    auto closing = pool.shutdown();
    co_await std::move(closing);
  };
  run_async(io, body(), std::chrono::seconds(180));
  const json::array left = stack->remaining_settled();
  EXPECT_TRUE(left.empty()) << "left in the fake: " << json::serialize(left);
}

TEST_F(DaytonaFake, BadSettingsAreRefusedBeforeAnyCall) {
  {
    ScopedEnv key("DAYTONA_API_KEY", std::nullopt);
    try {
      DaytonaDeployment d(io.get_executor(), sandbox_config());
      FAIL() << "made without an API key";
    } catch (const DeploymentConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("DAYTONA_API_KEY"), std::string::npos) << e.what();
    }
  }
  DaytonaDeploymentConfig c = sandbox_config();
  c.api_url = "not a url";
  EXPECT_THROW(DaytonaDeployment(io.get_executor(), c), DeploymentConfigError);
  EXPECT_THROW(deployment_config_from_json(json::parse(R"({"type": "daytona", "port": 0})")),
               DeploymentConfigError);
  EXPECT_THROW(
      deployment_config_from_json(json::parse(R"({"type": "daytona", "container_timeout": 5})")),
      DeploymentConfigError);
  EXPECT_THROW(deployment_config_from_json(json::parse(R"({"type": "daytona", "cpus": 2})")),
               DeploymentConfigError);
}

using DeployedSandbox = DeployedRuntime<DaytonaDeployment>;

const RuntimeFactory kDaytona{"Daytona",
                              [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                if (const std::string why = DaytonaStack::unavailable();
                                    !why.empty())
                                  throw std::runtime_error(why);
                                DaytonaStack::get();
                                return std::make_unique<DeployedSandbox>(io, sandbox_config());
                              },
                              true,
                              // A tenth of a second a round trip through Prism.
                              3};

INSTANTIATE_TEST_SUITE_P(Daytona, RuntimeConformance, ::testing::Values(kDaytona),
                         [](const auto& info) { return info.param.name; });

// The backend conformance suite through the same fake, `rex gc --all` included: the fake's
// sandboxes are this executable's alone.
BackendCase daytona_backend() {
  BackendCase c;
  c.name = "Daytona";
  c.settings = [] { return DeploymentConfig(sandbox_config()); };
  c.unavailable = [] { return DaytonaStack::unavailable(); };
  c.failing.image = "fake-fail:latest";  // the fake's build of it fails
  c.failing_says = "build_failed";
  return c;
}

INSTANTIATE_TEST_SUITE_P(Daytona, BackendConformance, ::testing::Values(daytona_backend()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Daytona, BackendGcConformance, ::testing::Values(daytona_backend()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
