// E2BDeployment against a real E2B-compatible endpoint: a rex gateway (the rex executable this
// build made, `rex gateway`, local provider) started by this test binary, acting as E2B's control
// API and, through E2B_SANDBOX_URL-style routing (E2b-Sandbox-Id, E2b-Sandbox-Port), as its
// sandbox URL. The runtime conformance suite runs through the deployment; the deployment's own
// failures and its cleanup are checked against the gateway's answers.
#include <rex/backends/e2b/e2b_deployment.hpp>
#include <rex/http/client.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "conformance/backend_conformance.hpp"
#include "conformance/conformance.hpp"
#include "support/async_test.hpp"
#include "support/deployed_runtime.hpp"
#include "support/test_helpers.hpp"

extern char** environ;

namespace rex::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kKey = "e2b-test-key";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `rex gateway` on a free loopback port with one API key, its log in its storage folder; ended
// (SIGTERM, then SIGKILL) with the test binary.
class GatewayProcess {
 public:
  GatewayProcess() {
    const std::string log = dir_.path() + "/gateway.log";
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<std::string> args{
        REX_CLI_PATH, "gateway",   "--listen", "127.0.0.1:0", "--storage",
        storage(),    "--api-key", kKey,       "--api-key",   "other=e2b-other-key"};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, REX_CLI_PATH, &fa, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
      throw std::runtime_error(fmt::format("cannot start {}: {}", REX_CLI_PATH, rc));
    // Its address, then the end of its reconciliation (before that it answers 503).
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (true) {
      const std::string text = slurp(log);
      if (const auto at = text.find("listening on "); at != std::string::npos && url_.empty()) {
        const auto end = text.find_first_of(" \n", at + 13);
        if (end != std::string::npos)
          url_ = text.substr(at + 13, end - at - 13);
      }
      if (!url_.empty() && text.find("gateway: reconciled") != std::string::npos)
        break;
      if (std::chrono::steady_clock::now() > until)
        throw std::runtime_error("the gateway did not start: " + text);
      std::this_thread::sleep_for(20ms);
    }
  }

  ~GatewayProcess() {
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_)
        return;
      std::this_thread::sleep_for(20ms);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  const std::string& url() const { return url_; }
  std::string storage() const { return dir_.path() + "/storage"; }

  // Every transcript the gateway wrote, one after the other.
  std::string transcripts() const {
    std::string all;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(storage(), ec)) {
      if (e.is_regular_file() && e.path().string().find("/logs/") != std::string::npos)
        all += slurp(e.path().string());
    }
    return all;
  }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  std::string url_;
};

GatewayProcess& gateway() {
  static GatewayProcess g;
  return g;
}

E2BDeploymentConfig against_gateway() {
  E2BDeploymentConfig c;
  c.api_key = kKey;
  c.api_url = gateway().url();
  c.sandbox_url = gateway().url();
  c.template_id = "local";
  c.timeout = Seconds(600);
  c.startup_timeout = Seconds(60);
  return c;
}

// A started E2BDeployment behind the Runtime interface; stopping it kills the sandbox.
using DeployedE2B = DeployedRuntime<E2BDeployment>;

// The conformance suite takes the server the template holds: the local provider's sandboxes see
// this machine's files, so this build's rex-server is there (uploading it is tested below).
const RuntimeFactory kE2B{"E2B",
                          [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                            auto config = against_gateway();
                            config.template_server_path = REX_SERVER_BUILT;
                            return std::make_unique<DeployedE2B>(io, std::move(config));
                          },
                          false};

INSTANTIATE_TEST_SUITE_P(E2B, RuntimeConformance, ::testing::Values(kE2B),
                         [](const auto& info) { return info.param.name; });

// The gateway's answer to GET /sandboxes/ID with the test's key: its status.
int sandbox_status(asio::io_context& io, const std::string& id) {
  http::Client client(io.get_executor(), gateway().url());
  http::ClientRequest get;
  get.target = "/sandboxes/" + id;
  get.headers.emplace_back("X-API-KEY", kKey);
  return run_async(io, client.request(std::move(get)), 30s).status;
}

// The gateway's answer to GET /sandboxes with the test's key: the sandboxes it still runs.
http::ClientResponse listed_sandboxes() {
  asio::io_context io;
  http::Client client(io.get_executor(), gateway().url());
  http::ClientRequest list;
  list.target = "/sandboxes";
  list.headers.emplace_back("X-API-KEY", kKey);
  return run_async(io, client.request(std::move(list)), 30s);
}

