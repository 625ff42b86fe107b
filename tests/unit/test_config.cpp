// Deployment configs: JSON in and out, SWE-ReX compatibility, errors that name the field, loading
// a file.
#include <rex/backends/backends.hpp>
#include <rex/backends/docker/docker_config.hpp>
#include <rex/backends/dummy/dummy_config.hpp>
#include <rex/backends/remote/remote_config.hpp>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <fstream>
#include <string>
#include <string_view>

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
  EXPECT_EQ(deployment_type(parse(R"({"type":"gateway"})")), "gateway");
  EXPECT_EQ(deployment_type(parse(R"({"type":"e2b"})")), "e2b");
  EXPECT_EQ(deployment_type(parse(R"({"type":"fargate"})")), "fargate");
  EXPECT_EQ(deployment_type(parse(R"({"type":"daytona"})")), "daytona");
  EXPECT_EQ(deployment_type(parse(R"({"type":"modal"})")), "modal");
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
  const auto& d = config.get<DockerDeploymentConfig>();
  EXPECT_EQ(d.image, "sweagent/swe-agent:latest");
  EXPECT_FALSE(d.port);
  EXPECT_EQ(d.docker_args.size(), 3u);
  EXPECT_EQ(d.startup_timeout.count(), 60.0);
  EXPECT_EQ(d.pull, PullPolicy::never);
  EXPECT_TRUE(d.remove_container);
}

TEST(DeploymentConfig, SweAgentRemoteConfigLoadsUnchanged) {
  const auto config = parse(
      R"({"type":"remote","auth_token":"abc","host":"http://10.0.0.5","port":8000,"timeout":0.5})");
  const auto& r = config.get<RemoteDeploymentConfig>();
  EXPECT_EQ(r.auth_token, "abc");
  EXPECT_EQ(r.host, "http://10.0.0.5");
  EXPECT_EQ(r.port, 8000);
  EXPECT_EQ(r.timeout.count(), 0.5);
}

TEST(DeploymentConfig, PlatformMovesOutOfDockerArgs) {
  const auto a = parse(R"({"image":"x","docker_args":["--platform","linux/arm64"]})")
                     .get<DockerDeploymentConfig>();
  EXPECT_EQ(a.platform, "linux/arm64");
  const auto b = parse(R"({"image":"x","docker_args":["--platform=linux/amd64"]})")
                     .get<DockerDeploymentConfig>();
  EXPECT_EQ(b.platform, "linux/amd64");
  EXPECT_THAT(error_of(R"({"image":"x","platform":"linux/amd64",
                           "docker_args":["--platform","linux/arm64"]})"),
              HasSubstr("docker.platform"));
}

TEST(DeploymentConfig, ErrorsNameTheField) {
  EXPECT_THAT(error_of(R"({"type":"podman-in-the-sky"})"),
              HasSubstr("unknown type \"podman-in-the-sky\""));
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
  EXPECT_THAT(error_of(R"({"type":"e2b","templat":"base"})"),
              HasSubstr("e2b: unknown field \"templat\""));
  EXPECT_THAT(error_of(R"({"type":"e2b","template":""})"), HasSubstr("e2b.template"));
  EXPECT_THAT(error_of(R"({"type":"e2b","timeout":0})"), HasSubstr("e2b.timeout"));
  EXPECT_THAT(error_of(R"({"type":"e2b","server_port":70000})"), HasSubstr("e2b.server_port"));
  EXPECT_THAT(error_of(R"({"type":"e2b","template_server_path":"bin/rex-server"})"),
              HasSubstr("e2b.template_server_path: must be an absolute path"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","namespce":"x"})"),
              HasSubstr("kubernetes: unknown field \"namespce\""));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","image":""})"), HasSubstr("kubernetes.image"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","connect":"ssh"})"),
              HasSubstr("kubernetes.connect: expected one of auto, proxy, pod_ip"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","image_pull_policy":"Sometimes"})"),
              HasSubstr("kubernetes.image_pull_policy"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","resources":{"limit":{"cpu":"1"}}})"),
              HasSubstr("kubernetes.resources: unknown key \"limit\""));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","resources":{"limits":"1"}})"),
              HasSubstr("kubernetes.resources: limits: expected an object"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","tolerations":[1]})"),
              HasSubstr("kubernetes.tolerations"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","tolerations":{}})"),
              HasSubstr("kubernetes.tolerations: expected an array"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","port":0})"), HasSubstr("kubernetes.port"));
  EXPECT_THAT(error_of(R"({"type":"kubernetes","max_lifetime":-5})"),
              HasSubstr("kubernetes.max_lifetime"));
  EXPECT_THAT(error_of(R"([1,2])"), HasSubstr("expected an object"));
  EXPECT_THAT(error_of(R"({"type":3})"), HasSubstr("type: expected a string"));
}

