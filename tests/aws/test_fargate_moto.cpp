// FargateDeployment against moto (AWS's control plane, every signature checked) and a data plane
// that runs the task's rex-server on this machine (tests/aws/fargate_emulator.hpp): the calls
// SWE-ReX's Fargate deployment makes, from C++; what is left in the emulator afterwards; a wrong
// credential; and the runtime conformance suite through it.
#include <rex/aws/client.hpp>
#include <rex/backends/fargate/fargate_deployment.hpp>
#include <rex/backends/fargate/fargate_gc.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <string>

#include "aws/fargate_emulator.hpp"
#include "conformance/backend_conformance.hpp"
#include "conformance/conformance.hpp"
#include "support/async_test.hpp"
#include "support/deployed_runtime.hpp"

namespace rex::test {
namespace {

namespace json = boost::json;

FargateDeploymentConfig sandbox_config() {
  FargateDeploymentConfig c;
  c.image = "python:3.11";
  c.port = FargateEmulator::get().sandbox_port();
  c.server_image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/rex-server:test";
  c.startup_timeout = Seconds(30);
  c.runtime_timeout = Seconds(30);
  return c;
}

class FargateMoto : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = MotoServer::unavailable(); !why.empty())
      GTEST_SKIP() << why;
    emulator = &FargateEmulator::get();
  }

  json::object describe(const std::string& cluster, const std::string& task) {
    aws::AwsClient client(io.get_executor(), emulator->config());
    const json::object got = run_async(
        io, client.json_call(
                aws::kEcs, "DescribeTasks",
                json::object{{"cluster", cluster}, {"tasks", json::array{json::value(task)}}}));
    return got.at("tasks").at(0).as_object();
  }

  std::size_t security_groups(const std::string& prefix) {
    aws::AwsClient client(io.get_executor(), emulator->config());
    const aws::XmlElement got =
        run_async(io, client.query_call(aws::kEc2, "DescribeSecurityGroups", {}));
    std::size_t n = 0;
    if (const auto* set = got.child("securityGroupInfo"))
      for (const auto& g : set->children)
        if (g.text_at("groupName").rfind(prefix, 0) == 0)
          ++n;
    return n;
  }

  // Fargate deletes the network interface of a task that has stopped; moto keeps it: this does.
  void delete_interfaces_of_stopped_tasks() {
    aws::AwsClient client(io.get_executor(), emulator->config());
    const json::object stopped = run_async(
        io,
        client.json_call(aws::kEcs, "ListTasks",
                         json::object{{"cluster", "rex-cluster"}, {"desiredStatus", "STOPPED"}}));
    for (const auto& arn : stopped.at("taskArns").as_array()) {
      const json::object task = describe("rex-cluster", std::string(arn.as_string()));
      for (const auto& a : task.at("attachments").as_array())
        for (const auto& detail : a.at("details").as_array())
          if (detail.at("name") == "networkInterfaceId") {
            try {
              run_async(io, client.query_call(aws::kEc2, "DeleteNetworkInterface",
                                              {{"NetworkInterfaceId",
                                                std::string(detail.at("value").as_string())}}));
            } catch (const aws::AwsError&) {
              // deleted before
            }
          }
    }
  }

  asio::io_context io;
  FargateEmulator* emulator = nullptr;
};

TEST_F(FargateMoto, ATaskRunsTheServerAndStopsWithTheDeployment) {
  FargateDeployment d(io.get_executor(), sandbox_config());
  std::vector<std::string> stages;
  d.add_hook(
      [&stages](const DeploymentEvent& e) { stages.push_back(std::string(to_string(e.stage))); });
  run_async(io, d.start(), std::chrono::seconds(90));
  ASSERT_TRUE(d.started());
  EXPECT_EQ(d.url().rfind("http://127.0.0.", 0), 0u) << d.url();
  EXPECT_TRUE(d.url().ends_with(fmt::format(":{}", emulator->sandbox_port()))) << d.url();
  EXPECT_NE(d.task_arn().find(":task/"), std::string::npos) << d.task_arn();

  CreateBashSessionRequest create;
  run_async(io, d.runtime().create_session(std::move(create)));
  BashAction action;
  action.command = "echo \"hello from $((6*7))\"";
  const BashObservation seen = run_async(io, d.runtime().run_in_session(Action(action)));
  EXPECT_EQ(seen.output, "hello from 42\n");
  const IsAliveResponse alive = run_async(io, d.is_alive());
  EXPECT_TRUE(alive.is_alive) << alive.message;

  // What ECS was asked: the task of rex's cluster, tagged with the deployment's id.
  const json::object task = describe("rex-cluster", d.task_arn());
  EXPECT_EQ(task.at("lastStatus"), "RUNNING");
  EXPECT_EQ(task.at("launchType"), "FARGATE");

  run_async(io, d.stop(), std::chrono::seconds(60));
  const std::string events = emulator->events();
  EXPECT_NE(events.find("\"event\": \"run\", \"task\": \"" + d.task_arn()), std::string::npos)
      << events;
  EXPECT_NE(events.find("\"event\": \"stop\", \"task\": \"" + d.task_arn()), std::string::npos)
      << events;
  EXPECT_EQ(describe("rex-cluster", d.task_arn()).at("desiredStatus"), "STOPPED");
  EXPECT_NE(std::find(stages.begin(), stages.end(), "ready"), stages.end());
  EXPECT_NE(std::find(stages.begin(), stages.end(), "stopped"), stages.end());
}

