// DockerDeployment against the real engine of this machine, with the locally built test images
// (scripts/common.sh's rex_docker_setup): the server injected into images with and without
// Python, both networking modes, both ways of getting the server in, limits, failures that
// explain themselves, teardown, and `rex gc` after a harness is killed.
#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/backends/docker/docker_gc.hpp>
#include <rex/docker/engine.hpp>
#include <rex/protocol/exceptions.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/docker/docker_plan.hpp"
#include "deployment/local_addresses.hpp"
#include "docker/docker_support.hpp"
#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

extern char** environ;

namespace rex {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kBookworm = "rex-test-bookworm:latest";
constexpr const char* kNoPython = "rex-test-nopython:latest";

DockerDeploymentConfig config_for(std::string image) {
  DockerDeploymentConfig c;
  c.image = std::move(image);
  c.pull = PullPolicy::never;
  c.startup_timeout = Seconds(60);
  c.labels = {{"rex.test", "deployment"}};
  return c;
}

asio::awaitable<BashObservation> run_one(Runtime& runtime, std::string text) {
  return test::run_in_own_session(runtime, std::move(text));
}

class DockerDeploymentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = test::engine_missing(io_, engine_); !why.empty())
      FAIL() << why;
  }

  // Whether a container exists (in any state).
  bool exists(const std::string& id) {
    auto info = test::run_async(io_, probe(engine_, id), 30s);
    return info;
  }

  static asio::awaitable<bool> probe(docker::Engine& engine, std::string id) {
    try {
      co_await engine.inspect_container(std::move(id));
      co_return true;
    } catch (const docker::EngineError& e) {
      if (e.status() == 404)
        co_return false;
      throw;
    }
  }

  std::string run(DockerDeployment& d, std::string text) {
    return test::run_async(io_, run_one(d.runtime(), std::move(text)), 60s).output;
  }

  asio::io_context io_;
  docker::Engine engine_{io_.get_executor()};
};

TEST_F(DockerDeploymentTest, RunsCommandsReportsStagesAndRemovesTheContainer) {
  DockerDeployment d(io_.get_executor(), config_for(kBookworm));
  std::vector<std::string> stages;
  d.add_hook([&](const DeploymentEvent& e) { stages.emplace_back(to_string(e.stage)); });
  test::run_async(io_, d.start(), 90s);
  EXPECT_THAT(d.url(), StartsWith("http://"));
  EXPECT_EQ(run(d, "echo hello from $(cat /etc/debian_version | cut -c1-2)"), "hello from 12\n");
  EXPECT_EQ(run(d, "python3 -c 'print(6*7)'"), "42\n");
  const std::string id = d.container_id();
  ASSERT_TRUE(exists(id));
  test::run_async(io_, d.stop(), 60s);
  EXPECT_FALSE(exists(id));
  EXPECT_THAT(stages, ::testing::ElementsAre("creating", "starting", "waiting", "ready", "stopping",
                                             "stopped"));
  EXPECT_THROW(d.runtime(), DeploymentNotStartedError);
}

TEST_F(DockerDeploymentTest, AnImageWithoutPythonWorks) {
  DockerDeployment d(io_.get_executor(), config_for(kNoPython));
  test::run_async(io_, d.start(), 90s);
  EXPECT_EQ(run(d, "command -v python3 python || echo no python"), "no python\n");
  EXPECT_EQ(run(d, "x=$((6*7)); echo $x; cd /tmp && pwd"), "42\n/tmp\n");
  test::run_async(io_, d.stop(), 60s);
}

// Whether the containers of the engine's default bridge network are reachable at their own
// addresses, by the rule of docker_plan.hpp's network_ranges(): its gateway is an address of this
// machine, or, when the engine names no gateway (as Docker's bridge does just after some daemon
// starts), an address of this machine lies in its subnet. The parts are unit-tested
// (test_docker_plan, test_local_addresses); this asks the engine itself.
bool bridge_is_routable(asio::io_context& io, docker::Engine& engine) {
  auto info = test::run_async(io, engine.inspect_network("bridge"), 30s);
  if (!info)
    return false;
  for (const auto& range : detail::network_ranges(*info)) {
    if (range.gateway.empty() ? detail::has_local_address_in(range.subnet)
                              : detail::is_local_address(range.gateway))
      return true;
  }
  return false;
}

