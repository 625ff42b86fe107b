// KubernetesDeployment against the local cluster (scripts/k8s.sh): pods of the bookworm test
// image with rex-server put in by the init container, reached at the pod's address and through
// the API server's pod proxy; pods that cannot start, and pods that end while in use.
#include <rex/backends/kubernetes/kubernetes_deployment.hpp>
#include <rex/core/random.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kubernetes/local_cluster.hpp"
#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
namespace json = boost::json;
namespace k8s = rex::kubernetes;

class KubernetesDeploymentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto why = no_cluster_reason(); !why.empty())
      GTEST_SKIP() << why;
    api_ = admin_api(io_.get_executor());
  }

  // The pod's object, or null when it does not exist.
  json::value get(const std::string& path) { return run_async(io_, get_async(path), 30s); }

  asio::awaitable<json::value> get_async(std::string path) {
    try {
      co_return co_await api_->call("GET", path);
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404)
        throw;
    }
    co_return nullptr;
  }

  // The pods and Secrets of one deployment id still in the cluster.
  std::size_t remaining(const std::string& deployment_id) {
    std::size_t n = 0;
    for (const char* kind : {"pods", "secrets"}) {
      const json::value list = get(fmt::format(
          "/api/v1/namespaces/default/{}?labelSelector=rex.deployment%3D{}", kind, deployment_id));
      n += list.at("items").as_array().size();
    }
    return n;
  }

  // Starts `config`, expecting a DeploymentStartupError; returns its message, having checked
  // that nothing of the deployment remains.
  std::string failed_start(const KubernetesDeploymentConfig& config) {
    KubernetesDeployment d(io_.get_executor(), config);
    std::string message;
    try {
      run_async(io_, d.start(), 120s);
      ADD_FAILURE() << "start() succeeded";
    } catch (const DeploymentStartupError& e) {
      message = e.what();
    }
    EXPECT_FALSE(d.started());
    EXPECT_EQ(remaining(d.deployment_id()), 0u) << "the failed start left its pod or Secret";
    return message;
  }

  asio::io_context io_;
  std::unique_ptr<k8s::ApiClient> api_;
};

TEST_F(KubernetesDeploymentTest, StartsAPodRunsCommandsAndDeletesItOnStop) {
  std::vector<DeploymentStage> stages;
  KubernetesDeployment d(io_.get_executor(), bookworm_pod("deployment"));
  d.add_hook([&](const DeploymentEvent& e) { stages.push_back(e.stage); });
  run_async(io_, d.start(), 120s);
  ASSERT_TRUE(d.started());
  EXPECT_EQ(d.namespace_name(), "default");
  EXPECT_FALSE(d.through_proxy()) << "this machine is the node: auto reaches the pod directly";

  run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        Runtime& rt = d.runtime();
        const CreateBashSessionRequest open;
        co_await rt.create_session(open);
        BashAction a;
        a.command = "cat /etc/debian_version >/dev/null && echo hello from $(hostname)";
        const BashObservation obs = co_await rt.run_in_session(a);
        EXPECT_EQ(obs.output, "hello from " + d.pod_name() + "\n");
        const IsAliveResponse alive = co_await d.is_alive();
        EXPECT_TRUE(alive.is_alive) << alive.message;
      }(),
      60s);

  const std::string pod_path = "/api/v1/namespaces/default/pods/" + d.pod_name();
  const json::value pod = get(pod_path);
  ASSERT_TRUE(pod.is_object());
  const auto& labels = pod.at("metadata").at("labels").as_object();
  EXPECT_EQ(labels.at("rex.managed").as_string(), "1");
  EXPECT_EQ(labels.at("rex.deployment").as_string(), d.deployment_id());
  EXPECT_EQ(labels.at("rex.test").as_string(), "deployment");
  EXPECT_TRUE(labels.contains("rex.expires"));
  EXPECT_EQ(pod.at("spec").at("activeDeadlineSeconds").as_int64(), 86400);
  const json::value secret = get("/api/v1/namespaces/default/secrets/" + d.pod_name() + "-token");
  ASSERT_TRUE(secret.is_object());
  const auto& owners = secret.at("metadata").at("ownerReferences").as_array();
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0].at("uid"), pod.at("metadata").at("uid"));

  run_async(io_, d.stop(), 60s);
  EXPECT_TRUE(get(pod_path).is_null()) << "stop() returned before the pod was gone";
  EXPECT_EQ(remaining(d.deployment_id()), 0u);
  EXPECT_THAT(stages, ::testing::IsSupersetOf({DeploymentStage::creating, DeploymentStage::waiting,
                                               DeploymentStage::ready, DeploymentStage::stopping,
                                               DeploymentStage::stopped}));
}