TEST(DeploymentConfig, RoundTripsThroughJson) {
  const auto original = parse(R"({"type":"docker","image":"img","port":1234,
      "docker_args":["-e","X=1"],"pull":"always","memory":"1g","cpus":1.5,"pids_limit":100,
      "env":{"A":"b"},"mounts":["/a:/b:ro"],"labels":{"team":"x"},"network_mode":"none",
      "create_options":{"HostConfig":{"ShmSize":1024}},"max_lifetime":60,"init":false,
      "connect":"port"})");
  EXPECT_EQ(original.get<DockerDeploymentConfig>().connect, "port");
  const auto again = deployment_config_from_json(to_json(original));
  EXPECT_EQ(json::serialize(to_json(original)), json::serialize(to_json(again)));
  for (const char* text : {R"({"type":"local","working_dir":"/w","env":{"K":"v"}})",
                           R"({"type":"remote","auth_token":"t","port":9})",
                           R"({"type":"dummy","run_in_session_outputs":[{"output":"hi"}]})",
                           R"({"type":"e2b","api_key":"k","api_url":"http://a","template":"t",
                               "timeout":60,"metadata":{"m":"1"},"env":{"E":"2"},
                               "server_port":8000,"sandbox_url":"http://s","domain":"d"})",
                           R"({"type":"kubernetes","image":"python:3.12","namespace":"agents",
                               "kubeconfig":"/k","context":"c","server_image":"r/s:1",
                               "image_pull_policy":"Always","port":9000,
                               "resources":{"limits":{"memory":"1Gi"}},
                               "node_selector":{"pool":"sandboxes"},
                               "tolerations":[{"key":"k","operator":"Exists"}],
                               "runtime_class_name":"gvisor","service_account":"sa",
                               "image_pull_secrets":["regcred"],"env":{"E":"1"},
                               "labels":{"team":"x"},"working_dir":"/w",
                               "startup_timeout":30,"max_lifetime":600,
                               "pod_overrides":{"spec":{"priorityClassName":"low"}},
                               "connect":"proxy","pod_name":"my-pod"})",
                           R"({"type":"daytona","api_key":"k","target":"eu","port":9000,
                               "container_timeout":600,"runtime_timeout":30,"image":"i",
                               "api_url":"http://d","organization_id":"o","snapshot":"s",
                               "public":true,"env":{"E":"1"},"labels":{"l":"2"},
                               "sandbox_args":{"cpu":2},"server_path":"/s",
                               "startup_timeout":60})",
                           R"({"type":"modal","image":"i","startup_timeout":60,
                               "runtime_timeout":30,"deployment_timeout":600,
                               "install_pipx":false,"port":9000,"app_name":"a",
                               "environment":"e","server_url":"http://m","token_id":"t",
                               "token_secret":"s","server_path":"/s","ca_file":"/c",
                               "env":{"E":"1"},"labels":{"l":"2"},
                               "sandbox_definition":{"resources":{"milliCpu":2000}}})"}) {
    const auto c = parse(text);
    EXPECT_EQ(json::serialize(to_json(c)),
              json::serialize(to_json(deployment_config_from_json(to_json(c)))))
        << text;
  }
}