std::string startup_error(E2BDeploymentConfig config) {
  asio::io_context io;
  E2BDeployment d(io.get_executor(), std::move(config));
  try {
    run_async(io, d.start(), 120s);
  } catch (const DeploymentStartupError& e) {
    return e.what();
  }
  run_async(io, d.stop(), 60s);
  return "";
}

TEST(E2BDeployment, RunsCommandsAndKillsItsSandboxOnStop) {
  asio::io_context io;
  auto config = against_gateway();
  config.env = {{"REX_E2B_TEST", "from-the-config"}};
  config.metadata = {{"purpose", "e2b-deployment-test"}};
  E2BDeployment d(io.get_executor(), config);
  std::vector<std::string> stages;
  d.add_hook([&](const DeploymentEvent& e) { stages.emplace_back(to_string(e.stage)); });
  run_async(io, d.start(), 120s);
  ASSERT_TRUE(d.started());
  EXPECT_GT(d.server_port(), 0);
  const std::string id = d.sandbox_id();
  EXPECT_EQ(sandbox_status(io, id), 200);

  Command c;
  c.command = "echo $REX_E2B_TEST";
  c.shell = true;
  const auto out = run_async(io, d.runtime().execute(c), 60s);
  EXPECT_EQ(out.stdout_, "from-the-config\n");
  EXPECT_EQ(out.exit_code, 0);

  run_async(io, d.stop(), 60s);
  EXPECT_FALSE(d.started());
  EXPECT_EQ(sandbox_status(io, id), 404) << "the sandbox outlived stop()";
  EXPECT_EQ(stages.front(), "creating");
  EXPECT_EQ(stages.back(), "stopped");
  EXPECT_THROW((void)d.runtime(), DeploymentNotStartedError);
}

// Checkpoints through E2B's API against an E2B-compatible endpoint (the gateway): a snapshot of
// the sandbox with the state of rex-server's session in it, a fork started from it (in a sandbox
// of its own, its session's paths moved there), a pause and a resume (connect), and metrics.
TEST(E2BDeployment, CheckpointsForksPausesAndMeasuresThroughE2BsApi) {
  asio::io_context io;
  auto config = against_gateway();
  config.template_server_path = REX_SERVER_BUILT;
  E2BDeployment d(io.get_executor(), config);
  run_async(io, d.start(), 120s);
  run_async(
      io,
      [&]() -> asio::awaitable<void> {
        Runtime& rt = d.runtime();
        CreateBashSessionRequest session;
        session.startup_timeout = 20;
        co_await rt.create_session(session);
        BashAction set_up;
        set_up.command = "mkdir -p sub && cd sub && echo base > f && export TASK=t";
        set_up.timeout = 30;
        co_await rt.run_in_session(set_up);
        const Checkpoint cp = co_await d.checkpoint();
        EXPECT_EQ(cp.backend, "e2b");
        EXPECT_EQ(cp.sessions.size(), 1u);

        BashAction state;
        state.command = "basename $PWD; cat f; echo $TASK";
        state.timeout = 30;
        auto forks = co_await d.fork_sandboxes(cp, 1);
        EXPECT_EQ((co_await forks[0]->runtime().run_in_session(state)).output, "sub\nbase\nt\n");
        BashAction mine;
        mine.command = "echo fork > f";
        mine.timeout = 30;
        co_await forks[0]->runtime().run_in_session(mine);
        co_await forks[0]->stop();
        EXPECT_EQ((co_await rt.run_in_session(state)).output, "sub\nbase\nt\n");

        const SandboxMetrics m = co_await d.metrics();
        EXPECT_GT(m.cpu_count, 0);
        EXPECT_GT(m.memory_used, 0u);
        co_await d.pause();
        EXPECT_TRUE(d.paused());
        co_await d.resume();
        EXPECT_EQ((co_await rt.run_in_session(state)).output, "sub\nbase\nt\n");
        co_await d.stop();
        co_await d.remove_checkpoint(cp);
      }(),
      240s);
  const auto listed = listed_sandboxes();
  EXPECT_EQ(listed.body, "[]") << "sandboxes left behind";
}

TEST(E2BDeployment, TheServersTokenIsNeverInTheGatewaysTranscripts) {
  asio::io_context io;
  E2BDeployment d(io.get_executor(), against_gateway());
  run_async(io, d.start(), 120s);
  Command c;
  c.command = "true";
  c.shell = true;
  run_async(io, d.runtime().execute(c), 60s);
  // The token is what the server's clients send as X-API-Key (the server overwrites its copy
  // in its environment once read): the deployment holds it.
  const std::string token = d.sandbox().token;
  run_async(io, d.stop(), 60s);
  ASSERT_GE(token.size(), 16u) << "the sandbox's server should hold a token";
  const std::string all = gateway().transcripts();
  ASSERT_NE(all.find("e2b.port"), std::string::npos) << "no routed call was recorded";
  EXPECT_EQ(all.find(token), std::string::npos);
}