TEST_F(KubernetesDeploymentTest, ThroughTheApiServersPodProxyOutputStreamsAndFilesTravel) {
  auto config = bookworm_pod("deployment");
  config.connect = "proxy";
  config.env = {{"REX_K8S_TEST", "from the pod's spec"}};
  KubernetesDeployment d(io_.get_executor(), config);
  run_async(io_, d.start(), 120s);
  ASSERT_TRUE(d.through_proxy());
  EXPECT_THAT(d.url(), HasSubstr("/pods/" + d.pod_name() + ":8000/proxy"));

  const auto dir = std::filesystem::temp_directory_path() / ("rex-k8s-" + d.deployment_id());
  std::filesystem::create_directories(dir);
  run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        Runtime& rt = d.runtime();
        const CreateBashSessionRequest open;
        co_await rt.create_session(open);
        BashAction a;
        a.command = "echo \"$REX_K8S_TEST\"; for i in 1 2 3; do echo line $i; sleep 0.3; done";
        std::vector<std::string> pieces;
        const BashObservation obs = co_await rt.run_in_session_streaming(
            a, [&](std::string_view piece) { pieces.emplace_back(piece); });
        EXPECT_EQ(obs.output, "from the pod's spec\nline 1\nline 2\nline 3\n");
        EXPECT_GE(pieces.size(), 2u) << "the output arrived at once, not as it was written";

        WriteFileRequest w;
        w.path = "/tmp/through-proxy.txt";
        w.content = std::string(3 << 20, 'x') + "end";
        co_await rt.write_file(w);
        ReadFileRequest r;
        r.path = w.path;
        const ReadFileResponse read = co_await rt.read_file(r);
        EXPECT_EQ(read.content.size(), w.content.size());
        EXPECT_TRUE(read.content.ends_with("end"));

        std::ofstream(dir / "up.txt") << "uploaded";
        UploadRequest up;
        up.source_path = (dir / "up.txt").string();
        up.target_path = "/tmp/up.txt";
        co_await rt.upload(up);
        DownloadRequest down;
        down.path = "/tmp/up.txt";
        down.target_path = (dir / "down.txt").string();
        co_await rt.download(down);
      }(),
      90s);
  std::ifstream back(dir / "down.txt");
  std::string text((std::istreambuf_iterator<char>(back)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "uploaded");
  std::filesystem::remove_all(dir);
  run_async(io_, d.stop(), 60s);
  EXPECT_EQ(remaining(d.deployment_id()), 0u);
}

