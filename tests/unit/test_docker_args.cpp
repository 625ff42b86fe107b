// The docker_args translation: `docker run` flags become fields of the engine's container-create
// body; unsupported or malformed flags are refused by name.
#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_args.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace rex {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;

json::object translate(std::vector<std::string> args,
                       std::optional<std::string>* platform = nullptr) {
  json::object body;
  std::optional<std::string> p;
  apply_docker_args(args, body, p);
  if (platform)
    *platform = p;
  return body;
}

TEST(DockerArgs, CommonFlagsBecomeEngineFields) {
  std::optional<std::string> platform;
  const auto body = translate({"-e",
                               "A=1",
                               "--env=B=2",
                               "-eC=3",
                               "-v",
                               "/h:/c:ro",
                               "--volume=/x:/y",
                               "-w",
                               "/work",
                               "--user",
                               "1000:1000",
                               "--memory",
                               "512m",
                               "--cpus=1.5",
                               "--pids-limit",
                               "256",
                               "--shm-size",
                               "1g",
                               "--ulimit",
                               "nofile=1024:2048",
                               "--ulimit",
                               "nproc=100",
                               "--network",
                               "none",
                               "--platform",
                               "linux/amd64",
                               "--privileged",
                               "--cap-add",
                               "SYS_PTRACE",
                               "--cap-drop=NET_RAW",
                               "--rm",
                               "-l",
                               "k=v",
                               "--read-only",
                               "--tmpfs",
                               "/run:size=64m",
                               "--security-opt",
                               "no-new-privileges",
                               "--hostname",
                               "box",
                               "--init"},
                              &platform);
  const auto& hc = body.at("HostConfig").as_object();
  EXPECT_EQ(json::serialize(body.at("Env")), R"(["A=1","B=2","C=3"])");
  EXPECT_EQ(json::serialize(hc.at("Binds")), R"(["/h:/c:ro","/x:/y"])");
  EXPECT_EQ(body.at("WorkingDir"), "/work");
  EXPECT_EQ(body.at("User"), "1000:1000");
  EXPECT_EQ(hc.at("Memory").as_int64(), 512 * 1024 * 1024);
  EXPECT_EQ(hc.at("NanoCpus").as_int64(), 1'500'000'000);
  EXPECT_EQ(hc.at("PidsLimit").as_int64(), 256);
  EXPECT_EQ(hc.at("ShmSize").as_int64(), 1024LL * 1024 * 1024);
  EXPECT_EQ(
      json::serialize(hc.at("Ulimits")),
      R"([{"Name":"nofile","Soft":1024,"Hard":2048},{"Name":"nproc","Soft":100,"Hard":100}])");
  EXPECT_EQ(hc.at("NetworkMode"), "none");
  EXPECT_EQ(platform, "linux/amd64");
  EXPECT_EQ(hc.at("Privileged"), true);
  EXPECT_EQ(json::serialize(hc.at("CapAdd")), R"(["SYS_PTRACE"])");
  EXPECT_EQ(json::serialize(hc.at("CapDrop")), R"(["NET_RAW"])");
  EXPECT_EQ(body.at("Labels").at("k"), "v");
  EXPECT_EQ(hc.at("ReadonlyRootfs"), true);
  EXPECT_EQ(hc.at("Tmpfs").at("/run"), "size=64m");
  EXPECT_EQ(json::serialize(hc.at("SecurityOpt")), R"(["no-new-privileges"])");
  EXPECT_EQ(body.at("Hostname"), "box");
  EXPECT_EQ(hc.at("Init"), true);
}

TEST(DockerArgs, EnvWithoutValueTakesOurs) {
  ::setenv("REX_TEST_PASSED_ON", "yes", 1);
  ::unsetenv("REX_TEST_NOT_SET");
  const auto body = translate({"-e", "REX_TEST_PASSED_ON", "-e", "REX_TEST_NOT_SET"});
  EXPECT_EQ(json::serialize(body.at("Env")), R"(["REX_TEST_PASSED_ON=yes"])");
}

TEST(DockerArgs, BadArgumentsAreRefusedByName) {
  auto error = [](std::vector<std::string> args) -> std::string {
    try {
      translate(std::move(args));
    } catch (const DeploymentConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error({"--gpus", "all"}), HasSubstr("unsupported flag '--gpus'"));
  EXPECT_THAT(error({"-p", "8080:80"}), HasSubstr("unsupported flag '-p'"));
  EXPECT_THAT(error({"--entrypoint=/bin/sh"}), HasSubstr("unsupported flag '--entrypoint'"));
  EXPECT_THAT(error({"--memory"}), HasSubstr("'--memory' needs a value"));
  EXPECT_THAT(error({"--memory", "12q"}), HasSubstr("unknown unit"));
  EXPECT_THAT(error({"--cpus", "many"}), HasSubstr("not a number"));
  EXPECT_THAT(error({"--cpus", "0"}), HasSubstr("above 0"));
  EXPECT_THAT(error({"--ulimit", "nofile"}), HasSubstr("NAME=SOFT[:HARD]"));
  EXPECT_THAT(error({"-v", "/only"}), HasSubstr("SOURCE:TARGET"));
  EXPECT_THAT(error({"ubuntu"}), HasSubstr("'ubuntu' is not a flag"));
  EXPECT_THAT(error({"--privileged=maybe"}), HasSubstr("not true or false"));
}

TEST(DockerArgs, Sizes) {
  EXPECT_EQ(parse_size("1048576", "x"), 1048576);
  EXPECT_EQ(parse_size("1k", "x"), 1024);
  EXPECT_EQ(parse_size("1.5GB", "x"), 1536LL * 1024 * 1024);
  EXPECT_EQ(parse_size("2t", "x"), 2LL << 40);
  EXPECT_THROW(parse_size("", "x"), DeploymentConfigError);
  EXPECT_THROW(parse_size("m", "x"), DeploymentConfigError);
}

}  // namespace
}  // namespace rex
