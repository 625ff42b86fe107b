// DockerDeployment's decisions with plain inputs: checked settings, the start plan, where
// rex-server is looked for, labels, the create body, the server's address from an inspected
// container, what a release cleans up and how a failed start reads.
#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_gc.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/docker/engine_error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/docker/docker_plan.hpp"
#include "deployment/server_binary.hpp"
#include "support/test_helpers.hpp"

namespace rex::detail {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;

DockerDeploymentConfig image(std::string name = "img:1") {
  DockerDeploymentConfig c;
  c.image = std::move(name);
  return c;
}

std::string validation_error(const DockerDeploymentConfig& c) {
  try {
    validate(c);
  } catch (const DeploymentConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DockerPlanValidate, RefusesSettingsThatCannotWorkByName) {
  auto c = image();
  c.startup_timeout = Seconds(0);
  EXPECT_EQ(validation_error(c), "docker.startup_timeout: must be above 0");
  c = image();
  c.port = 70000;
  EXPECT_EQ(validation_error(c), "docker.port: 70000 is not a TCP port");
  c = image();
  c.memory = "lots";
  EXPECT_THAT(validation_error(c), HasSubstr("docker.memory"));
  c = image();
  c.cpus = 0;
  EXPECT_EQ(validation_error(c), "docker.cpus: must be above 0");
  c = image();
  c.mounts = {"/only"};
  EXPECT_EQ(validation_error(c), "docker.mounts: '/only': expected HOST:CONTAINER[:ro]");
  c = image();
  c.server_transfer = "copy";
  EXPECT_EQ(validation_error(c),
            "docker.server_transfer: expected auto, mount or upload, got 'copy'");
  c = image();
  c.connect = "ssh";
  EXPECT_EQ(validation_error(c), "docker.connect: expected auto, port or container_ip, got 'ssh'");
  c = image();
  c.container_runtime = "lxc";
  EXPECT_EQ(validation_error(c), "docker.container_runtime: expected docker or podman, got 'lxc'");
  c = image();
  c.security_profile = "paranoid";
  EXPECT_EQ(validation_error(c),
            "docker.security_profile: expected default or hardened, got 'paranoid'");
  c = image();
  c.docker_args = {"--gpus", "all"};
  EXPECT_THAT(validation_error(c), HasSubstr("unsupported flag '--gpus'"));
  c = image();
  c.platform = "linux/amd64";
  c.docker_args = {"--platform", "linux/arm64"};
  EXPECT_EQ(validation_error(c),
            "docker.platform: given both as platform and as --platform in docker_args");
}

TEST(DockerPlanValidate, ContainerIpNeedsANetworkAndNoPort) {
  auto c = image();
  c.connect = "container_ip";
  c.network_mode = "none";
  EXPECT_EQ(validation_error(c),
            "docker.connect: container_ip needs a container network, and network mode 'none' has "
            "none of its own; use auto");
  c.network_mode = "";
  c.port = 8080;
  EXPECT_EQ(validation_error(c),
            "docker.connect: container_ip publishes no port, but docker.port asks for one; use "
            "port (or auto)");
  c.port.reset();
  EXPECT_EQ(validation_error(c), "no error");
}

TEST(DockerPlanValidate, NetworkModeComesFromCreateOptionsThenDockerArgsThenTheField) {
  auto c = image();
  DockerSettings s = validate(c);
  EXPECT_EQ(s.network_mode, "");
  EXPECT_FALSE(s.unix_socket);
  c.network_mode = "mynet";
  EXPECT_EQ(validate(c).network_mode, "mynet");
  c.docker_args = {"--network", "host"};
  s = validate(c);
  EXPECT_EQ(s.network_mode, "host");
  EXPECT_TRUE(s.unix_socket);
  c.create_options = json::parse(R"({"HostConfig":{"NetworkMode":"container:abc"}})").as_object();
  s = validate(c);
  EXPECT_EQ(s.network_mode, "container:abc");
  EXPECT_TRUE(s.unix_socket);
  c.create_options = json::parse(R"({"HostConfig":{"NetworkMode":"bridge"}})").as_object();
  EXPECT_FALSE(validate(c).unix_socket);
}

TEST(DockerPlanValidate, PlatformMovesOutOfDockerArgs) {
  auto c = image();
  c.docker_args = {"--platform", "linux/arm64"};
  EXPECT_EQ(validate(c).config.platform, "linux/arm64");
  c.platform = "linux/arm64";
  EXPECT_EQ(validate(c).config.platform, "linux/arm64");
}

TEST(DockerPlanValidate, HardenedProfileFillsItsDefaultsAndRefusesANetwork) {
  auto c = image();
  c.security_profile = "hardened";
  const DockerSettings s = validate(c);
  EXPECT_EQ(s.config.network_mode, "none");
  EXPECT_EQ(s.network_mode, "none");
  EXPECT_TRUE(s.unix_socket);
  EXPECT_EQ(s.config.working_dir, "/work");
  EXPECT_EQ(s.config.memory, "4g");
  EXPECT_EQ(s.config.pids_limit, 1024);
  EXPECT_TRUE(is_hardened(s.config));

  c.memory = "1g";
  c.working_dir = "/repo";
  c.pids_limit = 64;
  const DockerSettings kept = validate(c);
  EXPECT_EQ(kept.config.memory, "1g");
  EXPECT_EQ(kept.config.working_dir, "/repo");
  EXPECT_EQ(kept.config.pids_limit, 64);

  c.docker_args = {"--network", "bridge"};
  EXPECT_EQ(validation_error(c),
            "docker.security_profile: the hardened profile runs without network, but the network "
            "mode is 'bridge' (from network_mode, docker_args or create_options)");
  c.docker_args.clear();
  c.server_transfer = "upload";
  EXPECT_EQ(validation_error(c),
            "docker.server_transfer: 'upload' cannot write into the hardened profile's read-only "
            "root; use mount (a local engine)");
}

TEST(DockerPlanStart, ServerTransferFollowsTheEngine) {
  auto c = image();
  EXPECT_TRUE(plan_start(validate(c), true, "unix:///run/docker.sock").mount_server);
  EXPECT_FALSE(plan_start(validate(c), false, "tcp://far:2376").mount_server);
  c.server_transfer = "mount";
  EXPECT_TRUE(plan_start(validate(c), false, "tcp://far:2376").mount_server);
  c.server_transfer = "upload";
  EXPECT_FALSE(plan_start(validate(c), true, "unix:///run/docker.sock").mount_server);
}

TEST(DockerPlanStart, RouteFollowsConnectTheNetworkAndTheEngine) {
  auto c = image();
  EXPECT_EQ(plan_start(validate(c), true, "").route, ServerRoute::ask_engine);
  EXPECT_EQ(plan_start(validate(c), false, "").route, ServerRoute::published_port);
  c.port = 8080;  // a port asked for: published
  EXPECT_EQ(plan_start(validate(c), true, "").route, ServerRoute::published_port);
  c.port.reset();
  c.docker_internal_host = "http://docker-host";
  EXPECT_EQ(plan_start(validate(c), true, "").route, ServerRoute::published_port);
  c = image();
  c.connect = "port";
  EXPECT_EQ(plan_start(validate(c), true, "").route, ServerRoute::published_port);
  c.connect = "container_ip";
  EXPECT_EQ(plan_start(validate(c), true, "").route, ServerRoute::container_ip);
  EXPECT_EQ(plan_start(validate(c), false, "").route, ServerRoute::container_ip);
  c.connect = "auto";
  c.network_mode = "none";
  EXPECT_EQ(plan_start(validate(c), true, "").route, ServerRoute::unix_socket);

  EXPECT_TRUE(publishes_port(ServerRoute::published_port));
  EXPECT_TRUE(publishes_port(ServerRoute::ask_engine));
  EXPECT_FALSE(publishes_port(ServerRoute::container_ip));
  EXPECT_FALSE(publishes_port(ServerRoute::unix_socket));
}

TEST(DockerPlanStart, UnixSocketNeedsALocalEngine) {
  auto c = image();
  c.network_mode = "none";
  EXPECT_THROW_MESSAGE(plan_start(validate(c), false, "tcp://far:2376"), DeploymentStartupError,
                       "network mode 'none' needs the server's unix socket in a host directory, "
                       "which a remote engine (tcp://far:2376) cannot mount; use the default "
                       "network");
}

TEST(DockerPlan, NetworkNames) {
  EXPECT_EQ(network_name(""), "bridge");
  EXPECT_EQ(network_name("default"), "bridge");
  EXPECT_EQ(network_name("mynet"), "mynet");
}

TEST(DockerPlan, NetworkRangesFromAnInspectedNetwork) {
  const auto info = json::parse(R"({"IPAM":{"Config":[
      {"Subnet":"172.17.0.0/16","Gateway":"172.17.0.1"}, 3, {"Subnet":"fd00::/64"}]}})")
                        .as_object();
  const auto ranges = network_ranges(info);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].gateway, "172.17.0.1");
  EXPECT_EQ(ranges[0].subnet, "172.17.0.0/16");
  EXPECT_EQ(ranges[1].gateway, "");
  EXPECT_EQ(ranges[1].subnet, "fd00::/64");
  EXPECT_TRUE(network_ranges(json::object()).empty());
  EXPECT_TRUE(network_ranges(json::parse(R"({"IPAM":{"Config":null}})").as_object()).empty());
}