TEST_F(KubernetesDeploymentTest, AnImageThatIsNotThereFailsAtOnceNamingIt) {
  auto config = bookworm_pod("deployment");
  config.image = "rex.local/no-such-image:1";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string message = failed_start(config);
  EXPECT_THAT(message, HasSubstr("rex.local/no-such-image:1"));
  EXPECT_THAT(message, HasSubstr("ErrImageNeverPull"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s) << "waited for the startup timeout";
}

TEST_F(KubernetesDeploymentTest, AnUnschedulablePodFailsAtTheTimeoutWithTheSchedulersMessage) {
  auto config = bookworm_pod("deployment");
  config.node_selector = {{"rex.test/no-such-node", "true"}};
  config.startup_timeout = Seconds(4);
  const std::string message = failed_start(config);
  EXPECT_THAT(message, HasSubstr("startup_timeout 4"));
  EXPECT_THAT(message, HasSubstr("not scheduled (Unschedulable)"));
  EXPECT_THAT(message, HasSubstr("node(s) didn't match"));
}

TEST_F(KubernetesDeploymentTest, AnImageWithoutAShellFailsWithTheContainersReason) {
  auto config = bookworm_pod("deployment");
  config.image = "rex.local/pause:3.10";  // /pause and nothing else
  const std::string message = failed_start(config);
  EXPECT_THAT(message, HasSubstr("container sandbox"));
  EXPECT_THAT(message, HasSubstr("/bin/sh"));
}

TEST_F(KubernetesDeploymentTest, AFailingInitContainerFailsAtOnceWithItsExitAndLog) {
  // Arrays are replaced whole by a merge patch: this init container stands for one that cannot
  // install the server (a server image of another architecture, a read-only volume, ...).
  auto config = bookworm_pod("deployment");
  config.pod_overrides = json::parse(R"({"spec": {"initContainers": [{
      "name": "rex-server-install", "image": "rex.local/busybox:1.35",
      "imagePullPolicy": "Never",
      "command": ["sh", "-c", "echo cannot install the server here >&2; exit 3"]}]}})")
                             .as_object();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string message = failed_start(config);
  EXPECT_THAT(message, HasSubstr("init container rex-server-install terminated"));
  EXPECT_THAT(message, HasSubstr("exit code 3"));
  EXPECT_THAT(message, HasSubstr("cannot install the server here"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s) << "waited for the startup timeout";
}

TEST_F(KubernetesDeploymentTest, SettingsTheApiServerRefusesAreNamed) {
  auto config = bookworm_pod("deployment");
  config.labels = {{"rex.test", "not a valid label value!"}};
  const std::string message = failed_start(config);
  EXPECT_THAT(message, HasSubstr("cannot create"));
  EXPECT_THAT(message, HasSubstr("not a valid label value!"));
}

TEST_F(KubernetesDeploymentTest, BadSettingsAreRefusedBeforeAnythingIsCreated) {
  auto config = bookworm_pod("deployment");
  config.pod_name = "Not_A_Name";
  EXPECT_THROW(KubernetesDeployment(io_.get_executor(), config), DeploymentConfigError);
  config = bookworm_pod("deployment");
  config.connect = "sideways";
  EXPECT_THROW(KubernetesDeployment(io_.get_executor(), config), DeploymentConfigError);
  config = bookworm_pod("deployment");
  config.kubeconfig = "/nonexistent/kubeconfig";
  KubernetesDeployment d(io_.get_executor(), config);
  try {
    run_async(io_, d.start(), 30s);
    ADD_FAILURE() << "started without a kubeconfig";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/kubeconfig"));
  }
}

TEST_F(KubernetesDeploymentTest, APodDeletedWhileInUseIsReportedAsDeleted) {
  // Through the proxy: the API server answers for a deleted pod at once (at the pod's address
  // its containers may still answer until the kubelet has stopped them).
  auto config = bookworm_pod("deployment");
  config.connect = "proxy";
  KubernetesDeployment d(io_.get_executor(), config);
  run_async(io_, d.start(), 120s);
  run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        const CreateBashSessionRequest open;
        co_await d.runtime().create_session(open);
        json::object now{{"gracePeriodSeconds", 0}};
        co_await api_->call("DELETE", "/api/v1/namespaces/default/pods/" + d.pod_name(),
                            std::move(now));
        BashAction a;
        a.command = "echo still here";
        a.timeout = 10;
        try {
          co_await d.runtime().run_in_session(a);
          ADD_FAILURE() << "a command ran in a deleted pod";
        } catch (const SandboxLostError& e) {
          EXPECT_THAT(e.what(), HasSubstr(d.pod_name()));
          EXPECT_THAT(e.what(), HasSubstr("deleted"));
        }
        const IsAliveResponse alive = co_await d.is_alive();
        EXPECT_FALSE(alive.is_alive);
        EXPECT_THAT(alive.message, HasSubstr("deleted"));
      }(),
      60s);
  run_async(io_, d.stop(), 60s);
  EXPECT_EQ(remaining(d.deployment_id()), 0u);
}