TEST_F(FargateMoto, ASecondDeploymentReusesTheRoleDefinitionAndGroup) {
  for (int i = 0; i < 2; ++i) {
    FargateDeployment d(io.get_executor(), sandbox_config());
    run_async(io, d.start(), std::chrono::seconds(90));
    run_async(io, d.stop(), std::chrono::seconds(60));
  }
  EXPECT_EQ(security_groups("rex-deployment-sg-"), 1u);
}

TEST_F(FargateMoto, AWrongSecretFailsTheStartAtOnceAndRunsNothing) {
  const std::string before = emulator->events();
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "not the secret");
  FargateDeployment d(io.get_executor(), sandbox_config());
  try {
    run_async(io, d.start(), std::chrono::seconds(30));
    FAIL() << "started with a wrong secret";
  } catch (const DeploymentStartupError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("fargate: ECS CreateCluster: SignatureDoesNotMatch: ", 0), 0u) << what;
    EXPECT_NE(what.find("(credentials from environment)"), std::string::npos) << what;
  }
  EXPECT_FALSE(d.started());
  EXPECT_EQ(emulator->events(), before) << "a task ran";
}

// `rex run` on Fargate killed with SIGKILL leaves its task running; `rex gc --fargate`'s
// collection stops it (its owner is gone) and keeps a live deployment's.
TEST_F(FargateMoto, GcStopsTheTaskOfAKilledProcessAndKeepsALiveOnes) {
  aws::AwsClient client(io.get_executor(), emulator->config());
  const std::string before = emulator->events();
  const pid_t killed = spawn_process({REX_CLI_PATH, "run", "--deployment", "fargate", "--port",
                                      std::to_string(emulator->sandbox_port()), "--timeout", "300",
                                      "-q", "sleep 300"});
  ASSERT_GT(killed, 0);
  // Its task runs once the data plane has started its server and `rex run` has its session.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string task;
  while (task.empty() && std::chrono::steady_clock::now() < until) {
    const std::string events = emulator->events().substr(before.size());
    if (const auto at = events.find("\"event\": \"run\", \"task\": \""); at != std::string::npos) {
      const auto start = at + std::string("\"event\": \"run\", \"task\": \"").size();
      task = events.substr(start, events.find('"', start) - start);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(task.empty()) << "rex run started no task: " << emulator->events();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ::kill(killed, SIGKILL);
  ::waitpid(killed, nullptr, 0);
  EXPECT_EQ(describe("rex-cluster", task).at("lastStatus"), "RUNNING");

  FargateDeployment live(io.get_executor(), sandbox_config());
  run_async(io, live.start(), std::chrono::seconds(90));

  FargateGcOptions dry;
  dry.gc.dry_run = true;
  const GcReport preview = run_async(io, collect_fargate_garbage(client, dry));
  ASSERT_EQ(preview.removed.size(), 1u);
  EXPECT_EQ(preview.removed[0].name, task);
  EXPECT_EQ(describe("rex-cluster", task).at("lastStatus"), "RUNNING") << "a dry run stopped it";

  const GcReport report = run_async(io, collect_fargate_garbage(client));
  ASSERT_EQ(report.removed.size(), 1u) << "kept: " << report.kept.size();
  EXPECT_EQ(report.removed[0].name, task);
  EXPECT_NE(report.removed[0].reason.find(fmt::format("owner process {} is gone", killed)),
            std::string::npos)
      << report.removed[0].reason;
  EXPECT_TRUE(report.errors.empty());
  bool live_kept = false;
  for (const auto& k : report.kept)
    live_kept = live_kept || k.name == live.task_arn();
  EXPECT_TRUE(live_kept) << "the live deployment's task was not kept";
  EXPECT_EQ(describe("rex-cluster", task).at("desiredStatus"), "STOPPED");
  EXPECT_NE(emulator->events().find("\"event\": \"stop\", \"task\": \"" + task), std::string::npos);
  run_async(io, live.stop(), std::chrono::seconds(60));
}

// The security group a deployment made outlives its tasks (the next deployment shares it); the
// gc deletes it once nothing uses it, and a later deployment makes it again.
TEST_F(FargateMoto, GcDeletesTheSecurityGroupNothingUsesAny) {
  {
    FargateDeployment d(io.get_executor(), sandbox_config());
    run_async(io, d.start(), std::chrono::seconds(90));
    aws::AwsClient client(io.get_executor(), emulator->config());
    FargateGcOptions young;  // the group was made moments ago: kept
    const GcReport kept = run_async(io, collect_fargate_garbage(client, young));
    EXPECT_EQ(security_groups("rex-deployment-sg-"), 1u);
    bool seen = false;
    for (const auto& k : kept.kept)
      seen = seen || k.reason.find("security group") != std::string::npos;
    EXPECT_TRUE(seen) << "the group is not in the report";
    run_async(io, d.stop(), std::chrono::seconds(60));
    delete_interfaces_of_stopped_tasks();
  }
  aws::AwsClient client(io.get_executor(), emulator->config());
  FargateGcOptions now;
  now.group_grace = std::chrono::seconds(0);
  FargateGcOptions dry = now;
  dry.gc.dry_run = true;
  const GcReport preview = run_async(io, collect_fargate_garbage(client, dry));
  EXPECT_EQ(security_groups("rex-deployment-sg-"), 1u) << "a dry run deleted it";
  const GcReport report = run_async(io, collect_fargate_garbage(client, now));
  std::string kept;
  for (const auto& k : report.kept)
    kept += k.name + ": " + k.reason + "; ";
  EXPECT_EQ(security_groups("rex-deployment-sg-"), 0u) << "kept: " << kept;
  ASSERT_EQ(report.removed.size(), preview.removed.size());
  bool removed = false;
  for (const auto& r : report.removed)
    removed = removed || r.reason == "security group no network interface uses";
  EXPECT_TRUE(removed);
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();

  FargateDeployment again(io.get_executor(), sandbox_config());
  run_async(io, again.start(), std::chrono::seconds(90));
  EXPECT_EQ(security_groups("rex-deployment-sg-"), 1u);
  run_async(io, again.stop(), std::chrono::seconds(60));
}

TEST_F(FargateMoto, BadSettingsAreRefusedBeforeAnyCall) {
  FargateDeploymentConfig c = sandbox_config();
  c.assign_public_ip = false;
  EXPECT_THROW(FargateDeployment(io.get_executor(), c), DeploymentConfigError);
  c.connect = "somewhere";
  EXPECT_THROW(FargateDeployment(io.get_executor(), c), DeploymentConfigError);
}

using DeployedTask = DeployedRuntime<FargateDeployment>;

const RuntimeFactory kFargate{"Fargate",
                              [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                if (const std::string why = MotoServer::unavailable(); !why.empty())
                                  throw std::runtime_error(why);
                                return std::make_unique<DeployedTask>(io, sandbox_config());
                              },
                              true};

INSTANTIATE_TEST_SUITE_P(Fargate, RuntimeConformance, ::testing::Values(kFargate),
                         [](const auto& info) { return info.param.name; });

// The backend conformance suite through moto and the emulated data plane; `rex gc --all` as a dry
// run only (it would also delete the security group the other tests count).
BackendCase fargate_backend() {
  BackendCase c;
  c.name = "Fargate";
  c.settings = [] { return DeploymentConfig(sandbox_config()); };
  c.unavailable = [] { return MotoServer::unavailable(); };
  c.failing.image = "fake-fail:latest";  // the data plane reports it unpulled
  c.failing_says = "CannotPullContainerError: fake-fail";
  c.collects_all = false;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Fargate, BackendConformance, ::testing::Values(fargate_backend()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Fargate, BackendGcConformance, ::testing::Values(fargate_backend()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