TEST_F(DockerDeploymentTest, ReachesTheServerAtTheContainersAddressWhenThisMachineRoutesThere) {
  DockerDeployment d(io_.get_executor(), config_for(kNoPython));
  test::run_async(io_, d.start(), 90s);
  const bool routable = bridge_is_routable(io_, engine_);
  auto info = test::run_async(io_, engine_.inspect_container(d.container_id()), 30s);
  const json::value* bindings = info.at("HostConfig").as_object().if_contains("PortBindings");
  const bool published = bindings && bindings->is_object() && !bindings->as_object().empty();
  if (routable) {
    const std::string address(
        info.at("NetworkSettings").at("Networks").at("bridge").at("IPAddress").as_string());
    EXPECT_EQ(d.url(), "http://" + address + ":8000");
    EXPECT_FALSE(published);
  } else {
    EXPECT_THAT(d.url(), StartsWith("http://127.0.0.1:"));
    EXPECT_TRUE(published);
  }
  EXPECT_EQ(run(d, "echo reached"), "reached\n");
  test::run_async(io_, d.stop(), 60s);
}

TEST_F(DockerDeploymentTest, PublishesThePortWhenAsked) {
  auto c = config_for(kNoPython);
  c.connect = "port";
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(io_, d.start(), 90s);
  EXPECT_THAT(d.url(), StartsWith("http://127.0.0.1:"));
  auto info = test::run_async(io_, engine_.inspect_container(d.container_id()), 30s);
  EXPECT_THAT(json::serialize(info.at("HostConfig").at("PortBindings")), HasSubstr("127.0.0.1"));
  EXPECT_EQ(run(d, "echo published"), "published\n");
  test::run_async(io_, d.stop(), 60s);
}

TEST_F(DockerDeploymentTest, NetworkLessModeUsesAUnixSocket) {
  auto c = config_for(kNoPython);
  c.network_mode = "none";
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(io_, d.start(), 90s);
  EXPECT_THAT(d.url(), StartsWith("http+unix://"));
  // Only the loopback interface exists inside.
  EXPECT_EQ(run(d, "ls /sys/class/net"), "lo\n");
  const std::string socket_dir = d.url().substr(std::string("http+unix://").size());
  test::run_async(io_, d.stop(), 60s);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(socket_dir).parent_path()));
}

TEST_F(DockerDeploymentTest, UploadedServerWorksLikeAMountedOne) {
  auto c = config_for(kNoPython);
  c.server_transfer = "upload";
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(io_, d.start(), 90s);
  auto info = test::run_async(io_, engine_.inspect_container(d.container_id()), 30s);
  EXPECT_THAT(json::serialize(info.at("HostConfig").at("Binds")),
              ::testing::Not(HasSubstr("rex-server")));
  EXPECT_EQ(run(d, "echo uploaded"), "uploaded\n");
  test::run_async(io_, d.stop(), 60s);
}

