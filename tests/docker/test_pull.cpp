// Image pulls for real: registry.py (a read-only Docker Registry v2 server) runs on loopback and
// serves a copy of rex-test-nopython topped by a layer of fresh random bytes, which the engine
// pulls as 127.0.0.1:PORT/NAME:latest (Docker allows 127.0.0.0/8 registries over plain HTTP).
// Each test has its own registry and image names; the images and containers it made are removed
// at the end, also when it fails.
#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/docker/engine.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "docker/docker_support.hpp"
#include "support/async_test.hpp"

extern char** environ;

namespace rex {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kBaseImage = "rex-test-nopython:latest";
constexpr std::uint64_t kPadBytes = 8u << 20;

// A registry.py child process. Its stdin is a pipe from us: when this process dies, however,
// the registry sees end of file and exits too.
class LoopbackRegistry {
 public:
  explicit LoopbackRegistry(std::vector<std::string> args) {
    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    std::vector<std::string> all = {"python3", REX_TEST_REGISTRY, "--exit-on-stdin-eof"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    ::posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    const int spawned = ::posix_spawnp(&pid_, "python3", &actions, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    if (spawned != 0) {
      pid_ = -1;
      throw std::runtime_error(std::string("cannot start python3: ") + std::strerror(spawned));
    }
    // Line 1: the port; line 2: {"manifest_digest": ..., "download_size": ...}.
    port_ = std::stoi(read_line(60s));
    const json::object info = json::parse(read_line(10s)).as_object();
    manifest_digest_ = std::string(info.at("manifest_digest").as_string());
    download_size_ = info.at("download_size").to_number<std::uint64_t>();
  }

  ~LoopbackRegistry() {
    ::close(stdin_);
    ::close(stdout_);
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  LoopbackRegistry(const LoopbackRegistry&) = delete;
  LoopbackRegistry& operator=(const LoopbackRegistry&) = delete;

  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& manifest_digest() const { return manifest_digest_; }
  std::uint64_t download_size() const { return download_size_; }

 private:
  std::string read_line(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd p{stdout_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0)
        throw std::runtime_error("registry.py did not report its port in time");
      char chunk[512];
      const ssize_t n = ::read(stdout_, chunk, sizeof chunk);
      if (n <= 0)
        throw std::runtime_error("registry.py exited before reporting its port (see stderr)");
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  int port_ = 0;
  std::string buffer_;
  std::string manifest_digest_;
  std::uint64_t download_size_ = 0;
};

// "linux/amd64" on x86_64: what the engine calls this machine.
std::string this_platform() {
  utsname u{};
  ::uname(&u);
  const std::string machine = u.machine;
  if (machine == "x86_64")
    return "linux/amd64";
  if (machine == "aarch64")
    return "linux/arm64";
  return "linux/" + machine;
}

asio::awaitable<std::string> output_of(Runtime& runtime, std::string text) {
  auto obs = co_await test::run_in_own_session(runtime, std::move(text));
  co_return obs.output;
}

// The stages of a deployment's events, runs of the same stage collapsed to one.
std::vector<std::string> stages(const std::vector<DeploymentEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    std::string stage(to_string(e.stage));
    if (out.empty() || out.back() != stage)
      out.push_back(std::move(stage));
  }
  return out;
}

std::vector<DeploymentEvent> pulling_events(const std::vector<DeploymentEvent>& events) {
  std::vector<DeploymentEvent> out;
  std::copy_if(events.begin(), events.end(), std::back_inserter(out),
               [](const DeploymentEvent& e) { return e.stage == DeploymentStage::pulling; });
  return out;
}

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = test::engine_missing(io_, engine_); !why.empty())
      FAIL() << why;
    start_registry({});
  }

