// rex::docker::Engine against the real Docker engine of this machine (scripts/common.sh's
// rex_docker_setup starts it and builds the rex-test-* images), or against Podman's compatible
// API when REX_TEST_CONTAINER_RUNTIME=podman. Every container a test makes carries this run's
// label and is removed at the end, also when the test fails.
#include <rex/docker/engine.hpp>
#include <rex/runtime/archive.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex::docker {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using ::testing::ContainsRegex;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr const char* kNoPython = "rex-test-nopython:latest";
constexpr const char* kLabel = "rex.test";

std::string runtime_under_test() {
  const char* runtime = std::getenv("REX_TEST_CONTAINER_RUNTIME");
  return runtime == nullptr || *runtime == '\0' ? "docker" : runtime;
}

std::string unique_id() {
  std::random_device rd;
  return fmt::format("{}-{:08x}", ::getpid(), rd());
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = unique_id();
    try {
      test::run_async(io_, engine_.version(), 20s);
    } catch (const EngineError& e) {
      FAIL() << "no container engine for the docker tests (scripts/common.sh's rex_docker_setup "
                "starts one): "
             << e.what();
    }
  }

  void TearDown() override {
    std::vector<std::string> filter{label_filter()};
    const auto leftovers = test::run_async(io_, engine_.list_containers(filter), 30s);
    for (const auto& c : leftovers)
      test::run_async(io_, engine_.remove_container(c.id), 30s);
  }

  std::string label_filter() const { return std::string(kLabel) + "=" + run_; }

  // A container config for the no-Python image running `script` under sh, labelled for this run.
  json::object container(const std::string& script, json::object extra_labels = {}) const {
    json::object labels = std::move(extra_labels);
    labels[kLabel] = run_;
    json::object body;
    body["Image"] = kNoPython;
    body["Cmd"] = json::array{"sh", "-c", script.c_str()};
    body["Labels"] = std::move(labels);
    // Podman's default limits cannot be applied in every sandbox; Docker takes them as well.
    json::object host_config;
    host_config["Ulimits"] =
        json::array{json::object{{"Name", "nofile"}, {"Soft", 20000}, {"Hard", 20000}},
                    json::object{{"Name", "nproc"}, {"Soft", 4096}, {"Hard", 4096}}};
    body["HostConfig"] = std::move(host_config);
    return body;
  }

  std::string create(json::object body, std::string name = {}) {
    return test::run_async(io_, engine_.create_container(std::move(body), std::move(name)), 30s);
  }

  std::string create_and_start(const std::string& script) {
    const std::string id = create(container(script));
    test::run_async(io_, engine_.start_container(id), 30s);
    return id;
  }

  std::int64_t wait(const std::string& id) {
    return test::run_async(io_, engine_.wait_container(id), 60s);
  }

  std::string logs(const std::string& id, int tail = 100) {
    return test::run_async(io_, engine_.container_logs(id, tail), 30s);
  }

  asio::io_context io_;
  const bool podman_ = runtime_under_test() == "podman";
  Engine engine_{io_.get_executor(), engine_config_from_environment(runtime_under_test())};
  std::string run_;
};

TEST_F(EngineTest, Version) {
  const json::object v = test::run_async(io_, engine_.version(), 20s);
  ASSERT_TRUE(v.contains("ApiVersion"));
  EXPECT_FALSE(v.at("ApiVersion").as_string().empty());
  if (engine_.config().host.empty()) {
    EXPECT_TRUE(engine_.is_local());
    EXPECT_EQ(engine_.endpoint(), "unix:///var/run/docker.sock");
  }
}

TEST_F(EngineTest, InspectImagePresentAndAbsent) {
  const auto present = test::run_async(io_, engine_.inspect_image(kNoPython), 20s);
  ASSERT_TRUE(present.has_value());
  EXPECT_TRUE(present->contains("Id"));
  EXPECT_FALSE(present->at("Config").at("Labels").at("rex.recipe").as_string().empty());
  const auto absent =
      test::run_async(io_, engine_.inspect_image("rex-no-such-image-" + run_ + ":never"), 20s);
  EXPECT_FALSE(absent.has_value());
}