TEST_F(KubernetesDeploymentTest, APodPastItsDeadlineIsReportedWithTheReason) {
  auto config = bookworm_pod("deployment");
  // The deadline counts from the pod's start on the node: long enough that start() (the
  // container, then rex-server answering) is done before it on a loaded machine.
  config.max_lifetime = Seconds(6);
  config.connect = "proxy";
  KubernetesDeployment d(io_.get_executor(), config);
  run_async(io_, d.start(), 120s);
  // Until the pod has ended: rex-server ends its sessions at its own deadline, the kubelet the
  // pod at activeDeadlineSeconds.
  const std::string pod_path = "/api/v1/namespaces/default/pods/" + d.pod_name();
  const auto until = std::chrono::steady_clock::now() + 60s;
  std::string phase;
  while (std::chrono::steady_clock::now() < until && phase != "Failed" && phase != "Succeeded") {
    std::this_thread::sleep_for(250ms);
    const json::value pod = get(pod_path);
    phase = json::value_to<std::string>(pod.at("status").at("phase"));
  }
  ASSERT_TRUE(phase == "Failed" || phase == "Succeeded") << phase;
  run_async(
      io_,
      [&]() -> asio::awaitable<void> {
        const CreateBashSessionRequest open;
        try {
          co_await d.runtime().create_session(open);
          ADD_FAILURE() << "a session opened in a pod past its deadline";
        } catch (const SandboxLostError& e) {
          EXPECT_THAT(e.what(), HasSubstr(d.pod_name()));
          EXPECT_THAT(e.what(), ::testing::AnyOf(HasSubstr("DeadlineExceeded"),
                                                 HasSubstr("container sandbox terminated")));
        }
        const IsAliveResponse alive = co_await d.is_alive();
        EXPECT_FALSE(alive.is_alive);
        EXPECT_THAT(alive.message, HasSubstr("pod "));
      }(),
      60s);
  run_async(io_, d.stop(), 60s);
  EXPECT_EQ(remaining(d.deployment_id()), 0u);
}