  // Enough padding, served slowly enough, for the engine to report the download several times
  // (it reports at most every 100 ms).
  void start_registry(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "--image", kBaseImage, "--pad-mb", std::to_string(kPadBytes >> 20), "--delay-ms", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    registry_.reset();
    try {
      registry_.emplace(std::move(args));
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
  }

  void TearDown() override {
    std::vector<std::string> filter{label()};
    const auto leftovers = test::run_async(io_, engine_.list_containers(filter), 30s);
    for (const auto& c : leftovers)
      test::run_async(io_, engine_.remove_container(c.id), 30s);
    for (const auto& image : images_) {
      test::run_async(io_, engine_.remove_image(image, true), 30s);
      EXPECT_FALSE(test::run_async(io_, engine_.inspect_image(image), 30s)) << image;
    }
    registry_.reset();
  }

  // A name no other test or run uses, in the loopback registry; removed at the end.
  std::string image(const std::string& tag = "latest") {
    static int counter = 0;
    std::string name = registry_->host() + "/rex-pull-test-" + std::to_string(::getpid()) + "-" +
                       std::to_string(++counter) + ":" + tag;
    images_.push_back(name);
    return name;
  }

  std::string label() const { return "rex.test=pull-" + std::to_string(::getpid()); }

  DockerDeploymentConfig config_for(std::string name, PullPolicy pull) const {
    DockerDeploymentConfig c;
    c.image = std::move(name);
    c.pull = pull;
    c.startup_timeout = Seconds(60);
    c.labels = {{"rex.test", "pull-" + std::to_string(::getpid())}};
    return c;
  }

  bool present(const std::string& name) {
    return test::run_async(io_, engine_.inspect_image(name), 30s).has_value();
  }

  asio::io_context io_;
  docker::Engine engine_{io_.get_executor()};
  std::optional<LoopbackRegistry> registry_;
  std::vector<std::string> images_;
};

TEST_F(PullTest, EngineReportsGrowingProgressAndTheImageArrives) {
  const std::string name = image();
  std::vector<docker::PullProgress> seen;
  auto on_progress = [&seen](const docker::PullProgress& p) { seen.push_back(p); };
  test::run_async(io_, engine_.pull_image(name, "", on_progress), 120s);

  ASSERT_FALSE(seen.empty());
  EXPECT_THAT(seen.front().status, HasSubstr("Pulling from"));
  std::uint64_t done = 0;
  std::uint64_t most_total = 0;
  int partial = 0;  // reports of a download under way
  for (const auto& p : seen) {
    EXPECT_GE(p.bytes_done, done) << p.status << " " << p.layer;
    done = p.bytes_done;
    most_total = std::max(most_total, p.bytes_total);
    if (p.bytes_total > 0) {
      EXPECT_LE(p.bytes_done, p.bytes_total);
      EXPECT_GE(p.percent, 0.0);
      EXPECT_LE(p.percent, 100.0);
    } else {
      EXPECT_EQ(p.percent, -1);
    }
    if (p.status == "Downloading" && p.bytes_done > 0 && p.bytes_done < p.bytes_total)
      ++partial;
  }
  EXPECT_GE(partial, 3) << "the padded layer should take several reports";
  // The padding is new to the engine; the base layer may be known already (then not counted).
  EXPECT_GE(most_total, kPadBytes);
  EXPECT_LE(most_total, registry_->download_size());
  EXPECT_THAT(seen.back().status, HasSubstr("Downloaded newer image"));
  EXPECT_EQ(seen.back().bytes_done, seen.back().bytes_total);
  EXPECT_DOUBLE_EQ(seen.back().percent, 100.0);

  const auto info = test::run_async(io_, engine_.inspect_image(name), 30s);
  ASSERT_TRUE(info);
  const std::string repository = name.substr(0, name.rfind(':'));
  EXPECT_THAT(json::serialize(info->at("RepoDigests")),
              HasSubstr(repository + "@" + registry_->manifest_digest()));
}

// The registry breaks the padded layer's first download at 3 MiB; the engine waits 5 s, resumes
// with a Range request, and the progress goes on from where it was instead of jumping to 100%
// and back.
TEST_F(PullTest, BrokenDownloadIsResumedAndProgressNeverGoesBack) {
  start_registry({"--cut-once-after-mb", "3"});
  ASSERT_TRUE(registry_);
  const std::string name = image();
  std::vector<docker::PullProgress> seen;
  auto on_progress = [&seen](const docker::PullProgress& p) { seen.push_back(p); };
  test::run_async(io_, engine_.pull_image(name, "", on_progress), 120s);

  bool retried = false;
  std::uint64_t done = 0;
  for (const auto& p : seen) {
    EXPECT_GE(p.bytes_done, done) << p.status;
    done = p.bytes_done;
    if (p.status.starts_with("Retrying in")) {
      retried = true;
      EXPECT_LT(p.percent, 100.0) << "the broken download is not complete";
      EXPECT_GE(p.bytes_done, 1u << 20);
    }
  }
  EXPECT_TRUE(retried) << "the engine did not retry the broken download";
  EXPECT_DOUBLE_EQ(seen.back().percent, 100.0);
  EXPECT_TRUE(present(name));
}

TEST_F(PullTest, PlatformGoesToTheEngine) {
  const std::string name = image();
  test::run_async(io_, engine_.pull_image(name, this_platform(), {}), 120s);
  EXPECT_TRUE(present(name));
  // The engine itself refuses a platform it cannot parse: the parameter reached it.
  try {
    test::run_async(io_, engine_.pull_image(image(), "no-such-os", {}), 60s);
    ADD_FAILURE() << "pulled";
  } catch (const docker::EngineError& e) {
    EXPECT_EQ(e.status(), 400u);
    EXPECT_THAT(e.engine_message(), HasSubstr("no-such-os"));
  }
}

TEST_F(PullTest, MissingTagIsAnErrorWithTheRegistrysMessage) {
  const std::string name = image("no-such-tag");
  try {
    test::run_async(io_, engine_.pull_image(name, "", {}), 60s);
    ADD_FAILURE() << "pulled";
  } catch (const docker::EngineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("pulling image '" + name + "'"));
    // registry.py's own words, passed on by the engine.
    EXPECT_THAT(e.what(), HasSubstr("registry.py has no manifest"));
    EXPECT_THAT(e.engine_message(), HasSubstr("manifest unknown"));
    EXPECT_EQ(e.status(), 404u);
  }
  EXPECT_FALSE(present(name));