TEST(DockerPlan, RexServerIsLookedForInOrder) {
  auto found = rex_server_candidates("/opt/rex-server", "/usr/local/bin/rex", "/build/rex-server");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].path, "/opt/rex-server");
  EXPECT_EQ(found[0].source, "REX_SERVER_PATH");
  EXPECT_EQ(found[1].path, "/usr/local/bin/rex-server");
  EXPECT_EQ(found[1].source, "beside this program");
  EXPECT_EQ(found[2].path, "/build/rex-server");
  EXPECT_EQ(found[2].source, "build directory");
  found = rex_server_candidates(nullptr, "", "");
  EXPECT_TRUE(found.empty());
  found = rex_server_candidates("", "/rex", "");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, "/rex-server");
  EXPECT_EQ(no_rex_server_message(rex_server_candidates("/a", "/b/rex", "")),
            "cannot find the rex-server executable to put into the container; tried:\n"
            "  /a (REX_SERVER_PATH)\n  /b/rex-server (beside this program)\n"
            "set server_path in the deployment config or REX_SERVER_PATH");
}

TEST(DockerPlan, LabelsNameTheOwnerTheDeploymentAndTheExpiry) {
  auto c = image();
  c.labels = {{"team", "x"}, {"rex.deployment", "spoofed"}};
  c.max_lifetime = Seconds(100);
  c.startup_timeout = Seconds(20);
  const std::map<std::string, std::string> owner{{"rex.managed", "1"}, {"rex.owner.pid", "7"}};
  auto l = container_labels(c, "abc123", owner, 1000);
  EXPECT_EQ(l.at("team"), "x");
  EXPECT_EQ(l.at("rex.managed"), "1");
  EXPECT_EQ(l.at("rex.owner.pid"), "7");
  EXPECT_EQ(l.at(std::string(labels::deployment)), "abc123");
  EXPECT_EQ(l.at(std::string(labels::expires)), "1180");  // 1000 + 100 + 20 + 60
  c.max_lifetime = Seconds(0);
  l = container_labels(c, "abc123", owner, 1000);
  EXPECT_EQ(l.count(std::string(labels::expires)), 0u);
}

