// ModalDeployment against a fake of Modal's gRPC control plane (tests/modal/modal_fake.py, which
// Modal's own Python client checks in modal.client) that runs each sandbox's entrypoint here,
// behind a TLS tunnel: a sandbox's whole life and what is left afterwards, a refused token, a
// throttled create, a server that cannot start, a sandbox past its lifetime, settings refused
// before any call, a SandboxPool of them, and the runtime conformance suite.
#include <rex/backends/modal/modal_deployment.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#include "conformance/backend_conformance.hpp"
#include "conformance/conformance.hpp"
#include "modal/modal_fake.hpp"
#include "support/async_test.hpp"
#include "support/deployed_runtime.hpp"

namespace rex::test {
namespace {

namespace json = boost::json;

// The shared fake's URL and token from the environment, as Modal's SDKs read them.
ModalDeploymentConfig sandbox_config() {
  ModalDeploymentConfig c;
  c.image = "python:3.12";
  c.ca_file = ModalFake::shared().ca_file();
  c.startup_timeout = Seconds(60);
  c.runtime_timeout = Seconds(30);
  c.deployment_timeout = Seconds(600);
  return c;
}

class ModalFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = ModalFake::unavailable(); !why.empty())
      GTEST_SKIP() << why;
    fake = &ModalFake::shared();
  }

  std::string run(ModalDeployment& d, const std::string& command) {
    BashAction action;
    action.command = command;
    return run_async(io, d.runtime().run_in_session(Action(std::move(action)))).output;
  }

  asio::io_context io;
  ModalFake* fake = nullptr;
};

TEST_F(ModalFakeTest, ASandboxRunsTheServerAndEndsWithTheDeployment) {
  ModalDeployment d(io.get_executor(), sandbox_config());
  std::vector<std::string> stages;
  d.add_hook(
      [&stages](const DeploymentEvent& e) { stages.push_back(std::string(to_string(e.stage))); });
  run_async(io, d.start(), std::chrono::seconds(90));
  ASSERT_TRUE(d.started());
  EXPECT_EQ(d.sandbox_id().rfind("sb-", 0), 0u) << d.sandbox_id();
  EXPECT_EQ(d.url().rfind("https://127.0.0.1:", 0), 0u) << d.url();

  run_async(io, d.runtime().create_session(CreateBashSessionRequest{}));
  EXPECT_EQ(run(d, "echo hello"), "hello\n");
  // The token came as a secret, not on the command line.
  EXPECT_EQ(run(d, "tr '\\0' ' ' < /proc/$PPID/cmdline | grep -c -- --auth-token || true"), "0\n");
  EXPECT_TRUE(run_async(io, d.is_alive()).is_alive);
  bool running = false;
  for (const auto& s : fake->sandboxes())
    running = running ||
              (s.at("id").as_string() == d.sandbox_id() && s.at("state").as_string() == "running");
  EXPECT_TRUE(running);

  run_async(io, d.stop(), std::chrono::seconds(60));
  EXPECT_FALSE(d.started());
  EXPECT_NE(std::find(stages.begin(), stages.end(), "ready"), stages.end());
  EXPECT_NE(std::find(stages.begin(), stages.end(), "stopped"), stages.end());
  const json::array left = fake->running();
  EXPECT_TRUE(left.empty()) << "still running in the fake: " << json::serialize(left);
}

TEST_F(ModalFakeTest, AWrongTokenFailsTheStartAtOnceNamingWhereItCameFrom) {
  const std::size_t before = fake->sandboxes().size();
  ScopedEnv secret("MODAL_TOKEN_SECRET", "not-the-secret");
  ModalDeployment d(io.get_executor(), sandbox_config());
  const auto start = std::chrono::steady_clock::now();
  try {
    run_async(io, d.start(), std::chrono::seconds(30));
    FAIL() << "started with a wrong token";
  } catch (const DeploymentStartupError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("modal: AppGetOrCreate: the token from MODAL_TOKEN_ID and "
                        "MODAL_TOKEN_SECRET was refused: UNAUTHENTICATED"),
              std::string::npos)
        << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "it was retried";
  EXPECT_EQ(fake->sandboxes().size(), before) << "a sandbox was made";
}