TEST_F(DockerDeploymentTest, LimitsEnvironmentMountsAndLabelsApply) {
  test::TempDir shared;
  std::ofstream(shared.path() + "/note.txt") << "from the host";
  auto c = config_for(kBookworm);
  c.memory = "256m";
  c.pids_limit = 321;
  c.cpus = 0.5;
  c.env = {{"REX_FROM_CONFIG", "yes"}};
  c.docker_args = {"-e", "REX_FROM_ARGS=also", "--shm-size", "32m"};
  c.mounts = {shared.path() + ":/shared:ro"};
  c.working_dir = "/shared";
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(io_, d.start(), 90s);
  // cgroup v2 or v1, whichever the machine has.
  EXPECT_EQ(run(d,
                "cd /sys/fs/cgroup; cat memory.max 2>/dev/null || "
                "cat memory/memory.limit_in_bytes"),
            "268435456\n");
  EXPECT_EQ(run(d, "cd /sys/fs/cgroup; cat pids.max 2>/dev/null || cat pids/pids.max"), "321\n");
  EXPECT_EQ(run(d,
                "cd /sys/fs/cgroup; cat cpu.max 2>/dev/null || "
                "echo $(cat cpu/cpu.cfs_quota_us) $(cat cpu/cpu.cfs_period_us)"),
            "50000 100000\n");
  EXPECT_EQ(run(d, "echo $REX_FROM_CONFIG $REX_FROM_ARGS"), "yes also\n");
  EXPECT_EQ(run(d, "pwd; cat note.txt; echo; touch x 2>/dev/null || echo read-only"),
            "/shared\nfrom the host\nread-only\n");
  EXPECT_EQ(run(d, "df -m /dev/shm | tail -1 | awk '{print $2}'"), "32\n");
  // The token does not leak into the sessions' environment, nor stays in the environment the
  // container's first process (rex-server, its init) was started with.
  EXPECT_EQ(run(d, "echo ${REX_AUTH_TOKEN:-unset}"), "unset\n");
  EXPECT_EQ(run(d, "tr '\\0' '\\n' </proc/1/environ | grep -c '^REX_AUTH_TOKEN=' || true"), "0\n");
  EXPECT_EQ(run(d, "tr '\\0' ' ' </proc/1/cmdline | cut -d' ' -f1 | xargs basename"),
            "rex-server\n");
  auto info = test::run_async(io_, engine_.inspect_container(d.container_id()), 30s);
  const auto& labels = info.at("Config").at("Labels").as_object();
  EXPECT_EQ(labels.at("rex.test").as_string(), "deployment");
  EXPECT_EQ(labels.at("rex.managed").as_string(), "1");
  EXPECT_EQ(labels.at("rex.deployment").as_string(), d.deployment_id());
  EXPECT_EQ(labels.at("rex.owner.pid").as_string(), std::to_string(::getpid()));
  test::run_async(io_, d.stop(), 60s);
}

// What the hardened profile promises, seen from inside the container.
constexpr const char* kHardenedProbe =
    "grep NoNewPrivs /proc/self/status | tr -d '\\t'; "
    "grep CapEff /proc/self/status | tr -d '\\t'; "
    "touch /etc/rex-probe 2>/dev/null && echo root writable || echo root read-only; "
    "touch /tmp/x /var/tmp/x && echo tmp writable; "
    "pwd; touch here && echo work writable; ls /sys/class/net; "
    "cd /sys/fs/cgroup; cat pids.max 2>/dev/null || cat pids/pids.max";

// CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID: bits 0 1 3 4 5 6 7.
constexpr const char* kHardenedExpected =
    "NoNewPrivs:1\nCapEff:00000000000000fb\nroot read-only\ntmp writable\n/work\n"
    "work writable\nlo\n1024\n";

TEST_F(DockerDeploymentTest, HardenedProfileHoldsInsideTheContainer) {
  auto c = config_for(kBookworm);
  c.security_profile = "hardened";
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(io_, d.start(), 90s);
  EXPECT_THAT(d.url(), StartsWith("http+unix://"));
  EXPECT_EQ(run(d, kHardenedProbe), kHardenedExpected);
  // Privileges cannot come back through a setuid program, and root cannot mount.
  EXPECT_EQ(run(d, "mount -t tmpfs x /mnt 2>/dev/null && echo mounted || echo refused"),
            "refused\n");
  EXPECT_EQ(run(d,
                "cd /sys/fs/cgroup; cat memory.max 2>/dev/null || "
                "cat memory/memory.limit_in_bytes"),
            "4294967296\n");
  test::run_async(io_, d.stop(), 60s);
}

TEST_F(DockerDeploymentTest, HardenedWorkDirStartsAsACopyOfTheImage) {
  auto c = config_for(kBookworm);
  c.security_profile = "hardened";
  c.working_dir = "/etc/apt";  // a directory the image fills
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(io_, d.start(), 90s);
  EXPECT_EQ(run(d, "test -d sources.list.d && echo image content; echo x > new && cat new"),
            "image content\nx\n");
  test::run_async(io_, d.stop(), 60s);
}

