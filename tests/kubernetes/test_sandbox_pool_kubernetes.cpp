// SandboxPool over KubernetesDeployment against the local cluster (scripts/k8s.sh): a pod
// deleted under a lease, and a sandbox container killed under one (its containerd task, as an
// OOM kill or a crashed node agent would), are each reported with the cluster's reason and
// replaced; `rex eval` fans 20 instances out over pods and leaves none behind.
#include <rex/backends/kubernetes/kubernetes_deployment.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>
#include <rex/pool/sandbox_pool.hpp>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "kubernetes/local_cluster.hpp"
#include "support/async_test.hpp"
#include "support/json_lines.hpp"
#include "support/test_helpers.hpp"

namespace rex::test {
namespace {

using namespace std::chrono_literals;
using ::testing::AnyOf;
using ::testing::HasSubstr;
namespace json = boost::json;
namespace k8s = rex::kubernetes;

// The containerd of the local cluster (scripts/k8s.sh: REX_K8S_RUN).
constexpr const char* kContainerdSocket = "/run/rex-k8s/containerd.sock";

class KubernetesPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto why = no_cluster_reason(); !why.empty())
      GTEST_SKIP() << why;
    api_ = admin_api(io_.get_executor());
  }

  json::value get(const std::string& path) { return run_async(io_, api_->call("GET", path), 30s); }

  // Pods and Secrets labelled rex.test=`value` still in the cluster (pods being deleted count).
  std::size_t remaining(const std::string& value) {
    std::size_t n = 0;
    for (const char* kind : {"pods", "secrets"}) {
      const json::value list = get(
          fmt::format("/api/v1/namespaces/default/{}?labelSelector=rex.test%3D{}", kind, value));
      n += list.at("items").as_array().size();
    }
    return n;
  }

  // The containerd id of a pod's sandbox container.
  asio::awaitable<std::string> sandbox_container_id(std::string pod) {
    const json::value v = co_await api_->call("GET", "/api/v1/namespaces/default/pods/" + pod);
    for (const auto& s : v.at("status").at("containerStatuses").as_array()) {
      if (s.at("name") == "sandbox") {
        const std::string id = json::value_to<std::string>(s.at("containerID"));
        const auto sep = id.find("://");
        co_return sep == std::string::npos ? id : id.substr(sep + 3);
      }
    }
    co_return std::string();
  }

  // A pool of at most two pods: the first lease's pod meets `fault`; the failure it causes names
  // `reason`, the lease is found broken, and the next lease is a new pod that works.
  asio::awaitable<void> fault_under_a_lease(
      const std::string& label, std::function<asio::awaitable<void>(KubernetesDeployment&)> fault,
      std::vector<std::string> reasons) {
    auto executor = co_await asio::this_coro::executor;
    SandboxPoolConfig config;
    config.deployment = bookworm_pod(label, 90);
    config.max_sandboxes = 2;
    SandboxPool pool(executor, config);

    auto lease = co_await pool.acquire();
    const auto first = lease.sandbox_id();
    auto& deployment = dynamic_cast<KubernetesDeployment&>(lease.deployment());
    Command hello;
    hello.command = "echo before";
    hello.shell = true;
    hello.timeout = 20;
    EXPECT_EQ((co_await lease.runtime().execute(hello)).stdout_, "before\n");
    co_await fault(deployment);

    // At the pod's address the server may answer for a moment after the fault, until the
    // kubelet has stopped it; then a call fails, naming the reason.
    std::string failure;
    asio::steady_timer pause(executor);
    for (const auto until = std::chrono::steady_clock::now() + 30s;
         failure.empty() && std::chrono::steady_clock::now() < until;) {
      try {
        Command after = hello;
        after.command = "echo after";
        co_await lease.runtime().execute(after);
      } catch (const SandboxLostError& e) {
        failure = e.what();
      } catch (const std::exception& e) {
        failure = std::string("not a SandboxLostError: ") + e.what();
      }
      pause.expires_after(100ms);
      co_await pause.async_wait(asio::use_awaitable);
    }
    EXPECT_THAT(failure, HasSubstr(deployment.pod_name()));
    std::vector<::testing::Matcher<const std::string&>> named;
    for (const auto& r : reasons)
      named.push_back(HasSubstr(r));
    EXPECT_THAT(failure, ::testing::AnyOfArray(named));
    const auto alive = co_await lease.check();
    EXPECT_FALSE(alive.is_alive);
    EXPECT_THAT(alive.message, HasSubstr(deployment.pod_name()));
    EXPECT_TRUE(lease.broken());
    co_await lease.release();

    auto next = co_await pool.acquire();
    EXPECT_NE(next.sandbox_id(), first);
    Command replaced = hello;
    replaced.command = "echo replaced";
    EXPECT_EQ((co_await next.runtime().execute(replaced)).stdout_, "replaced\n");
    co_await next.release();
    co_await pool.shutdown();
    EXPECT_EQ(pool.stats().running, 0u);
  }

  asio::io_context io_;
  std::unique_ptr<k8s::ApiClient> api_;
};