// With nothing in the config or the environment, the token and the server come from the
// active profile of Modal's settings file, as Modal's client finds them; a refused token names
// that profile and file.
TEST_F(ModalFakeTest, TheTokenAndServerOfModalsSettingsFileAreUsed) {
  TempDir dir;
  const std::string file = dir.path() + "/modal.toml";
  std::ofstream(file) << "[other]\ntoken_id = \"ak-other\"\ntoken_secret = \"as-other\"\n\n"
                      << "[fake]\ntoken_id = \"" << fake->token_id() << "\"\ntoken_secret = \""
                      << fake->token_secret() << "\"\nserver_url = \"" << fake->url()
                      << "\"\nactive = true\n";
  ScopedEnv path("MODAL_CONFIG_PATH", file);
  ScopedEnv id("MODAL_TOKEN_ID", std::nullopt);
  ScopedEnv secret("MODAL_TOKEN_SECRET", std::nullopt);
  ScopedEnv server("MODAL_SERVER_URL", std::nullopt);
  {
    ModalDeployment d(io.get_executor(), sandbox_config());
    EXPECT_EQ(d.config().server_url, fake->url());
    run_async(io, d.start(), std::chrono::seconds(90));
    run_async(io, d.runtime().create_session(CreateBashSessionRequest{}));
    EXPECT_EQ(run(d, "echo from the profile"), "from the profile\n");
    run_async(io, d.stop(), std::chrono::seconds(60));
  }
  ScopedEnv profile("MODAL_PROFILE", "other");
  ModalDeploymentConfig c = sandbox_config();
  c.server_url = fake->url();
  ModalDeployment d(io.get_executor(), c);
  try {
    run_async(io, d.start(), std::chrono::seconds(30));
    FAIL() << "started with the other profile's token";
  } catch (const DeploymentStartupError& e) {
    EXPECT_NE(std::string(e.what()).find("the token from profile other of " + file +
                                         " was refused: UNAUTHENTICATED"),
              std::string::npos)
        << e.what();
  }
  const json::array left = fake->running();
  EXPECT_TRUE(left.empty()) << "still running in the fake: " << json::serialize(left);
}

TEST_F(ModalFakeTest, AThrottledCreateIsTriedAgain) {
  // A fake of its own whose first two SandboxCreate calls answer UNAVAILABLE.
  ModalFake throttled({"--fail-first", "2"});
  ModalDeploymentConfig c = sandbox_config();
  c.server_url = throttled.url();
  c.token_id = throttled.token_id();
  c.token_secret = throttled.token_secret();
  c.ca_file = throttled.ca_file();
  ModalDeployment d(io.get_executor(), c);
  run_async(io, d.start(), std::chrono::seconds(90));
  EXPECT_TRUE(d.started());
  EXPECT_EQ(throttled.sandboxes().size(), 1u) << "a retry made a second sandbox";
  run_async(io, d.stop(), std::chrono::seconds(60));
  EXPECT_TRUE(throttled.running().empty());
}

TEST_F(ModalFakeTest, AServerThatCannotStartIsReportedWithItsStderrAndItsSandboxEnded) {
  TempDir dir;
  const std::string broken = dir.path() + "/rex-server";
  {
    std::ofstream out(broken);
    out << "#!/bin/sh\necho 'this is not rex-server' >&2\nexit 3\n";
  }
  std::filesystem::permissions(broken, std::filesystem::perms::owner_all);
  ModalDeploymentConfig c = sandbox_config();
  c.server_path = broken;
  c.runtime_timeout = Seconds(3);
  ModalDeployment d(io.get_executor(), c);
  try {
    run_async(io, d.start(), std::chrono::seconds(60));
    FAIL() << "started without a server";
  } catch (const DeploymentStartupError& e) {
    const std::string what = e.what();
    // Whether it ended before its tunnel was asked for (FAILED_PRECONDITION) or after, the
    // failure carries what the server wrote (docs/modal.md).
    EXPECT_NE(what.find("its stderr: this is not rex-server"), std::string::npos) << what;
  }
  const json::array left = fake->running();
  EXPECT_TRUE(left.empty()) << "still running in the fake: " << json::serialize(left);
}

