// The gateway's fargate provider against moto and the data plane (fargate_emulator.hpp): a `rex
// gateway` process with a `fargate:` section, driven over HTTP; its sessions are ECS tasks whose
// rex-server runs here. A session's life, its task adopted with its state by the gateway restarted
// after a kill -9, a task stopped behind the gateway's back making its session lost, and an orphan
// task with the gateway's tag stopped while another gateway's stays.
#include <rex/aws/client.hpp>
#include <rex/backends/fargate/fargate_deployment.hpp>
#include <rex/http/client.hpp>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

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
    config = dir.path() + "/gateway.yaml";
    {
      std::ofstream out(config);
      out << "orphan_grace: 1\ndrift_interval: 1\nsweep_interval: 0.1\n"
          << "fargate:\n  server_image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/rex:test\n"
          << "  port: " << emulator->sandbox_port() << "\n";
    }
    ASSERT_NO_FATAL_FAILURE(start_gateway("gateway.log"));
  }

  void TearDown() override {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    // A test that failed half-way leaves no task running (nor its rex-server, which the data
    // plane ends with the task).
    for (const std::string& task : tasks_to_stop) {
      try {
        stop_task(task);
      } catch (const std::exception&) {
        // stopped already, or the emulator is gone
      }
    }
  }

  // A `rex gateway` on a fresh port, on the fixture's storage and config, once /readyz answers
  // 200 (its reconciliation is done by then).
  void start_gateway(const std::string& log_name) {
    port = free_loopback_port();
    log = dir.path() + "/" + log_name;
    // The AWS variables the emulator set are this process's: the gateway inherits them.
    pid = spawn_logged({REX_CLI_PATH, "gateway", "--listen", fmt::format("127.0.0.1:{}", port),
                        "--storage", dir.path() + "/storage", "--config", config},
                       log);
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
      ASSERT_LT(std::chrono::steady_clock::now(), until) << read_text(log);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void kill_gateway() {
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
    pid = -1;
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
    return within(limit, [&] { return describe(task).at("desiredStatus") == "STOPPED"; });
  }

  static bool within(std::chrono::seconds limit, const std::function<bool()>& holds) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (holds())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }

  // The cluster's tasks ECS runs (ListTasks with desiredStatus RUNNING, as the provider lists
  // them) whose tag `key` is `value`.
  std::vector<std::string> running_tasks(const std::string& key, const std::string& value) {
    aws::AwsClient client(io.get_executor(), emulator->config());
    const json::object listed = run_async(
        io,
        client.json_call(aws::kEcs, "ListTasks",
                         json::object{{"cluster", "rex-cluster"}, {"desiredStatus", "RUNNING"}}));
    const json::array& arns = listed.at("taskArns").as_array();
    std::vector<std::string> out;
    if (arns.empty())
      return out;
    const json::object described =
        run_async(io, client.json_call(aws::kEcs, "DescribeTasks",
                                       json::object{{"cluster", "rex-cluster"},
                                                    {"tasks", arns},
                                                    {"include", json::array{"TAGS"}}}));
    for (const auto& t : described.at("tasks").as_array())
      for (const auto& tag : t.at("tags").as_array())
        if (tag.at("key") == key.c_str() && tag.at("value") == value.c_str())
          out.emplace_back(t.at("taskArn").as_string());
    return out;
  }

  // StopTask as anyone with the keys would call it, not through the gateway: moto marks the task
  // STOPPED and the data plane ends its rex-server.
  void stop_task(const std::string& task) {
    aws::AwsClient client(io.get_executor(), emulator->config());
    run_async(io, client.json_call(aws::kEcs, "StopTask",
                                   json::object{{"cluster", "rex-cluster"},
                                                {"task", task},
                                                {"reason", "stopped behind the gateway's back"}}));
  }

  // Whether the data plane has ended the task's rex-server (its "stop" event is written once the
  // process has exited).
  bool server_ended(const std::string& task) {
    const std::string events = emulator->events();
    std::size_t at = 0;
    while (at < events.size()) {
      const std::size_t nl = events.find('\n', at);
      const std::string line =
          events.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      at = nl == std::string::npos ? events.size() : nl + 1;
      if (line.empty())
        continue;
      const json::object event = json::parse(line).as_object();
      if (event.at("event") == "stop" && event.at("task") == task.c_str())
        return true;
    }
    return false;
  }

  // A fargate session, its task stopped in TearDown if the test does not get to end it.
  json::object create_session() {
    const auto [status, created] =
        call("POST", "/api/sessions", R"({"provider": "fargate", "environment": "local"})");
    EXPECT_EQ(status, 201u) << created << read_text(log);
    json::object session = json::parse(created).as_object();
    if (const json::value* task = session.if_contains("sandbox_id"); task && task->is_string())
      tasks_to_stop.emplace_back(task->get_string());
    return session;
  }

  json::object execute(const std::string& id, const std::string& code) {
    const auto [status, body] =
        call("POST", "/api/sessions/" + id + "/execute",
             json::serialize(json::object{{"code", code}, {"language", "bash"}}));
    EXPECT_EQ(status, 200u) << body;
    return json::parse(body).as_object();
  }

  json::object session_record(const std::string& id) {
    const auto [status, body] = call("GET", "/api/sessions/" + id);
    EXPECT_EQ(status, 200u) << body;
    return json::parse(body).as_object();
  }

  FargateDeploymentConfig task_config(const std::string& gateway, const std::string& session) {
    FargateDeploymentConfig c;
    c.port = emulator->sandbox_port();
    c.server_image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/rex:test";
    c.startup_timeout = Seconds(30);
    c.runtime_timeout = Seconds(30);
    c.labels = {{"rex.gateway", gateway}, {"rex.session", session}};
    return c;
  }

  asio::io_context io;
  FargateEmulator* emulator = nullptr;
  TempDir dir;
  std::string config;
  std::string log;
  int port = 0;
  pid_t pid = -1;
  std::string gateway_id;
  std::vector<std::string> tasks_to_stop;
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