BodyInputs inputs() {
  BodyInputs in;
  in.server_path = "/host/rex-server";
  in.socket_dir = "/tmp/rex-sock-1";
  in.token = "secret";
  in.labels = {{"rex.managed", "1"}};
  return in;
}

TEST(DockerPlanBody, PublishedPortOrUnixSocket) {
  auto c = image();
  c.port = 8123;
  json::object b = container_body(validate(c), inputs());
  EXPECT_EQ(json::serialize(b.at("Cmd")),
            R"(["--host","0.0.0.0","--port","8000","--max-lifetime","86400"])");
  EXPECT_EQ(json::serialize(b.at("HostConfig").at("PortBindings")),
            R"({"8000/tcp":[{"HostIp":"127.0.0.1","HostPort":"8123"}]})");
  EXPECT_EQ(json::serialize(b.at("HostConfig").at("Binds")),
            R"(["/host/rex-server:/.rex/rex-server:ro"])");

  c = image();
  c.network_mode = "none";
  c.max_lifetime = Seconds(0);
  BodyInputs in = inputs();
  in.publish_port = false;
  in.mount_server = false;  // uploaded later: no bind
  b = container_body(validate(c), in);
  EXPECT_EQ(json::serialize(b.at("Cmd")), R"(["--unix-socket","/.rex-run/rex.sock"])");
  EXPECT_EQ(json::serialize(b.at("HostConfig").at("Binds")), R"(["/tmp/rex-sock-1:/.rex-run"])");
  EXPECT_FALSE(b.contains("ExposedPorts"));
  EXPECT_FALSE(b.at("HostConfig").as_object().contains("PortBindings"));
}

