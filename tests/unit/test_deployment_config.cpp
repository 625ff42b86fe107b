// Deployment configs: JSON in and out, SWE-ReX compatibility, errors that name the field, the
// docker_args translation, the container-create body, and rex gc's decisions.
#include <rex/deployment/config.hpp>
#include <rex/deployment/docker_args.hpp>
#include <rex/deployment/docker_deployment.hpp>
#include <rex/deployment/docker_gc.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <unistd.h>

#include <chrono>
#include <fstream>

#include "support/test_helpers.hpp"

namespace rex {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

DeploymentConfig parse(std::string_view text) {
  return deployment_config_from_json(json::parse(text));
}

std::string error_of(std::string_view text) {
  try {
    parse(text);
  } catch (const DeploymentConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeploymentConfig, TypeSelectsTheStruct) {
  EXPECT_EQ(deployment_type(parse(R"({"type":"local"})")), "local");
  EXPECT_EQ(deployment_type(parse(R"({"type":"remote","auth_token":"t"})")), "remote");
  EXPECT_EQ(deployment_type(parse(R"({"type":"dummy"})")), "dummy");
  EXPECT_EQ(deployment_type(parse(R"({"type":"docker","image":"x"})")), "docker");
  // SWE-agent's default deployment is docker; a config without type means it.
  EXPECT_EQ(deployment_type(parse(R"({"image":"python:3.12"})")), "docker");
}

TEST(DeploymentConfig, SweAgentDockerConfigLoadsUnchanged) {
  const auto config = parse(R"({
    "type": "docker", "image": "sweagent/swe-agent:latest", "port": null,
    "docker_args": ["--memory=4g", "-e", "A=1"], "startup_timeout": 60.0, "pull": "never",
    "remove_images": false, "python_standalone_dir": "/root", "platform": null,
    "remove_container": true, "container_runtime": "docker",
    "exec_shell": ["/bin/sh", "-c"], "docker_internal_host": "http://127.0.0.1"})");
  const auto& d = std::get<DockerDeploymentConfig>(config);
  EXPECT_EQ(d.image, "sweagent/swe-agent:latest");
  EXPECT_FALSE(d.port);
  EXPECT_EQ(d.docker_args.size(), 3u);
  EXPECT_EQ(d.startup_timeout, 60.0);
  EXPECT_EQ(d.pull, PullPolicy::never);
  EXPECT_TRUE(d.remove_container);
}

TEST(DeploymentConfig, SweAgentRemoteConfigLoadsUnchanged) {
  const auto config = parse(
      R"({"type":"remote","auth_token":"abc","host":"http://10.0.0.5","port":8000,"timeout":0.5})");
  const auto& r = std::get<RemoteDeploymentConfig>(config);
  EXPECT_EQ(r.auth_token, "abc");
  EXPECT_EQ(r.host, "http://10.0.0.5");
  EXPECT_EQ(r.port, 8000);
  EXPECT_EQ(r.timeout, 0.5);
}

TEST(DeploymentConfig, PlatformMovesOutOfDockerArgs) {
  const auto a = std::get<DockerDeploymentConfig>(
      parse(R"({"image":"x","docker_args":["--platform","linux/arm64"]})"));
  EXPECT_EQ(a.platform, "linux/arm64");
  const auto b = std::get<DockerDeploymentConfig>(
      parse(R"({"image":"x","docker_args":["--platform=linux/amd64"]})"));
  EXPECT_EQ(b.platform, "linux/amd64");
  EXPECT_THAT(error_of(R"({"image":"x","platform":"linux/amd64",
                           "docker_args":["--platform","linux/arm64"]})"),
              HasSubstr("docker.platform"));
}

TEST(DeploymentConfig, ErrorsNameTheField) {
  EXPECT_THAT(error_of(R"({"type":"kubernetes"})"), HasSubstr("unknown type \"kubernetes\""));
  EXPECT_THAT(error_of(R"({"type":"docker","imgae":"x"})"),
              HasSubstr("docker: unknown field \"imgae\""));
  EXPECT_THAT(error_of(R"({"type":"docker","pull":"sometimes"})"),
              HasSubstr("docker.pull: expected one of never, missing, always"));
  EXPECT_THAT(error_of(R"({"type":"docker","port":"8000"})"),
              HasSubstr("docker.port: expected an integer or null, got a string"));
  EXPECT_THAT(error_of(R"({"type":"docker","port":70000})"), HasSubstr("docker.port"));
  EXPECT_THAT(error_of(R"({"type":"docker","startup_timeout":-1})"),
              HasSubstr("docker.startup_timeout"));
  EXPECT_THAT(error_of(R"({"type":"docker","docker_args":"--rm"})"),
              HasSubstr("docker.docker_args: expected an array of strings"));
  EXPECT_THAT(error_of(R"({"type":"docker","docker_args":["--gpus","all"]})"),
              HasSubstr("unsupported flag '--gpus'"));
  EXPECT_THAT(error_of(R"({"type":"docker","memory":"lots"})"), HasSubstr("docker.memory"));
  EXPECT_THAT(error_of(R"({"type":"docker","container_runtime":"lxc"})"),
              HasSubstr("docker.container_runtime"));
  EXPECT_THAT(error_of(R"({"type":"docker","connect":"carrier-pigeon"})"),
              HasSubstr("docker.connect"));
  EXPECT_THAT(error_of(R"({"type":"local","env":{"A":[1]}})"), HasSubstr("local.env"));
  EXPECT_THAT(error_of(R"({"type":"dummy","run_in_session_outputs":[{"exit_code":"x"}]})"),
              HasSubstr("dummy.run_in_session_outputs"));
  EXPECT_THAT(error_of(R"([1,2])"), HasSubstr("expected an object"));
  EXPECT_THAT(error_of(R"({"type":3})"), HasSubstr("type: expected a string"));
}

TEST(DeploymentConfig, RoundTripsThroughJson) {
  const auto original = parse(R"({"type":"docker","image":"img","port":1234,
      "docker_args":["-e","X=1"],"pull":"always","memory":"1g","cpus":1.5,"pids_limit":100,
      "env":{"A":"b"},"mounts":["/a:/b:ro"],"labels":{"team":"x"},"network_mode":"none",
      "create_options":{"HostConfig":{"ShmSize":1024}},"max_lifetime":60,"init":false,
      "connect":"port"})");
  EXPECT_EQ(std::get<DockerDeploymentConfig>(original).connect, "port");
  const auto again = deployment_config_from_json(to_json(original));
  EXPECT_EQ(json::serialize(to_json(original)), json::serialize(to_json(again)));
  for (const char* text : {R"({"type":"local","working_dir":"/w","env":{"K":"v"}})",
                           R"({"type":"remote","auth_token":"t","port":9})",
                           R"({"type":"dummy","run_in_session_outputs":[{"output":"hi"}]})"}) {
    const auto c = parse(text);
    EXPECT_EQ(json::serialize(to_json(c)),
              json::serialize(to_json(deployment_config_from_json(to_json(c)))))
        << text;
  }
}