TEST_F(FargateGateway, AGatewayKilledAndRestartedAdoptsTheSessionsTaskWithItsState) {
  const json::object session = create_session();
  ASSERT_FALSE(HasFailure());
  const std::string id(session.at("session_id").as_string());
  const std::string task(session.at("sandbox_id").as_string());
  // The task's rex-server runs on this machine: the test's directory is the sandbox's too.
  const std::string work = dir.path() + "/work";
  EXPECT_EQ(execute(id, "mkdir -p " + work + " && cd " + work +
                            " && export REX_MARK=41 && echo written-before > mark.txt && pwd")
                .at("stdout"),
            (work + "\n").c_str());

  const std::string before = gateway_id;
  ASSERT_NO_FATAL_FAILURE(kill_gateway());
  EXPECT_EQ(describe(task).at("desiredStatus"), "RUNNING") << "the task ended with the gateway";
  ASSERT_NO_FATAL_FAILURE(start_gateway("gateway-restarted.log"));
  EXPECT_EQ(gateway_id, before);

  const json::object again = session_record(id);
  EXPECT_EQ(again.at("state"), "ready") << again << read_text(log);
  EXPECT_EQ(again.at("sandbox_id"), task.c_str()) << again;
  // The shell the session had (its directory and variable), and its file through the SWE-ReX
  // proxy.
  EXPECT_EQ(execute(id, "pwd; echo $REX_MARK").at("stdout"), (work + "\n41\n").c_str());
  const auto [status, body] = call(
      "POST", "/api/sessions/" + id + "/swerex/execute",
      json::serialize(json::object{{"command", "cat " + work + "/mark.txt"}, {"shell", true}}));
  ASSERT_EQ(status, 200u) << body;
  const json::object out = json::parse(body).as_object();
  EXPECT_EQ(out.at("stdout"), "written-before\n") << out;
  EXPECT_EQ(out.at("exit_code"), 0) << out;
  EXPECT_EQ(running_tasks("rex.session", id), std::vector<std::string>{task})
      << "the session's task was not the one running, or a second one was started";

  const auto [deleted, gone] = call("DELETE", "/api/sessions/" + id);
  EXPECT_EQ(deleted, 200u) << gone;
  EXPECT_EQ(json::parse(gone).at("state"), "destroyed") << gone;
  EXPECT_TRUE(stopped_within(task, std::chrono::seconds(10))) << read_text(log);
  EXPECT_TRUE(within(std::chrono::seconds(10), [&] { return server_ended(task); }))
      << emulator->events();
  EXPECT_EQ(running_tasks("rex.gateway", gateway_id), std::vector<std::string>{});
}

TEST_F(FargateGateway, ATaskStoppedBehindTheGatewaysBackMakesItsSessionLost) {
  const json::object session = create_session();
  ASSERT_FALSE(HasFailure());
  const std::string id(session.at("session_id").as_string());
  const std::string task(session.at("sandbox_id").as_string());
  EXPECT_EQ(execute(id, "echo hi").at("stdout"), "hi\n");

  stop_task(task);
  // The drift check runs every second (drift_interval: 1).
  ASSERT_TRUE(
      within(std::chrono::seconds(20), [&] { return session_record(id).at("state") == "lost"; }))
      << session_record(id) << read_text(log);
  const json::object lost = session_record(id);
  EXPECT_EQ(lost.at("reason"), "lost") << lost;
  // The drift check finds the task gone from the running ones, or the proxy finds its server
  // ended first: either is the loss.
  const json::value& error = lost.at("error");
  EXPECT_TRUE(error == "the sandbox is gone" || error == "the sandbox's server has ended") << lost;
  EXPECT_TRUE(lost.contains("ended_at")) << lost;

  const auto [status, body] =
      call("POST", "/api/sessions/" + id + "/execute",
           json::serialize(json::object{{"code", "echo hi"}, {"language", "bash"}}));
  EXPECT_EQ(status, 410u) << body;
  EXPECT_EQ(json::parse(body).at("error").at("code"), "session.destroyed") << body;
  EXPECT_TRUE(server_ended(task)) << emulator->events();
  EXPECT_EQ(running_tasks("rex.gateway", gateway_id), std::vector<std::string>{});
}

}  // namespace
}  // namespace rex::test