TEST(DockerPlanBody, TokenAndLabelsWinOverCreateOptions) {
  auto c = image();
  c.env = {{"A", "1"}};
  c.create_options =
      json::parse(R"({"Env":["REX_AUTH_TOKEN=mine","B=2"],"Labels":{"rex.managed":"0","x":"y"}})")
          .as_object();
  const json::object b = container_body(validate(c), inputs());
  EXPECT_EQ(json::serialize(b.at("Env")), R"(["B=2","REX_AUTH_TOKEN=secret"])");
  EXPECT_EQ(b.at("Labels").at("rex.managed"), "1");
  EXPECT_EQ(b.at("Labels").at("x"), "y");
}

TEST(DockerPlanBody, PodmanGetsExplicitUlimits) {
  auto c = image();
  c.container_runtime = "podman";
  const json::object b = container_body(validate(c), inputs());
  EXPECT_THAT(json::serialize(b.at("HostConfig").at("Ulimits")),
              HasSubstr(R"({"Name":"nofile","Soft":20000,"Hard":20000})"));
}

TEST(DockerPlanAddress, ContainerAddressPrefersItsNetwork) {
  const auto info = json::parse(R"({"NetworkSettings":{"IPAddress":"10.0.0.9","Networks":{
      "other":{"IPAddress":"10.1.0.2"},"mine":{"IPAddress":"10.2.0.3"}}}})")
                        .as_object();
  EXPECT_EQ(container_address(info, "mine"), "10.2.0.3");
  EXPECT_EQ(container_address(info, "absent"), "10.1.0.2");
  const auto v6 =
      json::parse(
          R"({"NetworkSettings":{"Networks":{"n":{"IPAddress":"","GlobalIPv6Address":"fd00::5"}}}})")
          .as_object();
  EXPECT_EQ(container_address(v6, "n"), "[fd00::5]");
  EXPECT_EQ(container_ip_url("[fd00::5]"), "http://[fd00::5]:8000");
  const auto top = json::parse(R"({"NetworkSettings":{"IPAddress":"10.0.0.9"}})").as_object();
  EXPECT_EQ(container_address(top, "bridge"), "10.0.0.9");
  EXPECT_EQ(container_address(json::object(), "bridge"), "");
}