TEST_F(DockerDeploymentTest, MissingImageWithPullNeverSaysHowToFixIt) {
  auto c = config_for("rex-test-does-not-exist:1");
  DockerDeployment d(io_.get_executor(), c);
  try {
    test::run_async(io_, d.start(), 60s);
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rex-test-does-not-exist:1"));
    EXPECT_THAT(e.what(), HasSubstr("pull is 'never'"));
  }
  EXPECT_TRUE(d.container_id().empty());
}

TEST_F(DockerDeploymentTest, RefusedPullNamesTheImage) {
  auto c = config_for("rex-test-does-not-exist:1");
  c.pull = PullPolicy::missing;
  DockerDeployment d(io_.get_executor(), c);
  std::vector<std::string> stages;
  d.add_hook([&](const DeploymentEvent& e) { stages.emplace_back(to_string(e.stage)); });
  try {
    test::run_async(io_, d.start(), 90s);
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot pull image 'rex-test-does-not-exist:1'"));
  }
  ASSERT_FALSE(stages.empty());
  EXPECT_EQ(stages.front(), "pulling");
}

TEST_F(DockerDeploymentTest, ServerThatNeverAnswersTimesOutWithTheLogTail) {
  auto c = config_for(kNoPython);
  c.startup_timeout = Seconds(2);
  c.create_options =
      json::parse(R"({"Entrypoint":["/bin/sh","-c","echo no server here; sleep 60"],"Cmd":null})")
          .as_object();
  DockerDeployment d(io_.get_executor(), c);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    test::run_async(io_, d.start(), 60s);
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("did not answer within startup_timeout 2 s"));
    EXPECT_THAT(e.what(), HasSubstr("no server here"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

TEST_F(DockerDeploymentTest, ContainerThatExitsIsReportedWithItsCodeAndLogs) {
  auto c = config_for(kNoPython);
  c.create_options =
      json::parse(R"({"Entrypoint":["/bin/sh","-c","echo boom >&2; exit 3"],"Cmd":null})")
          .as_object();
  DockerDeployment d(io_.get_executor(), c);
  try {
    test::run_async(io_, d.start(), 60s);
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("exited with code 3"));
    EXPECT_THAT(e.what(), HasSubstr("boom"));
  }
}

// A container killed under a deployment in use: the next call says so, with the engine's
// account of it (its exit code), and is_alive() too; stop() then removes what is left.
TEST_F(DockerDeploymentTest, AContainerKilledInUseIsReportedLost) {
  DockerDeployment d(io_.get_executor(), config_for(kNoPython));
  test::run_async(io_, d.start(), 90s);
  EXPECT_EQ(run(d, "echo up"), "up\n");
  const std::string id = d.container_id();
  test::run_async(io_, engine_.kill_container(id), 30s);
  try {
    run(d, "echo still here");
    ADD_FAILURE() << "a command ran in a killed container";
  } catch (const SandboxLostError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the sandbox is gone: container " + id));
    EXPECT_THAT(e.what(), HasSubstr("exited with code 137"));
  }
  const IsAliveResponse alive = test::run_async(io_, d.is_alive(), 30s);
  EXPECT_FALSE(alive.is_alive);
  EXPECT_THAT(alive.message, HasSubstr("exited with code 137"));
  test::run_async(io_, d.stop(), 60s);
  EXPECT_FALSE(exists(id));
}

TEST_F(DockerDeploymentTest, KeepLeavesTheContainerAndDestroyingRemovesIt) {
  auto c = config_for(kNoPython);
  c.remove_container = false;
  std::string kept;
  {
    DockerDeployment d(io_.get_executor(), c);
    test::run_async(io_, d.start(), 90s);
    kept = d.container_id();
    test::run_async(io_, d.stop(), 60s);
  }
  EXPECT_TRUE(exists(kept));
  test::run_async(io_, engine_.remove_container(kept), 30s);

  std::string dropped;
  {
    DockerDeployment d(io_.get_executor(), config_for(kNoPython));
    test::run_async(io_, d.start(), 90s);
    dropped = d.container_id();
  }  // destroyed while running: removal starts in the background
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (exists(dropped) && std::chrono::steady_clock::now() < until) {
    io_.restart();
    io_.run_for(100ms);
  }
  EXPECT_FALSE(exists(dropped));
}

TEST_F(DockerDeploymentTest, MadeFromJsonThroughMakeDeployment) {
  auto config = deployment_config_from_json(json::parse(
      R"({"type":"docker","image":"rex-test-nopython:latest","pull":"never",
          "docker_args":["--memory=128m","-e","FROM_JSON=1"],"labels":{"rex.test":"json"}})"));
  auto d = make_deployment(io_.get_executor(), config);
  test::run_async(io_, d->start(), 90s);
  EXPECT_EQ(test::run_async(io_, run_one(d->runtime(), "echo $FROM_JSON"), 60s).output, "1\n");
  EXPECT_TRUE(test::run_async(io_, d->is_alive(), 30s).is_alive);
  test::run_async(io_, d->stop(), 60s);
}

// A harness killed with SIGKILL cannot remove its containers; `rex gc` does.
TEST_F(DockerDeploymentTest, GcRemovesTheContainersOfAKilledHarness) {
  const std::string rex = REX_CLI_PATH;
  const pid_t child = test::spawn_process(
      {rex, "run", "--deployment", "docker", "--image", kNoPython, "--pull", "never", "sleep 600"});
  ASSERT_GT(child, 0);
  // Wait for its container to run.
  std::vector<std::string> filter{"rex.owner.pid=" + std::to_string(child)};
  std::vector<docker::ContainerSummary> found;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    found = test::run_async(io_, engine_.list_containers(filter, true), 30s);
    if (!found.empty() && found.front().state == "running")
      break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(found.empty()) << "the harness did not start its container";
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);

  auto report = test::run_async(io_, collect_garbage(engine_, GcOptions{}), 60s);
  bool reported = false;
  for (const auto& r : report.removed) {
    if (r.id == found.front().id) {
      reported = true;
      EXPECT_THAT(r.reason, HasSubstr("is gone"));
    }
  }
  EXPECT_TRUE(reported);
  EXPECT_TRUE(report.errors.empty());
  EXPECT_TRUE(test::run_async(io_, engine_.list_containers(filter, true), 30s).empty());
}

}  // namespace
}  // namespace rex