TEST_F(KubernetesPoolTest, APodDeletedUnderALeaseIsReportedAndReplaced) {
  auto fault = [this](KubernetesDeployment& d) -> asio::awaitable<void> {
    json::object now{{"gracePeriodSeconds", 0}};
    co_await api_->call("DELETE", "/api/v1/namespaces/default/pods/" + d.pod_name(),
                        std::move(now));
  };
  run_async(io_, fault_under_a_lease("pool-deleted", fault, {"deleted"}), 240s);
  EXPECT_EQ(remaining("pool-deleted"), 0u);
}

TEST_F(KubernetesPoolTest, ASandboxContainerKilledUnderALeaseIsReportedAndReplaced) {
  if (!std::filesystem::exists(kContainerdSocket))
    GTEST_SKIP() << kContainerdSocket << " is not there: not the local cluster's node";
  std::string ctr_output;
  auto fault = [this, &ctr_output](KubernetesDeployment& d) -> asio::awaitable<void> {
    const std::string id = co_await sandbox_container_id(d.pod_name());
    EXPECT_FALSE(id.empty()) << "no sandbox container in the pod's status";
    const auto [status, text] = command_output(fmt::format(
        "ctr --address {} --namespace k8s.io task kill -s SIGKILL {}", kContainerdSocket, id));
    EXPECT_EQ(status, 0) << text;
    ctr_output = text;
  };
  // The pod's restartPolicy is Never: a killed sandbox container ends the pod.
  run_async(
      io_,
      fault_under_a_lease("pool-killed", fault, {"container sandbox terminated", "exit code 137"}),
      240s);
  EXPECT_EQ(ctr_output, "");
  EXPECT_EQ(remaining("pool-killed"), 0u);
}

// `rex eval` as a harness runs it on a cluster: 20 instances, 4 pods at a time, each with its
// upload, setup, command and artifact; every pod and Secret gone when it exits.
TEST_F(KubernetesPoolTest, RexEvalOverTwentyInstancesLeavesNothingLabelled) {
  TempDir dir;
  dir.file("input.txt", "from the host\n");
  const std::string instances = dir.path() + "/instances.jsonl";
  {
    std::ofstream f(instances);
    for (int n = 0; n < 20; ++n) {
      json::object i{{"id", "k8s-" + std::to_string(n)},
                     {"upload", json::array{json::object{{"source", "input.txt"},
                                                         {"target", "data/input.txt"}}}},
                     {"setup", json::array{"cd data", "export N=" + std::to_string(n)}},
                     {"run", "echo $((N * 6)) > answer.txt; cat input.txt"},
                     {"artifacts", json::array{"data/answer.txt"}},
                     {"timeout", 60}};
      f << json::serialize(i) << '\n';
    }
  }
  json::object deployment{
      {"type", "kubernetes"},         {"image", "rex-test-bookworm:latest"},
      {"image_pull_policy", "Never"}, {"kubeconfig", admin_kubeconfig()},
      {"startup_timeout", 120},       {"labels", json::object{{"rex.test", "eval-k8s"}}}};
  const std::string deployment_file = dir.file("kubernetes.json", json::serialize(deployment));
  const std::string out = dir.path() + "/out";
  const std::string log = dir.path() + "/eval.log";
  const std::string command =
      fmt::format("'{}' eval '{}' --output '{}' --parallel 4 --deployment '{}' > '{}' 2>&1",
                  REX_CLI_PATH, instances, out, deployment_file, log);
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(status, 0) << read_text(log);
  std::printf("rex eval of 20 instances over pods, 4 at a time: %.1f s\n", seconds);

  const auto records = read_json_lines(out + "/results.jsonl");
  std::map<std::string, int> seen;
  for (const auto& r : records) {
    const std::string id(r.at("id").as_string());
    ++seen[id];
    EXPECT_EQ(r.at("status"), "passed") << json::serialize(r);
    EXPECT_EQ(r.at("output"), "from the host\n") << id;
    const int n = std::stoi(id.substr(4));
    EXPECT_EQ(read_text(out + "/artifacts/" + id + "/answer.txt"), std::to_string(n * 6) + "\n");
  }
  EXPECT_EQ(seen.size(), 20u);
  for (const auto& [id, count] : seen)
    EXPECT_EQ(count, 1) << id;
  EXPECT_EQ(remaining("eval-k8s"), 0u) << read_text(log);
}

}  // namespace
}  // namespace rex::test