TEST(DockerPlanAddress, PublishedPortAndUrl) {
  const auto info = json::parse(R"({"NetworkSettings":{"Ports":{"8000/tcp":[
      {"HostIp":"127.0.0.1","HostPort":""},{"HostIp":"::1","HostPort":"32768"}]}}})")
                        .as_object();
  EXPECT_EQ(published_host_port(info), "32768");
  EXPECT_EQ(published_host_port(json::parse(R"({"NetworkSettings":{"Ports":{}}})").as_object()),
            "");
  EXPECT_EQ(published_host_port(json::object()), "");
  EXPECT_EQ(published_url("http://127.0.0.1//", "32768"), "http://127.0.0.1:32768");
  EXPECT_EQ(unix_socket_url("/tmp/rex-sock-1"), "http+unix:///tmp/rex-sock-1/rex.sock");
}

TEST(DockerPlanAddress, StoppedContainersSayTheirExitCode) {
  EXPECT_EQ(stopped_exit_code(json::parse(R"({"State":{"Running":true}})").as_object()),
            std::nullopt);
  EXPECT_EQ(stopped_exit_code(json::object()), std::nullopt);
  EXPECT_EQ(
      stopped_exit_code(json::parse(R"({"State":{"Running":false,"ExitCode":127}})").as_object()),
      "127");
  EXPECT_EQ(stopped_exit_code(json::parse(R"({"State":{"Running":false}})").as_object()), "?");
  EXPECT_EQ(exited_message("rex-1", "img:1", "127", "bash: not found"),
            "container rex-1 (img:1) exited with code 127 before its server answered; last log "
            "lines:\nbash: not found");
}

TEST(DockerPlanCleanup, ReleasesWhatExists) {
  auto c = image();
  Cleanup none = plan_cleanup(c, Resources{});
  EXPECT_FALSE(none.close_runtime || none.kill_container || none.remove_container ||
               none.remove_image || none.remove_socket_dir);

  Resources all{.open_runtime = true, .engine = true, .container = true, .socket_dir = true};
  Cleanup full = plan_cleanup(c, all);
  EXPECT_TRUE(full.close_runtime && full.kill_container && full.remove_container &&
              full.remove_socket_dir);
  EXPECT_FALSE(full.remove_image);

  c.remove_container = false;
  c.remove_images = true;
  full = plan_cleanup(c, all);
  EXPECT_TRUE(full.kill_container);
  EXPECT_FALSE(full.remove_container);
  EXPECT_TRUE(full.remove_image);

  // No container created yet: nothing to kill, but the image may still go.
  Resources early{.engine = true};
  const Cleanup before_create = plan_cleanup(c, early);
  EXPECT_FALSE(before_create.kill_container || before_create.remove_container);
  EXPECT_TRUE(before_create.remove_image);
  // No engine: nothing of the engine's.
  c.remove_images = true;
  EXPECT_FALSE(plan_cleanup(c, Resources{.container = true}).kill_container);
  EXPECT_FALSE(plan_cleanup(c, Resources{.container = true}).remove_image);
}

std::string failure_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const DeploymentStartupError& s) {
    return std::string("startup: ") + s.what();
  } catch (const DeploymentConfigError& c) {
    return std::string("config: ") + c.what();
  } catch (...) {
    return "other";
  }
}

TEST(DockerPlanCleanup, FailuresBecomeStartupErrors) {
  const auto of = [](auto error) {
    return startup_failure(std::make_exception_ptr(error), "rex-1");
  };
  EXPECT_EQ(failure_text(of(DeploymentStartupError("no image"))), "startup: no image");
  EXPECT_EQ(failure_text(of(DeploymentConfigError("docker.port"))), "config: docker.port");
  EXPECT_EQ(failure_text(of(docker::EngineError("engine down", 0, ""))), "startup: engine down");
  EXPECT_EQ(failure_text(of(std::runtime_error("disk full"))),
            "startup: docker deployment rex-1: disk full");
  EXPECT_EQ(startup_failure(std::make_exception_ptr(42), "rex-1"), nullptr);
}

}  // namespace
}  // namespace rex::detail