namespace rex {
namespace {

// The same deployment through Podman's Docker-compatible API (rex_docker_setup starts it).
TEST(PodmanDeployment, RunsCommandsInBothNetworkModes) {
  asio::io_context io;
  for (const char* mode : {"", "none"}) {
    auto c = config_for(kNoPython);
    c.container_runtime = "podman";
    c.network_mode = mode;
    c.labels = {{"rex.test", "podman"}};
    DockerDeployment d(io.get_executor(), c);
    test::run_async(io, d.start(), 120s);
    EXPECT_EQ(test::run_async(io, run_one(d.runtime(), "echo podman $((1+1))"), 60s).output,
              "podman 2\n");
    const std::string id = d.container_id();
    test::run_async(io, d.stop(), 60s);
    // Removed from Podman's store too.
    docker::Engine podman(io.get_executor(), docker::engine_config_from_environment("podman"));
    std::vector<std::string> filter{"rex.deployment=" + d.deployment_id()};
    EXPECT_TRUE(test::run_async(io, podman.list_containers(filter, true), 30s).empty()) << mode;
  }
}

TEST(PodmanDeployment, HardenedProfileHolds) {
  asio::io_context io;
  auto c = config_for(kBookworm);
  c.container_runtime = "podman";
  c.security_profile = "hardened";
  c.labels = {{"rex.test", "podman"}};
  DockerDeployment d(io.get_executor(), c);
  test::run_async(io, d.start(), 120s);
  EXPECT_EQ(test::run_async(io, run_one(d.runtime(), kHardenedProbe), 60s).output,
            kHardenedExpected);
  test::run_async(io, d.stop(), 60s);
}

}  // namespace
}  // namespace rex