TEST(DeploymentConfig, DummyTakesOneObservationOrAList) {
  const auto one =
      parse(R"({"type":"dummy","run_in_session_outputs":{"output":"x","exit_code":0}})")
          .get<DummyDeploymentConfig>();
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

TEST(DeploymentConfigJson, SecurityProfileRoundTripsAndIsChecked) {
  const auto config = deployment_config_from_json(
      json::parse(R"({"type":"docker","image":"i","security_profile":"hardened"})"));
  EXPECT_EQ(config.get<DockerDeploymentConfig>().security_profile, "hardened");
  EXPECT_EQ(to_json(config).at("security_profile"), "hardened");
  EXPECT_THAT(
      [] {
        (void)deployment_config_from_json(
            json::parse(R"({"type":"docker","security_profile":"lax"})"));
      },
      ThrowsMessage<DeploymentConfigError>(HasSubstr("docker.security_profile")));
}

// The backend table: every backend's defaults survive a round trip through its codec, each
// field is written under its wire name, and a flag is found on exactly the backends that list it.
TEST(BackendRegistry, EveryBackendsDefaultsRoundTrip) {
  ASSERT_FALSE(backends().empty());
  for (const Backend& b : backends()) {
    SCOPED_TRACE(std::string(b.name));
    const DeploymentConfig config = parse(fmt::format(R"({{"type":"{}"}})", b.name));
    EXPECT_EQ(config.type(), b.name);
    EXPECT_EQ(find_backend(b.name), &b);
    const json::object written = to_json(config);
    EXPECT_EQ(written.at("type").as_string(), b.name);
    EXPECT_EQ(json::serialize(to_json(deployment_config_from_json(written))),
              json::serialize(written));
    for (const BackendFlag& f : b.flags) {
      EXPECT_TRUE(written.contains(f.field)) << f.flag << " sets " << f.field;
      EXPECT_EQ(&backend_flag(f.flag, b.name), &f);
    }
  }
}

TEST(BackendRegistry, WireNamesAndRules) {
  const auto e2b = to_json(parse(R"({"type":"e2b","template":"t"})"));
  EXPECT_EQ(e2b.at("template"), "t");
  EXPECT_FALSE(e2b.contains("template_id"));
  const auto k8s = to_json(parse(R"({"type":"kubernetes","namespace":"n"})"));
  EXPECT_EQ(k8s.at("namespace"), "n");
  EXPECT_EQ(to_json(parse(R"({"type":"daytona","public":true})")).at("public"), true);
  EXPECT_EQ(to_json(parse(R"({"type":"fargate","log_group":null})")).at("log_group"), "");
  EXPECT_THAT(error_of(R"({"type":"fargate","log_group":3})"),
              HasSubstr("fargate.log_group: expected a string or null, got a number"));
  EXPECT_THAT(error_of(R"({"type":"remote","port":0})"),
              HasSubstr("remote.port: 0 is out of range (1..65535)"));
  EXPECT_THAT(error_of(R"({"type":"docker","pids_limit":-2})"),
              HasSubstr("docker.pids_limit: -2 is out of range (-1..9223372036854775807)"));
  EXPECT_THAT(error_of(R"({"type":"docker","pull":"sometimes"})"),
              HasSubstr(R"(docker.pull: expected one of never, missing, always, got "sometimes")"));
  EXPECT_THAT(error_of(R"({"type":"local","working_dir":1})"),
              HasSubstr("local.working_dir: expected a string, got a number"));
  EXPECT_THAT(error_of(R"({"type":"gateway","timeout":-1})"),
              HasSubstr("gateway.timeout: -1 must be at least 0"));
}

TEST(BackendRegistry, FlagsAndHelpComeFromTheTable) {
  EXPECT_EQ(backend_flag("--pull", "docker").field, "pull");
  EXPECT_EQ(backend_flag("--keep", "docker").kind, FlagKind::off);
  EXPECT_THAT([] { (void)backend_flag("--pull", "kubernetes"); },
              ThrowsMessage<DeploymentConfigError>(
                  HasSubstr("--pull does not apply to a kubernetes deployment (only to docker)")));
  EXPECT_THAT([] { (void)backend_flag("--gpus", "docker"); },
              ThrowsMessage<DeploymentConfigError>(HasSubstr("--gpus: unknown deployment flag")));
  // Backends that say the same share one clause; every backend that has the flag is named.
  const std::string help = backend_flag_help("--image");
  EXPECT_THAT(help, HasSubstr("docker, kubernetes, fargate, daytona"));
  EXPECT_THAT(help, HasSubstr(": the image to start"));
  for (const Backend& b : backends()) {
    for (const BackendFlag& f : b.flags)
      EXPECT_THAT(backend_flag_help(f.flag), HasSubstr(std::string(b.name))) << f.flag;
  }
  EXPECT_THAT(backend_names(), HasSubstr("docker, podman"));
  const auto podman = backend_base_config("podman");
  ASSERT_TRUE(podman.has_value());
  EXPECT_EQ(podman->at("container_runtime"), "podman");
  EXPECT_FALSE(backend_base_config("podman-in-the-sky").has_value());
  EXPECT_EQ(describe_deployment(parse(R"({"type":"docker","image":"i",
      "container_runtime":"podman"})")),
            "podman i");
  EXPECT_EQ(describe_deployment(parse(R"({"type":"local"})")), "local");
}

TEST(BackendRegistry, ABackendLeftOutOfTheBuildIsNamed) {
  for (const MissingBackend& m : missing_backends()) {
    EXPECT_EQ(find_backend(m.name), nullptr);
    EXPECT_THAT(error_of(fmt::format(R"({{"type":"{}"}})", m.name)),
                HasSubstr(fmt::format("the {} backend is not in this build", m.name)));
  }
#if REX_WITH_MODAL
  EXPECT_NE(find_backend("modal"), nullptr);
#else
  EXPECT_EQ(missing_backends().size(), 1u);
#endif
}

}  // namespace
}  // namespace rex