TEST(E2BDeployment, AWrongKeyIsRefusedWithTheEndpointsWords) {
  auto config = against_gateway();
  config.api_key = "not-a-key";
  const std::string e = startup_error(config);
  EXPECT_NE(e.find("refused the sandbox"), std::string::npos) << e;
  EXPECT_NE(e.find("401"), std::string::npos) << e;
}

TEST(E2BDeployment, AnUnknownTemplateIsRefusedAndNamed) {
  auto config = against_gateway();
  config.template_id = "no-such-template";
  const std::string e = startup_error(config);
  EXPECT_NE(e.find("no-such-template"), std::string::npos) << e;
}

TEST(E2BDeployment, ASandboxUrlThatAnswersNothingFailsTheStartAndKillsTheSandbox) {
  auto config = against_gateway();
  config.sandbox_url = "http://127.0.0.1:1";  // nothing listens there
  config.startup_timeout = Seconds(10);
  const std::string e = startup_error(config);
  EXPECT_NE(e.find("uploading rex-server"), std::string::npos) << e;
  // The sandbox it made is gone again: the key's list is empty.
  const auto answer = listed_sandboxes();
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.body, "[]") << answer.body;
}

TEST(E2BDeployment, ATemplateServerThatIsNotThereFailsTheStartNamingItAndKillsTheSandbox) {
  auto config = against_gateway();
  config.template_server_path = "/nonexistent/rex server";
  const std::string e = startup_error(config);
  EXPECT_NE(e.find("starting rex-server"), std::string::npos) << e;
  EXPECT_NE(e.find("/nonexistent/rex server"), std::string::npos) << e;
  EXPECT_EQ(listed_sandboxes().body, "[]");
}

TEST(E2BDeployment, WithoutAnyKeyTheConfigIsRefused) {
  const char* saved = std::getenv("E2B_API_KEY");
  const std::string keep = saved ? saved : "";
  ::unsetenv("E2B_API_KEY");
  asio::io_context io;
  E2BDeploymentConfig c;
  c.api_url = "http://127.0.0.1:1";
  EXPECT_THROW(E2BDeployment(io.get_executor(), c), DeploymentConfigError);
  if (saved)
    ::setenv("E2B_API_KEY", keep.c_str(), 1);
}

TEST(E2BDeployment, TakesE2BsEnvironmentVariablesAsItsSdksDo) {
  ::setenv("E2B_API_KEY", kKey, 1);
  ::setenv("E2B_API_URL", gateway().url().c_str(), 1);
  ::setenv("E2B_SANDBOX_URL", gateway().url().c_str(), 1);
  asio::io_context io;
  E2BDeploymentConfig c;
  c.template_id = "local";
  E2BDeployment d(io.get_executor(), c);
  run_async(io, d.start(), 120s);
  EXPECT_EQ(run_async(io, d.runtime().is_alive(), 30s).is_alive, true);
  run_async(io, d.stop(), 60s);
  ::unsetenv("E2B_API_KEY");
  ::unsetenv("E2B_API_URL");
  ::unsetenv("E2B_SANDBOX_URL");
}

// `rex run --deployment e2b`, as a user runs it: the commands' output, and the sandbox gone.
TEST(E2BDeployment, RexRunUsesIt) {
  const std::string command = fmt::format(
      "E2B_SANDBOX_URL={0} {1} run -q --deployment e2b --url {0} --token {2} --environment local "
      "'cd /tmp' 'pwd' 'echo $((6*7))' 2>&1",
      gateway().url(), REX_CLI_PATH, kKey);
  FILE* p = ::popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr)
    out += buf.data();
  const int status = ::pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("/tmp\n"), std::string::npos) << out;
  EXPECT_NE(out.find("42\n"), std::string::npos) << out;
  EXPECT_EQ(listed_sandboxes().body, "[]");
}

// The backend conformance suite through the same gateway, rex gc --all included: the gateway is
// this executable's own.
BackendCase e2b_backend() {
  BackendCase c;
  c.name = "E2B";
  c.settings = [] {
    auto config = against_gateway();
    config.template_server_path = REX_SERVER_BUILT;
    return DeploymentConfig(std::move(config));
  };
  c.request.template_name = "local";
  c.failing.template_name = "no-such-template";
  c.failing_says = "unknown environment";
  return c;
}

INSTANTIATE_TEST_SUITE_P(E2B, BackendConformance, ::testing::Values(e2b_backend()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(E2B, BackendGcConformance, ::testing::Values(e2b_backend()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