TEST_F(EngineTest, PullOfAnImageThatCannotBeHadFailsClearly) {
  const std::string image = "rex-no-such-image-" + run_ + ":latest";
  std::vector<PullProgress> progress;
  std::function<void(const PullProgress&)> on_progress = [&](const PullProgress& p) {
    progress.push_back(p);
  };
  try {
    test::run_async(io_, engine_.pull_image(image, "", on_progress), 120s);
    ADD_FAILURE() << "the pull succeeded";
  } catch (const EngineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("pulling image '" + image + "' failed"));
    EXPECT_THAT(e.what(), HasSubstr("registry"));
    EXPECT_FALSE(e.engine_message().empty());
    EXPECT_NE(e.status(), 0u) << "the engine answered";
  }
}

TEST_F(EngineTest, CreateStartWaitLogs) {
  const std::string name = "rex-test-" + run_;
  const std::string id = create(container("echo out; echo err >&2; exit 3"), name);
  EXPECT_EQ(id.size(), 64u);
  test::run_async(io_, engine_.start_container(id), 30s);
  EXPECT_EQ(wait(id), 3);
  // Both streams, decoded. The engine copies stdout and stderr separately, so lines written
  // within a few milliseconds of each other may swap.
  const std::string both = logs(id);
  EXPECT_TRUE(both == "out\nerr\n" || both == "err\nout\n") << both;
  EXPECT_EQ(logs(id, 1), both.substr(4));
  const json::object info = test::run_async(io_, engine_.inspect_container(name), 20s);
  EXPECT_EQ(info.at("Id").as_string(), id);
  EXPECT_EQ(info.at("State").at("ExitCode").to_number<int>(), 3);
  EXPECT_EQ(info.at("Config").at("Labels").at(kLabel).as_string(), run_);
  // Waiting again on a stopped container answers at once.
  EXPECT_EQ(wait(id), 3);
}

TEST_F(EngineTest, LogsInterleaveTheStreamsInTheOrderWritten) {
  const std::string id =
      create_and_start("echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three");
  EXPECT_EQ(wait(id), 0);
  EXPECT_EQ(logs(id), "one\ntwo\nthree\n");
  EXPECT_EQ(logs(id, 2), "two\nthree\n");
  EXPECT_EQ(logs(id, 0), "");
}

TEST_F(EngineTest, TtyContainerLogsAreKeptRaw) {
  json::object body = container("echo hi; echo there >&2");
  body["Tty"] = true;
  const std::string id = create(std::move(body));
  test::run_async(io_, engine_.start_container(id), 30s);
  EXPECT_EQ(wait(id), 0);
  // The terminal's bytes, not multiplexed frames: "\r\n" line ends, no 8-byte headers.
  EXPECT_EQ(logs(id), "hi\r\nthere\r\n");
  EXPECT_EQ(logs(id, -1), "hi\r\nthere\r\n");
  EXPECT_EQ(logs(id, 1), "there\r\n");
}

// A line written in two pieces, the second after a pause: the engine's monitor may store it as
// two records (Podman's conmon does, as "partial" then "full"), and a tail must still give the
// line whole. (Podman 4's own tail=N drops such a first piece; the client cuts the tail itself.)
TEST_F(EngineTest, LogLinesWrittenInPiecesStayWhole) {
  for (const bool tty : {true, false}) {
    SCOPED_TRACE(tty ? "tty" : "no tty");
    json::object body = container("printf he; sleep 0.3; echo llo; printf x; sleep 0.3; echo y");
    body["Tty"] = tty;
    const std::string id = create(std::move(body));
    test::run_async(io_, engine_.start_container(id), 30s);
    EXPECT_EQ(wait(id), 0);
    const std::string eol = tty ? "\r\n" : "\n";
    EXPECT_EQ(logs(id), "hello" + eol + "xy" + eol);
    EXPECT_EQ(logs(id, -1), "hello" + eol + "xy" + eol);
    EXPECT_EQ(logs(id, 1), "xy" + eol);
    EXPECT_EQ(logs(id, 2), "hello" + eol + "xy" + eol);
  }
}

TEST_F(EngineTest, StartingARunningContainerIsFine) {
  const std::string id = create_and_start("sleep 600");
  test::run_async(io_, engine_.start_container(id), 30s);
  const json::object info = test::run_async(io_, engine_.inspect_container(id), 20s);
  EXPECT_TRUE(info.at("State").at("Running").as_bool());
}