TEST(DeploymentConfig, DummyTakesOneObservationOrAList) {
  const auto one = std::get<DummyDeploymentConfig>(
      parse(R"({"type":"dummy","run_in_session_outputs":{"output":"x","exit_code":0}})"));
  ASSERT_EQ(one.run_in_session_outputs.size(), 1u);
  EXPECT_EQ(one.run_in_session_outputs[0].output, "x");
}

TEST(DeploymentConfig, LoadsFromAFileAndNamesIt) {
  test::TempDir dir;
  const std::string good = dir.path() + "/good.json";
  std::ofstream(good) << R"({"type":"local"})";
  EXPECT_EQ(deployment_type(load_deployment_config(good)), "local");
  const std::string bad = dir.path() + "/bad.json";
  std::ofstream(bad) << R"({"type":"local",})";
  try {
    load_deployment_config(bad);
    ADD_FAILURE() << "no error";
  } catch (const DeploymentConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.json: not valid JSON"));
  }
  EXPECT_THROW(load_deployment_config(dir.path() + "/missing.json"), DeploymentConfigError);
}

// ---- docker_args --------------------------------------------------------------------------

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

// ---- the container-create body --------------------------------------------------------------

TEST(DockerDeploymentBody, CarriesServerLimitsLabelsAndOverrides) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.image = "img:1";
  c.memory = "256m";
  c.cpus = 0.5;
  c.pids_limit = 64;
  c.env = {{"A", "1"}};
  c.mounts = {"/data:/data:ro"};
  c.labels = {{"team", "evals"}};
  c.docker_args = {"-e", "B=2", "--memory=1g"};
  c.create_options = json::parse(R"({"HostConfig":{"ShmSize":1048576},"Env":["C=3"]})").as_object();
  DockerDeployment d(io.get_executor(), c);
  const json::object body = d.create_body();
  const auto& hc = body.at("HostConfig").as_object();
  EXPECT_EQ(body.at("Image"), "img:1");
  EXPECT_EQ(json::serialize(body.at("Entrypoint")), R"(["/.rex/rex-server"])");
  EXPECT_THAT(json::serialize(body.at("Cmd")), HasSubstr(R"("--host","0.0.0.0","--port","8000")"));
  EXPECT_THAT(json::serialize(body.at("Cmd")), HasSubstr(R"("--max-lifetime")"));
  // docker_args come after the fields, create_options last (arrays replaced as documented).
  EXPECT_EQ(hc.at("Memory").as_int64(), 1024 * 1024 * 1024);
  EXPECT_EQ(hc.at("NanoCpus").as_int64(), 500'000'000);
  EXPECT_EQ(hc.at("PidsLimit").as_int64(), 64);
  EXPECT_EQ(hc.at("ShmSize").as_int64(), 1048576);
  // The token is always there, whatever create_options said.
  const std::string env = json::serialize(body.at("Env"));
  EXPECT_THAT(env, HasSubstr("C=3"));
  EXPECT_THAT(env, HasSubstr("REX_AUTH_TOKEN="));
  EXPECT_THAT(json::serialize(hc.at("Binds")), HasSubstr(":/.rex/rex-server:ro"));
  EXPECT_THAT(json::serialize(hc.at("Binds")), HasSubstr("/data:/data:ro"));
  EXPECT_EQ(json::serialize(hc.at("PortBindings")),
            R"({"8000/tcp":[{"HostIp":"127.0.0.1","HostPort":""}]})");
  const auto& labels = body.at("Labels").as_object();
  EXPECT_EQ(labels.at("team"), "evals");
  EXPECT_EQ(labels.at("rex.managed"), "1");
  EXPECT_EQ(labels.at("rex.deployment").as_string(), d.deployment_id());
  EXPECT_EQ(labels.at("rex.owner.pid").as_string(), std::to_string(::getpid()));
  EXPECT_TRUE(labels.contains("rex.expires"));
  EXPECT_EQ(hc.at("Init"), true);
}

