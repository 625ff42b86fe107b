// `rex eval` over Docker containers, as a harness runs it: the rex executable evaluates eight
// instances on rex-test-bookworm four at a time, is killed with SIGKILL in the middle, runs
// again to the end (every id recorded exactly once), and `rex gc` then removes what the killed
// run left, so no container of either run remains.
#include <rex/docker/engine.hpp>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "docker/docker_support.hpp"
#include "support/async_test.hpp"
#include "support/json_lines.hpp"
#include "support/test_helpers.hpp"

extern char** environ;

namespace rex {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

using test::read_text;

// Starts the rex executable with stdout and stderr into `log`.
pid_t spawn_rex(std::vector<std::string> args, const std::string& log) {
  args.insert(args.begin(), REX_CLI_PATH);
  return test::spawn_logged(std::move(args), log);
}

// Waits for the child, at most `limit`; -1 when it had to be killed.
int wait_for(pid_t child, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(50ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(DockerEval, KilledHarnessThenRerunThenGcLeavesNothing) {
  asio::io_context io;
  docker::Engine engine(io.get_executor());
  if (const std::string why = test::engine_missing(io, engine); !why.empty())
    FAIL() << why;
  test::TempDir dir;
  dir.file("input.txt", "from the host\n");
  const std::string instances = dir.path() + "/instances.jsonl";
  const std::string out = dir.path() + "/out";
  {
    std::ofstream f(instances);
    for (int n = 0; n < 7; ++n) {
      json::object i{{"id", "py-" + std::to_string(n)},
                     {"upload", json::array{json::object{{"source", "input.txt"},
                                                         {"target", "data/input.txt"}}}},
                     {"setup", json::array{"cd data", "export N=" + std::to_string(n)}},
                     {"run", "sleep 1.5; python3 -c \"print($N * 6)\" > answer.txt; cat input.txt"},
                     {"artifacts", json::array{"data/answer.txt"}},
                     {"timeout", 60}};
      f << json::serialize(i) << '\n';
    }
    // Another image for one instance: it has no python3.
    f << R"({"id":"no-python","image":"rex-test-nopython:latest","run":"python3 --version"})"
      << '\n';
  }
  const std::vector<std::string> args = {"eval",
                                         instances,
                                         "--output",
                                         out,
                                         "--parallel",
                                         "4",
                                         "--deployment",
                                         "docker",
                                         "--image",
                                         "rex-test-bookworm:latest",
                                         "--pull",
                                         "never",
                                         "--docker-arg=--label=rex.test=eval"};

  // The first run is killed while instances run.
  const pid_t first = spawn_rex(args, dir.path() + "/first.log");
  ASSERT_GT(first, 0);
  const std::vector<std::string> first_filter{"rex.owner.pid=" + std::to_string(first)};
  std::size_t running = 0;
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < until) {
    const auto found = test::run_async(io, engine.list_containers(first_filter, true), 30s);
    running = std::count_if(found.begin(), found.end(),
                            [](const auto& c) { return c.state == "running"; });
    if (running >= 2 && !test::read_json_lines(out + "/results.jsonl").empty())
      break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(running, 2u) << read_text(dir.path() + "/first.log");
  ::kill(first, SIGKILL);
  ASSERT_EQ(wait_for(first, 30s), 128 + SIGKILL);
  const auto before = test::read_json_lines(out + "/results.jsonl");
  ASSERT_FALSE(before.empty());
  ASSERT_LT(before.size(), 8u) << "the first run finished before it was killed";
  EXPECT_FALSE(
      test::run_async(io, engine.list_containers(first_filter, true), 30s).empty());  // left over

  // The rerun does the rest.
  const pid_t second = spawn_rex(args, dir.path() + "/second.log");
  ASSERT_GT(second, 0);
  const int status = wait_for(second, 240s);
  const std::string log = read_text(dir.path() + "/second.log");
  ASSERT_EQ(status, 0) << log;
  EXPECT_THAT(log, HasSubstr(fmt::format("skipping {} instance", before.size())));
  const auto records = test::read_json_lines(out + "/results.jsonl");
  std::map<std::string, int> seen;
  for (const auto& r : records)
    ++seen[std::string(r.at("id").as_string())];
  EXPECT_EQ(seen.size(), 8u);
  for (const auto& [id, count] : seen)
    EXPECT_EQ(count, 1) << id;
  for (const auto& r : records) {
    const std::string id(r.at("id").as_string());
    if (id == "no-python") {
      EXPECT_EQ(r.at("status"), "failed");
      EXPECT_EQ(r.at("exit_code"), 127);
      continue;
    }
    EXPECT_EQ(r.at("status"), "passed") << json::serialize(r);
    EXPECT_EQ(r.at("output"), "from the host\n");
    const int n = std::stoi(id.substr(3));
    EXPECT_EQ(read_text(out + "/artifacts/" + id + "/answer.txt"), std::to_string(n * 6) + "\n");
  }
  const std::vector<std::string> second_filter{"rex.owner.pid=" + std::to_string(second)};
  EXPECT_TRUE(test::run_async(io, engine.list_containers(second_filter, true), 30s).empty());

  // `rex gc` removes what the killed run left.
  const pid_t gc = spawn_rex({"gc"}, dir.path() + "/gc.log");
  ASSERT_GT(gc, 0);
  EXPECT_EQ(wait_for(gc, 60s), 0) << read_text(dir.path() + "/gc.log");
  EXPECT_THAT(read_text(dir.path() + "/gc.log"), HasSubstr("is gone"));
  EXPECT_TRUE(test::run_async(io, engine.list_containers(first_filter, true), 30s).empty());
  const std::vector<std::string> ours{"rex.test=eval"};
  EXPECT_TRUE(test::run_async(io, engine.list_containers(ours, true), 30s).empty());
}

}  // namespace
}  // namespace rex
