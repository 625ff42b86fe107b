// The gateway's fargate provider against moto and the data plane (fargate_emulator.hpp): a `rex
// gateway` process with a `fargate:` section, driven over HTTP; its sessions are ECS tasks whose
// rex-server runs here. A session's life, and an orphan task with the gateway's tag stopped while
// another gateway's stays.
#include <rex/aws/client.hpp>
#include <rex/deployment/fargate_deployment.hpp>
#include <rex/http/client.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <fstream>
#include <string>
#include <thread>

#include "aws/fargate_emulator.hpp"
#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex::test {
namespace {

namespace json = boost::json;

class FargateGateway : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = MotoServer::unavailable(); !why.empty())
      GTEST_SKIP() << why;
    emulator = &FargateEmulator::get();
    port = free_loopback_port();
    const std::string config = dir.path() + "/gateway.yaml";
    {
      std::ofstream out(config);
      out << "orphan_grace: 1\ndrift_interval: 1\nsweep_interval: 0.1\n"
          << "fargate:\n  server_image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/rex:test\n"
          << "  port: " << emulator->sandbox_port() << "\n";
    }
    // The AWS variables the emulator set are this process's: the gateway inherits them.
    pid = spawn_logged({REX_CLI_PATH, "gateway", "--listen", fmt::format("127.0.0.1:{}", port),
                        "--storage", dir.path() + "/storage", "--config", config},
                       dir.path() + "/gateway.log");
    ASSERT_GT(pid, 0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      try {
        const auto [status, body] = call("GET", "/readyz");
        if (status == 200) {
          gateway_id = std::string(json::parse(body).at("gateway_id").as_string());
          break;
        }
      } catch (const std::exception&) {
        // not listening yet
      }
      ASSERT_LT(std::chrono::steady_clock::now(), until) << read_text(dir.path() + "/gateway.log");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void TearDown() override {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }

  std::pair<unsigned, std::string> call(const std::string& method, const std::string& target,
                                        const std::string& body = {}) {
    http::ClientConfig cc;
    cc.timeout = std::chrono::seconds(120);
    http::Client client(io.get_executor(), fmt::format("http://127.0.0.1:{}", port), cc);
    http::ClientRequest r;
    r.method = method;
    r.target = target;
    r.body = body;
    if (!body.empty())
      r.headers.emplace_back("Content-Type", "application/json");
    const http::ClientResponse got = run_async(io, client.request(std::move(r)));
    return {got.status, got.body};
  }

  json::object describe(const std::string& task) {
    aws::AwsClient client(io.get_executor(), emulator->config());
    const json::object got =
        run_async(io, client.json_call(aws::kEcs, "DescribeTasks",
                                       json::object{{"cluster", "rex-cluster"},
                                                    {"tasks", json::array{json::value(task)}},
                                                    {"include", json::array{"TAGS"}}}));
    return got.at("tasks").at(0).as_object();
  }

  bool stopped_within(const std::string& task, std::chrono::seconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (describe(task).at("desiredStatus") == "STOPPED")
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }

  FargateDeploymentConfig task_config(const std::string& gateway, const std::string& session) {
    FargateDeploymentConfig c;
    c.port = emulator->sandbox_port();
    c.server_image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/rex:test";
    c.startup_timeout = 30;
    c.runtime_timeout = 30;
    c.labels = {{"rex.gateway", gateway}, {"rex.session", session}};
    return c;
  }

  asio::io_context io;
  FargateEmulator* emulator = nullptr;
  TempDir dir;
  int port = 0;
  pid_t pid = -1;
  std::string gateway_id;
};

TEST_F(FargateGateway, ASessionIsATaskAndItsStateIsKeptUntilItEnds) {
  const auto [status, created] =
      call("POST", "/api/sessions", R"({"provider": "fargate", "environment": "local"})");
  ASSERT_EQ(status, 201u) << created << read_text(dir.path() + "/gateway.log");
  const json::object session = json::parse(created).as_object();
  const std::string id(session.at("session_id").as_string());
  const std::string task(session.at("sandbox_id").as_string());
  EXPECT_NE(task.find(":task/"), std::string::npos) << task;
  const json::object described = describe(task);
  json::object tags;
  for (const auto& t : described.at("tags").as_array())
    tags[t.at("key").as_string()] = t.at("value");
  EXPECT_EQ(tags.at("rex.gateway"), gateway_id.c_str());
  EXPECT_EQ(tags.at("rex.session"), id.c_str());

  auto execute = [&](const std::string& code, const std::string& language) {
    const auto [s, body] =
        call("POST", "/api/sessions/" + id + "/execute",
             json::serialize(json::object{{"code", code}, {"language", language}}));
    EXPECT_EQ(s, 200u) << body;
    return json::parse(body).as_object();
  };
  EXPECT_EQ(execute("cd /tmp && echo hi", "bash").at("stdout"), "hi\n");
  EXPECT_EQ(execute("pwd", "bash").at("stdout"), "/tmp\n");

  const auto [deleted, body] = call("DELETE", "/api/sessions/" + id);
  EXPECT_EQ(deleted, 200u) << body;
  EXPECT_TRUE(stopped_within(task, std::chrono::seconds(10)));
}

TEST_F(FargateGateway, AnOrphanTaskWithTheGatewaysTagIsStoppedAndOthersAreNot) {
  FargateDeployment ours(io.get_executor(), task_config(gateway_id, "s-no-record"));
  run_async(io, ours.start(), std::chrono::seconds(90));
  FargateDeployment theirs(io.get_executor(), task_config("another-gateway", "s-other"));
  run_async(io, theirs.start(), std::chrono::seconds(90));
  EXPECT_TRUE(stopped_within(ours.task_arn(), std::chrono::seconds(20)))
      << read_text(dir.path() + "/gateway.log");
  EXPECT_EQ(describe(theirs.task_arn()).at("desiredStatus"), "RUNNING")
      << "another gateway's task was stopped";
  run_async(io, theirs.stop(), std::chrono::seconds(60));
  run_async(io, ours.stop(), std::chrono::seconds(60));
}

}  // namespace
}  // namespace rex::test
