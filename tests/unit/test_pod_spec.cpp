// pod_manifest: every configuration field where Kubernetes expects it, rex-server put in by an
// init container and reading its token from a Secret's file, rex's labels over the user's, and
// pod_overrides merged last; merge_patch as RFC 7386 says.
#include <rex/kubernetes/pod_spec.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

namespace {

namespace json = boost::json;
using namespace rex::kubernetes;
using testing::HasSubstr;
using testing::Not;

PodSpecConfig full_config() {
  PodSpecConfig c;
  c.name = "rex-abc";
  c.namespace_name = "sandboxes";
  c.image = "python:3.12";
  c.image_pull_policy = "Never";
  c.server_image = "rex.local/rex-server:1";
  c.server_port = 8123;
  c.token_secret = "rex-abc-token";
  c.max_lifetime = 90.5;
  c.labels = {{"team", "a"}, {"rex.owner", "user's"}};
  c.rex_labels = {{"rex.owner", "host-1"}, {"rex.deployment", "abc"}};
  c.env = {{"A", "1"}};
  c.resources = json::parse(R"({"requests":{"cpu":"500m"},"limits":{"memory":"1Gi"}})").as_object();
  c.node_selector = {{"disk", "ssd"}};
  c.tolerations =
      json::parse(R"([{"key":"gpu","operator":"Exists","effect":"NoSchedule"}])").as_array();
  c.runtime_class_name = "gvisor";
  c.service_account = "sandbox-runner";
  c.image_pull_secrets = {"registry-a"};
  return c;
}

TEST(PodSpec, EveryFieldLandsWhereKubernetesExpectsIt) {
  const json::value pod = pod_manifest(full_config());
  EXPECT_EQ(pod.at("kind"), "Pod");
  EXPECT_EQ(pod.at_pointer("/metadata/name"), "rex-abc");
  EXPECT_EQ(pod.at_pointer("/metadata/namespace"), "sandboxes");
  EXPECT_EQ(pod.at_pointer("/metadata/labels/team"), "a");
  EXPECT_EQ(pod.at_pointer("/metadata/labels/rex.owner"), "host-1") << "rex's labels win";
  const json::value& spec = pod.at("spec");
  EXPECT_EQ(spec.at("restartPolicy"), "Never");
  EXPECT_EQ(spec.at("activeDeadlineSeconds"), 91);
  EXPECT_EQ(spec.at_pointer("/nodeSelector/disk"), "ssd");
  EXPECT_EQ(spec.at_pointer("/tolerations/0/key"), "gpu");
  EXPECT_EQ(spec.at("runtimeClassName"), "gvisor");
  EXPECT_EQ(spec.at("serviceAccountName"), "sandbox-runner");
  EXPECT_EQ(spec.at("automountServiceAccountToken"), true);
  EXPECT_EQ(spec.at_pointer("/imagePullSecrets/0/name"), "registry-a");
  const json::value& sandbox = spec.at_pointer("/containers/0");
  EXPECT_EQ(sandbox.at("image"), "python:3.12");
  EXPECT_EQ(sandbox.at("imagePullPolicy"), "Never");
  EXPECT_EQ(sandbox.at_pointer("/env/0/name"), "A");
  EXPECT_EQ(sandbox.at_pointer("/resources/limits/memory"), "1Gi");
  EXPECT_EQ(sandbox.at_pointer("/ports/0/containerPort"), 8123);
  const std::string command(sandbox.at_pointer("/command/2").as_string());
  EXPECT_THAT(command, HasSubstr("exec /rex/rex-server --host 0.0.0.0 --port 8123"));
  EXPECT_THAT(command, HasSubstr("--max-lifetime 90.5"));
  EXPECT_THAT(command, HasSubstr("$(cat /rex-token/token)")) << "the token comes from a file";
  const json::value& install = spec.at_pointer("/initContainers/0");
  EXPECT_EQ(install.at("image"), "rex.local/rex-server:1");
  EXPECT_EQ(install.at_pointer("/command/1"), "--install");
  EXPECT_EQ(spec.at_pointer("/volumes/1/secret/secretName"), "rex-abc-token");
}

TEST(PodSpec, NoTokenOfTheServiceAccountWithoutOne) {
  PodSpecConfig c = full_config();
  c.service_account.clear();
  c.max_lifetime = 0;
  const json::value pod = pod_manifest(c);
  EXPECT_EQ(pod.at_pointer("/spec/automountServiceAccountToken"), false);
  EXPECT_EQ(pod.at("spec").as_object().if_contains("activeDeadlineSeconds"), nullptr);
  EXPECT_THAT(std::string(pod.at_pointer("/spec/containers/0/command/2").as_string()),
              Not(HasSubstr("--max-lifetime")));
}

TEST(PodSpec, OverridesAreMergedLast) {
  PodSpecConfig c = full_config();
  c.pod_overrides = json::parse(R"({"metadata":{"annotations":{"a":"b"}},
      "spec":{"hostname":"box","runtimeClassName":null,"nodeSelector":{"zone":"z1"}}})")
                        .as_object();
  const json::value pod = pod_manifest(c);
  EXPECT_EQ(pod.at_pointer("/metadata/annotations/a"), "b");
  EXPECT_EQ(pod.at_pointer("/metadata/name"), "rex-abc");
  EXPECT_EQ(pod.at_pointer("/spec/hostname"), "box");
  EXPECT_EQ(pod.at("spec").as_object().if_contains("runtimeClassName"), nullptr);
  EXPECT_EQ(pod.at_pointer("/spec/nodeSelector/zone"), "z1");
  EXPECT_EQ(pod.at_pointer("/spec/nodeSelector/disk"), "ssd");
}

TEST(MergePatch, FollowsRfc7386) {
  // The RFC's own example.
  json::value target = json::parse(
      R"({"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},
          "tags":["example","sample"],"content":"This will be unchanged"})");
  merge_patch(target, json::parse(R"({"title":"Hello!","phoneNumber":"+01-123-456-7890",
      "author":{"familyName":null},"tags":["example"]})"));
  EXPECT_EQ(target, json::parse(R"({"title":"Hello!","author":{"givenName":"John"},
      "tags":["example"],"content":"This will be unchanged","phoneNumber":"+01-123-456-7890"})"));
  json::value scalar = 1;
  merge_patch(scalar, json::parse(R"({"a":{"b":null,"c":2}})"));
  EXPECT_EQ(scalar, json::parse(R"({"a":{"c":2}})"));
}

}  // namespace