TEST_F(ModalFakeTest, ASandboxPastItsLifetimeIsReportedByIsAlive) {
  ModalDeploymentConfig c = sandbox_config();
  c.deployment_timeout = Seconds(4);
  ModalDeployment d(io.get_executor(), c);
  run_async(io, d.start(), std::chrono::seconds(90));
  IsAliveResponse alive;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    alive = run_async(io, d.is_alive());
  } while (alive.is_alive && std::chrono::steady_clock::now() < until);
  EXPECT_FALSE(alive.is_alive);
  EXPECT_NE(alive.message.find("the sandbox " + d.sandbox_id()), std::string::npos)
      << alive.message;
  run_async(io, d.stop(), std::chrono::seconds(60));
  EXPECT_TRUE(fake->running().empty());
}

// A SandboxPool of these sandboxes: two leased at once, each with its own shell, all gone once
// the pool shuts down.
TEST_F(ModalFakeTest, ASandboxPoolLeasesThemAndLeavesNothing) {
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
  const json::array left = fake->running();
  EXPECT_TRUE(left.empty()) << "still running in the fake: " << json::serialize(left);
}

TEST_F(ModalFakeTest, BadSettingsAreRefusedBeforeAnyCall) {
  {
    ScopedEnv id("MODAL_TOKEN_ID", std::nullopt);
    try {
      ModalDeployment d(io.get_executor(), sandbox_config());
      FAIL() << "made without a token";
    } catch (const DeploymentConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("MODAL_TOKEN_ID"), std::string::npos) << e.what();
    }
  }
  ModalDeploymentConfig c = sandbox_config();
  c.sandbox_definition = json::object{{"timeoutSecs", "soon"}};
  try {
    ModalDeployment d(io.get_executor(), c);
    FAIL() << "took a definition that is not a Sandbox message";
  } catch (const DeploymentConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("modal.sandbox_definition"), std::string::npos)
        << e.what();
  }
  c = sandbox_config();
  c.server_url = "ftp://example.com";
  EXPECT_THROW(ModalDeployment(io.get_executor(), c), DeploymentConfigError);
  EXPECT_THROW(deployment_config_from_json(
                   json::parse(R"({"type": "modal", "modal_sandbox_kwargs": {"cpu": 2}})")),
               DeploymentConfigError);
  EXPECT_THROW(deployment_config_from_json(
                   json::parse(R"({"type": "modal", "deployment_timeout": 100000})")),
               DeploymentConfigError);
  // SWE-ReX's own config loads as it is.
  EXPECT_NO_THROW(deployment_config_from_json(json::parse(
      R"({"type": "modal", "image": "python:3.11", "startup_timeout": 180, "runtime_timeout": 60,
          "deployment_timeout": 3600, "modal_sandbox_kwargs": {}, "install_pipx": true})")));
}

using DeployedSandbox = DeployedRuntime<ModalDeployment>;

const RuntimeFactory kModal{"Modal",
                            [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                              if (const std::string why = ModalFake::unavailable(); !why.empty())
                                throw std::runtime_error(why);
                              return std::make_unique<DeployedSandbox>(io, sandbox_config());
                            },
                            true};

INSTANTIATE_TEST_SUITE_P(Modal, RuntimeConformance, ::testing::Values(kModal),
                         [](const auto& info) { return info.param.name; });

// The backend conformance suite through the same fake, `rex gc --all` included: the fake's
// sandboxes are this executable's alone.
BackendCase modal_backend() {
  BackendCase c;
  c.name = "Modal";
  c.settings = [] { return DeploymentConfig(sandbox_config()); };
  c.unavailable = [] { return ModalFake::unavailable(); };
  c.failing.image = "fake-fail:latest";  // the fake's build of it fails
  c.failing_says = "fake-fail in the image: the build failed";
  return c;
}

INSTANTIATE_TEST_SUITE_P(Modal, BackendConformance, ::testing::Values(modal_backend()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Modal, BackendGcConformance, ::testing::Values(modal_backend()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
