// DockerDeployment before it starts: the container-create body it sends (rex-server, limits,
// labels, overrides, the security profile) and the settings it refuses.
#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_deployment.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <unistd.h>

#include <string>

namespace rex {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

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
  EXPECT_EQ(hc.at("Init"), false);  // rex-server is the container's first process and its init
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
  c.max_lifetime = Seconds(0);
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
  EXPECT_EQ(hc.at("Init"), false);
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

}  // namespace
}  // namespace rex