TEST_F(EngineTest, KillThenRemoveTwice) {
  const std::string id = create_and_start("sleep 600");
  test::run_async(io_, engine_.kill_container(id), 30s);
  EXPECT_EQ(wait(id), 128 + 9);
  test::run_async(io_, engine_.kill_container(id), 30s);  // not running: no error
  test::run_async(io_, engine_.remove_container(id), 30s);
  test::run_async(io_, engine_.remove_container(id), 30s);  // gone: no error
  test::run_async(io_, engine_.kill_container(id), 30s);    // gone: no error
  try {
    test::run_async(io_, engine_.inspect_container(id), 20s);
    ADD_FAILURE() << "the container is still there";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.status(), 404u);
    EXPECT_THAT(e.what(), HasSubstr("inspecting container '" + id + "' failed"));
    EXPECT_THAT(e.engine_message(), ContainsRegex("[Nn]o such container"));
  }
}

asio::awaitable<void> kill_after(Engine& engine, std::string id, std::chrono::milliseconds delay) {
  asio::steady_timer pause(co_await asio::this_coro::executor, delay);
  co_await pause.async_wait(asio::use_awaitable);
  co_await engine.kill_container(std::move(id), "TERM");
}

asio::awaitable<std::int64_t> wait_while_killing(Engine& engine, std::string id) {
  auto waiting = engine.wait_container(id);
  auto killing = kill_after(engine, id, 300ms);
  const std::int64_t code = co_await (std::move(waiting) && std::move(killing));
  co_return code;
}

TEST_F(EngineTest, WaitBlocksOnItsOwnConnectionWhileOtherCallsProceed) {
  const std::string id = create_and_start("trap 'exit 7' TERM; while true; do sleep 0.1; done");
  const auto start = Clock::now();
  EXPECT_EQ(test::run_async(io_, wait_while_killing(engine_, id), 60s), 7);
  EXPECT_GE(Clock::now() - start, 300ms);
}

asio::awaitable<bool> wait_or_give_up(Engine& engine, std::string id) {
  asio::steady_timer give_up(co_await asio::this_coro::executor, 300ms);
  auto waiting = engine.wait_container(std::move(id));
  auto timer = give_up.async_wait(asio::use_awaitable);
  const auto which = co_await (std::move(waiting) || std::move(timer));
  co_return which.index() == 1;
}

TEST_F(EngineTest, WaitIsCancelledByItsCaller) {
  const std::string id = create_and_start("sleep 600");
  EXPECT_TRUE(test::run_async(io_, wait_or_give_up(engine_, id), 30s));
  // The engine is still usable, and the container still runs.
  const json::object info = test::run_async(io_, engine_.inspect_container(id), 20s);
  EXPECT_TRUE(info.at("State").at("Running").as_bool());
}

TEST_F(EngineTest, ListContainersByLabel) {
  json::object role;
  role["rex.role"] = "a";
  const std::string a = create(container("true", role));
  const std::string b = create(container("true"));
  std::vector<std::string> by_run{label_filter()};
  auto listed = test::run_async(io_, engine_.list_containers(by_run), 20s);
  ASSERT_EQ(listed.size(), 2u);
  std::set<std::string> ids{listed[0].id, listed[1].id};
  EXPECT_EQ(ids, (std::set<std::string>{a, b}));
  for (const auto& c : listed) {
    EXPECT_THAT(c.image, EndsWith(kNoPython));  // Podman: localhost/rex-test-nopython:latest
    EXPECT_EQ(c.state, "created");
    EXPECT_EQ(c.labels.at(kLabel), run_);
    EXPECT_EQ(c.names.size(), 1u);
    EXPECT_GT(c.created, 1600000000);
  }
  std::vector<std::string> both{label_filter(), "rex.role=a"};
  listed = test::run_async(io_, engine_.list_containers(both), 20s);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, a);
  EXPECT_EQ(listed[0].labels.at("rex.role"), "a");
  // Only running ones: none.
  EXPECT_TRUE(test::run_async(io_, engine_.list_containers(by_run, false), 20s).empty());
}