TEST(DockerDeploymentBody, NetworkNoneUsesAUnixSocket) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.image = "img";
  c.docker_args = {"--network", "none"};
  DockerDeployment d(io.get_executor(), c);
  const json::object body = d.create_body();
  EXPECT_THAT(json::serialize(body.at("Cmd")),
              HasSubstr(R"("--unix-socket","/.rex-run/rex.sock")"));
  EXPECT_FALSE(body.at("HostConfig").as_object().contains("PortBindings"));
  EXPECT_THAT(json::serialize(body.at("HostConfig").at("Binds")), HasSubstr(":/.rex-run"));
}

TEST(DockerDeploymentBody, ChosenPortIsPublished) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.image = "img";
  c.port = 18123;
  c.max_lifetime = 0;
  DockerDeployment d(io.get_executor(), c);
  const json::object body = d.create_body();
  EXPECT_THAT(json::serialize(body.at("HostConfig").at("PortBindings")),
              HasSubstr(R"("HostPort":"18123")"));
  EXPECT_THAT(json::serialize(body.at("Cmd")), ::testing::Not(HasSubstr("--max-lifetime")));
  EXPECT_FALSE(body.at("Labels").as_object().contains("rex.expires"));
}

TEST(DockerDeploymentBody, ContainerIpPublishesNoPort) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.image = "img";
  EXPECT_EQ(c.connect, "auto");
  c.connect = "container_ip";
  DockerDeployment d(io.get_executor(), c);
  const json::object body = d.create_body();
  EXPECT_FALSE(body.at("HostConfig").as_object().contains("PortBindings"));
  EXPECT_THAT(json::serialize(body.at("Cmd")), HasSubstr(R"("--host","0.0.0.0","--port","8000")"));
}

TEST(DockerDeploymentBody, ContainerIpRefusesWhatNeedsAPortOrHasNoNetwork) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.connect = "container_ip";
  c.port = 18123;
  try {
    DockerDeployment d(io.get_executor(), c);
    ADD_FAILURE() << "container_ip with a port accepted";
  } catch (const DeploymentConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("docker.connect"));
  }
  c.port.reset();
  c.network_mode = "none";
  EXPECT_THROW(DockerDeployment(io.get_executor(), c), DeploymentConfigError);
}

TEST(DockerDeploymentBody, BadSettingsFailBeforeAnythingStarts) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.docker_args = {"--gpus", "all"};
  EXPECT_THROW(DockerDeployment(io.get_executor(), c), DeploymentConfigError);
  c.docker_args = {};
  c.mounts = {"/no-target"};
  EXPECT_THROW(DockerDeployment(io.get_executor(), c), DeploymentConfigError);
  c.mounts = {};
  c.server_transfer = "teleport";
  EXPECT_THROW(DockerDeployment(io.get_executor(), c), DeploymentConfigError);
}