// examples/kubernetes/rbac.yaml is all a user needs: a service account bound to that Role alone
// runs a sandbox through the pod proxy, reads a failed container's log, and gc's its namespace.
TEST_F(KubernetesDeploymentTest, TheDocumentedRoleIsEnough) {
  const std::string ns = "rex-rbac-" + random_hex(4);
  auto kubectl = [](const std::string& args) {
    auto [status, text] =
        command_output("bash '" + std::string(REX_SOURCE_DIR) + "/scripts/k8s.sh' kubectl " + args);
    EXPECT_EQ(status, 0) << "kubectl " << args << ":\n" << text;
    return text;
  };
  struct Namespace {
    std::string name;
    ~Namespace() {
      command_output("bash '" + std::string(REX_SOURCE_DIR) + "/scripts/k8s.sh' kubectl delete " +
                     "namespace " + name + " --wait=false");
    }
  };
  kubectl("create namespace " + ns);
  const Namespace cleanup{ns};
  kubectl("-n " + ns + " create serviceaccount harness");
  kubectl("-n " + ns + " apply -f '" + std::string(REX_SOURCE_DIR) +
          "/examples/kubernetes/rbac.yaml'");
  kubectl("-n " + ns + " create rolebinding rex-sandboxes --role rex-sandboxes --serviceaccount " +
          ns + ":harness");
  const std::string token = kubectl("-n " + ns + " create token harness --duration 10m");
  ASSERT_FALSE(token.empty());
  TempDir dir;
  const std::string kubeconfig = dir.file(
      "config",
      fmt::format("current-context: c\n"
                  "clusters: [{{name: k, cluster: {{server: \"{}\", "
                  "certificate-authority: \"{}/ca.crt\"}}}}]\n"
                  "users: [{{name: u, user: {{token: \"{}\"}}}}]\n"
                  "contexts: [{{name: c, context: {{cluster: k, user: u, namespace: {}}}}}]\n",
                  api_->access().server, cluster_pki_dir(),
                  token.substr(0, token.find_last_not_of("\n") + 1), ns));
  auto config = bookworm_pod("deployment");
  config.kubeconfig = kubeconfig;
  config.connect = "proxy";
  KubernetesDeployment d(io_.get_executor(), config);
  run_async(io_, d.start(), 120s);
  EXPECT_EQ(d.namespace_name(), ns);
  Command c;
  c.command = "echo as the harness";
  c.shell = true;
  c.timeout = 20;
  EXPECT_EQ(run_async(io_, d.runtime().execute(c), 30s).stdout_, "as the harness\n");
  run_async(io_, d.stop(), 60s);

  // A container that fails: its log is read with the same rights.
  config.pod_overrides = json::parse(R"({"spec": {"containers": [{"name": "sandbox",
      "image": "rex-test-bookworm:latest", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "echo the harness may read this; exit 4"]}]}})")
                             .as_object();
  KubernetesDeployment failing(io_.get_executor(), config);
  try {
    run_async(io_, failing.start(), 120s);
    ADD_FAILURE() << "a failing container started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("exit code 4"));
    EXPECT_THAT(e.what(), HasSubstr("the harness may read this"));
  }

  ScopedEnv no_other_config("KUBECONFIG", kubeconfig);
  const auto [gc_status, gc] =
      command_output(std::string(REX_CLI_PATH) + " gc --kubernetes --namespace " + ns);
  EXPECT_EQ(gc_status, 0) << gc;
  EXPECT_THAT(gc, HasSubstr("0 removed, 0 kept, 0 errors")) << gc;
  EXPECT_EQ(kubectl("-n " + ns + " get pods,secrets -l rex.managed=1 -o name"), "");
}

// A harness killed with SIGKILL cannot delete its pod; `rex gc --kubernetes` does, and leaves
// the pods of processes that still run.
TEST_F(KubernetesDeploymentTest, GcDeletesThePodOfAKilledHarness) {
  ScopedEnv kubeconfig("KUBECONFIG", admin_kubeconfig());
  const std::string rex = REX_CLI_PATH;
  const pid_t child = spawn_process({rex, "run", "--deployment", "kubernetes", "--image",
                                     "rex-test-bookworm:latest", "--quiet", "sleep 600"});
  ASSERT_GT(child, 0);
  const std::string selector =
      "/api/v1/namespaces/default/pods?labelSelector=rex.owner.pid%3D" + std::to_string(child);
  std::string pod;
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < until && pod.empty()) {
    const json::value list = get(selector);
    for (const auto& item : list.at("items").as_array()) {
      const auto* running = item.at("status").as_object().if_contains("phase");
      if (running != nullptr && *running == "Running")
        pod = json::value_to<std::string>(item.at("metadata").at("name"));
    }
    if (pod.empty())
      std::this_thread::sleep_for(200ms);
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_FALSE(pod.empty()) << "the harness did not start its pod";

  // A live deployment of this process stays.
  KubernetesDeployment mine(io_.get_executor(), bookworm_pod("deployment"));
  run_async(io_, mine.start(), 120s);

  const auto [gc_status, text] = command_output(rex + " gc --kubernetes --namespace default");
  EXPECT_EQ(gc_status, 0) << text;
  EXPECT_THAT(text, HasSubstr("removed default/pod/" + pod + ": owner process " +
                              std::to_string(child) + " is gone"));
  EXPECT_THAT(text, HasSubstr("kept default/pod/" + mine.pod_name() + ": owner process"));
  EXPECT_TRUE(get("/api/v1/namespaces/default/pods/" + pod).is_null());
  EXPECT_TRUE(mine.started());
  run_async(io_, mine.stop(), 60s);
}

}  // namespace
}  // namespace rex::test