TEST_F(EngineTest, PutArchiveThenReadItBack) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() + "/tree/sub");
  dir.file("tree/hello.txt", "hello from the archive\n");
  dir.file("tree/sub/more.txt", "more\n");
  const std::string tar = dir.path() + "/tree.tar";
  create_archive(dir.path() + "/tree", tar, ArchiveFormat::tar);
  const std::string id = create(container("cat /tmp/hello.txt /tmp/sub/more.txt"));
  test::run_async(io_, engine_.put_archive(id, "/tmp", tar), 30s);
  test::run_async(io_, engine_.start_container(id), 30s);
  EXPECT_EQ(wait(id), 0);
  EXPECT_EQ(logs(id), "hello from the archive\nmore\n");

  // Docker wants the directory to exist; Podman makes it.
  if (!podman_) {
    try {
      test::run_async(io_, engine_.put_archive(id, "/no/such/dir", tar), 30s);
      ADD_FAILURE() << "no error for a missing directory";
    } catch (const EngineError& e) {
      EXPECT_EQ(e.status(), 404u);
      EXPECT_THAT(e.what(), HasSubstr("/no/such/dir"));
    }
  }
  EXPECT_THROW_CONTAINING(
      test::run_async(io_, engine_.put_archive(id, "/tmp", dir.path() + "/missing.tar"), 30s),
      std::invalid_argument, "cannot read the tar file");
}

TEST_F(EngineTest, CreateFromAMissingImageSaysToPullOrBuild) {
  json::object body = container("true");
  const std::string image = "rex-no-such-image-" + run_ + ":latest";
  body["Image"] = image;
  try {
    create(std::move(body));
    ADD_FAILURE() << "no error";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.status(), 404u);
    EXPECT_THAT(e.what(), HasSubstr("image '" + image + "'"));
    EXPECT_THAT(e.what(), HasSubstr("pull it or build it"));
    EXPECT_THAT(e.engine_message(), ContainsRegex("[Nn]o such image"));
  }
}

TEST_F(EngineTest, CreateWithATakenNameOrABadFieldFails) {
  const std::string name = "rex-test-" + run_;
  create(container("true"), name);
  try {
    create(container("true"), name);
    ADD_FAILURE() << "no error";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.status(), podman_ ? 500u : 409u);
    EXPECT_THAT(e.what(), HasSubstr("creating container '" + name + "'"));
    EXPECT_THAT(e.what(), HasSubstr("the name is taken"));
  }
  json::object bad = container("true");
  bad["HostConfig"].as_object()["Memory"] = "lots";
  try {
    create(std::move(bad));
    ADD_FAILURE() << "no error";
  } catch (const EngineError& e) {
    EXPECT_GE(e.status(), 400u);
    EXPECT_THAT(e.engine_message(), HasSubstr("Memory"));
  }
  if (!podman_) {  // Podman takes any limit
    json::object too_small = container("true");
    too_small["HostConfig"].as_object()["Memory"] = 5;
    try {
      create(std::move(too_small));
      ADD_FAILURE() << "no error";
    } catch (const EngineError& e) {
      EXPECT_EQ(e.status(), 400u);
      EXPECT_THAT(e.what(), HasSubstr("check the container settings"));
    }
  }
}

TEST_F(EngineTest, RemovingAnAbsentImageIsFine) {
  test::run_async(io_, engine_.remove_image("rex-no-such-image-" + run_ + ":latest"), 20s);
}

TEST(EngineUnreachable, MissingSocketNamesThePathAndSaysToStartDockerd) {
  asio::io_context io;
  test::TempDir dir;
  EngineConfig config;
  const std::string socket = dir.path() + "/nothing-here.sock";
  config.host = "unix://" + socket;
  Engine engine(io.get_executor(), config);
  EXPECT_TRUE(engine.is_local());
  EXPECT_EQ(engine.endpoint(), "unix://" + socket);
  const auto start = Clock::now();
  try {
    test::run_async(io, engine.inspect_image(kNoPython), 20s);
    ADD_FAILURE() << "no error";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.status(), 0u);
    EXPECT_THAT(e.what(), HasSubstr("inspecting image '" + std::string(kNoPython) + "' failed"));
    EXPECT_THAT(e.what(), HasSubstr("cannot reach the container engine at unix://" + socket));
    EXPECT_THAT(e.what(), HasSubstr("No such file or directory"));
    EXPECT_THAT(e.what(), HasSubstr("is dockerd running? start it, or set DOCKER_HOST"));
  }
  EXPECT_LT(Clock::now() - start, 2s) << "a missing engine is not retried";
}

TEST(EngineUnreachable, PodmanHintNamesItsService) {
  asio::io_context io;
  test::TempDir dir;
  EngineConfig config;
  config.host = "unix://" + dir.path() + "/podman.sock";
  config.runtime = "podman";
  Engine engine(io.get_executor(), config);
  EXPECT_THROW_CONTAINING(test::run_async(io, engine.version(), 20s), EngineError,
                          "podman system service");
}

}  // namespace
}  // namespace rex::docker