TEST(DockerDeploymentBody, HardenedProfileLocksTheContainerDown) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.image = "img";
  c.security_profile = "hardened";
  DockerDeployment d(io.get_executor(), c);
  const json::object body = d.create_body();
  const auto& hc = body.at("HostConfig").as_object();
  EXPECT_EQ(json::serialize(hc.at("SecurityOpt")), R"(["no-new-privileges"])");
  EXPECT_EQ(json::serialize(hc.at("CapDrop")), R"(["ALL"])");
  EXPECT_EQ(json::serialize(hc.at("CapAdd")),
            R"(["CHOWN","DAC_OVERRIDE","FOWNER","FSETID","KILL","SETGID","SETUID"])");
  EXPECT_EQ(hc.at("ReadonlyRootfs"), true);
  EXPECT_EQ(hc.at("NetworkMode"), "none");
  EXPECT_THAT(json::serialize(body.at("Cmd")), HasSubstr("--unix-socket"));
  EXPECT_EQ(hc.at("Memory").as_int64(), 4LL << 30);
  EXPECT_EQ(hc.at("PidsLimit").as_int64(), 1024);
  EXPECT_EQ(body.at("WorkingDir"), "/work");
  EXPECT_TRUE(body.at("Volumes").as_object().contains("/work"));
  EXPECT_THAT(json::serialize(hc.at("Tmpfs")), HasSubstr(R"("/tmp":"rw,exec,nosuid,nodev)"));
  EXPECT_EQ(hc.at("Init"), true);
}

TEST(DockerDeploymentBody, HardenedProfileKeepsExplicitLimitsAndRefusesANetwork) {
  boost::asio::io_context io;
  DockerDeploymentConfig c;
  c.image = "img";
  c.security_profile = "hardened";
  c.memory = "512m";
  c.pids_limit = 64;
  c.working_dir = "/testbed";
  {
    DockerDeployment d(io.get_executor(), c);
    const json::object body = d.create_body();
    EXPECT_EQ(body.at("HostConfig").at("Memory").as_int64(), 512LL << 20);
    EXPECT_EQ(body.at("HostConfig").at("PidsLimit").as_int64(), 64);
    EXPECT_TRUE(body.at("Volumes").as_object().contains("/testbed"));
  }
  c.network_mode = "bridge";
  EXPECT_THAT([&] { DockerDeployment d(io.get_executor(), c); },
              ThrowsMessage<DeploymentConfigError>(HasSubstr("runs without network")));
  c.network_mode = "";
  c.docker_args = {"--network=host"};
  EXPECT_THAT([&] { DockerDeployment d(io.get_executor(), c); },
              ThrowsMessage<DeploymentConfigError>(HasSubstr("'host'")));
  c.docker_args = {};
  c.server_transfer = "upload";
  EXPECT_THAT([&] { DockerDeployment d(io.get_executor(), c); },
              ThrowsMessage<DeploymentConfigError>(HasSubstr("read-only root")));
  c.server_transfer = "auto";
  c.security_profile = "paranoid";
  EXPECT_THAT([&] { DockerDeployment d(io.get_executor(), c); },
              ThrowsMessage<DeploymentConfigError>(HasSubstr("docker.security_profile")));
}

TEST(DeploymentConfigJson, SecurityProfileRoundTripsAndIsChecked) {
  const auto config = deployment_config_from_json(
      json::parse(R"({"type":"docker","image":"i","security_profile":"hardened"})"));
  EXPECT_EQ(std::get<DockerDeploymentConfig>(config).security_profile, "hardened");
  EXPECT_EQ(to_json(config).at("security_profile"), "hardened");
  EXPECT_THAT(
      [] {
        (void)deployment_config_from_json(
            json::parse(R"({"type":"docker","security_profile":"lax"})"));
      },
      ThrowsMessage<DeploymentConfigError>(HasSubstr("docker.security_profile")));
}

// ---- rex gc's decisions --------------------------------------------------------------------

TEST(DockerGc, KeepsContainersOfLiveOwnersAndRemovesTheRest) {
  const auto ours = owner_labels();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  EXPECT_EQ(gc_reason(ours, now, {}), "");
  GcOptions all;
  all.all = true;
  EXPECT_EQ(gc_reason(ours, now, all), "--all");

  auto expired = ours;
  expired["rex.expires"] = std::to_string(now - 600);
  EXPECT_THAT(gc_reason(expired, now, {}), HasSubstr("expired 10 min ago"));

  auto gone = ours;
  gone["rex.owner.pid"] = "999999999";
  EXPECT_THAT(gc_reason(gone, now, {}), HasSubstr("owner process 999999999 is gone"));

  auto reused = ours;
  reused["rex.owner.start"] = "1";
  EXPECT_THAT(gc_reason(reused, now, {}), HasSubstr("another process"));

  auto rebooted = ours;
  rebooted["rex.owner.boot"] = "another-boot";
  EXPECT_THAT(gc_reason(rebooted, now, {}), HasSubstr("rebooted"));

  auto elsewhere = ours;
  elsewhere["rex.owner.host"] = "some-other-host";
  elsewhere["rex.owner.pid"] = "999999999";
  EXPECT_EQ(gc_reason(elsewhere, now, {}), "");
}

}  // namespace
}  // namespace rex