  // Through a deployment: a startup error naming the image and the policy.
  DockerDeployment d(io_.get_executor(), config_for(name, PullPolicy::missing));
  try {
    test::run_async(io_, d.start(), 60s);
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot pull image '" + name + "' (pull policy 'missing')"));
    EXPECT_THAT(e.what(), HasSubstr("registry.py has no manifest"));
  }
  EXPECT_TRUE(d.container_id().empty());
}

TEST_F(PullTest, DeploymentPullsWhenMissingAndAlwaysButNotWhenPresent) {
  const std::string name = image();
  {
    DockerDeployment d(io_.get_executor(), config_for(name, PullPolicy::missing));
    std::vector<DeploymentEvent> events;
    d.add_hook([&events](const DeploymentEvent& e) { events.push_back(e); });
    test::run_async(io_, d.start(), 120s);
    // The padded image is still busybox and bash: the server runs in it.
    EXPECT_EQ(test::run_async(io_, output_of(d.runtime(), "echo $((6*7)) $(ls /rex-pad)"), 60s),
              "42 random.bin\n");
    test::run_async(io_, d.stop(), 60s);
    EXPECT_THAT(stages(events), ::testing::ElementsAre("pulling", "creating", "starting", "waiting",
                                                       "ready", "stopping", "stopped"));
    const auto pulling = pulling_events(events);
    ASSERT_FALSE(pulling.empty());
    EXPECT_EQ(pulling.front().message, "pulling " + name);
    EXPECT_EQ(pulling.front().percent, -1);
    int partial = 0;
    std::uint64_t done = 0;
    for (const auto& e : pulling) {
      EXPECT_GE(e.bytes_done, done);
      done = e.bytes_done;
      if (e.bytes_total > 0 && e.bytes_done > 0 && e.bytes_done < e.bytes_total) {
        ++partial;
        EXPECT_GT(e.percent, 0.0);
        EXPECT_LT(e.percent, 100.0);
        EXPECT_THAT(e.message, HasSubstr("pulling " + name + ": "));
        EXPECT_THAT(e.message, HasSubstr("%"));
      }
    }
    EXPECT_GE(partial, 3);
    EXPECT_GE(pulling.back().bytes_total, kPadBytes);
    EXPECT_EQ(pulling.back().bytes_done, pulling.back().bytes_total);
    EXPECT_DOUBLE_EQ(pulling.back().percent, 100.0);
  }
  ASSERT_TRUE(present(name));
  {
    // Present: nothing to pull.
    DockerDeployment d(io_.get_executor(), config_for(name, PullPolicy::missing));
    std::vector<DeploymentEvent> events;
    d.add_hook([&events](const DeploymentEvent& e) { events.push_back(e); });
    test::run_async(io_, d.start(), 120s);
    test::run_async(io_, d.stop(), 60s);
    EXPECT_THAT(stages(events), ::testing::ElementsAre("creating", "starting", "waiting", "ready",
                                                       "stopping", "stopped"));
  }
  {
    // Always: asks the registry again, which has nothing newer.
    DockerDeployment d(io_.get_executor(), config_for(name, PullPolicy::always));
    std::vector<DeploymentEvent> events;
    d.add_hook([&events](const DeploymentEvent& e) { events.push_back(e); });
    test::run_async(io_, d.start(), 120s);
    EXPECT_EQ(test::run_async(io_, output_of(d.runtime(), "echo again"), 60s), "again\n");
    test::run_async(io_, d.stop(), 60s);
    EXPECT_THAT(stages(events), ::testing::ElementsAre("pulling", "creating", "starting", "waiting",
                                                       "ready", "stopping", "stopped"));
    const auto pulling = pulling_events(events);
    EXPECT_THAT(pulling.back().message, HasSubstr("Image is up to date"));
  }
}

TEST_F(PullTest, PullNeverDoesNotPullAnAbsentImage) {
  const std::string name = image();
  DockerDeployment d(io_.get_executor(), config_for(name, PullPolicy::never));
  std::vector<DeploymentEvent> events;
  d.add_hook([&events](const DeploymentEvent& e) { events.push_back(e); });
  try {
    test::run_async(io_, d.start(), 60s);
    ADD_FAILURE() << "started";
  } catch (const DeploymentStartupError& e) {
    EXPECT_THAT(e.what(), HasSubstr("image '" + name + "' is not present"));
    EXPECT_THAT(e.what(), HasSubstr("pull is 'never'"));
  }
  EXPECT_TRUE(pulling_events(events).empty());
  EXPECT_TRUE(d.container_id().empty());
  EXPECT_FALSE(present(name));
}

TEST_F(PullTest, RemoveImagesRemovesThePulledImageAfterStop) {
  const std::string name = image();
  auto c = config_for(name, PullPolicy::missing);
  c.remove_images = true;
  DockerDeployment d(io_.get_executor(), c);
  test::run_async(io_, d.start(), 120s);
  EXPECT_TRUE(present(name));
  EXPECT_EQ(test::run_async(io_, output_of(d.runtime(), "echo pulled"), 60s), "pulled\n");
  test::run_async(io_, d.stop(), 60s);
  EXPECT_FALSE(present(name));
}

}  // namespace
}  // namespace rex
