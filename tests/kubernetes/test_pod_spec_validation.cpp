// pod_manifest's pods checked by the API server's own validation: a create with ?dryRun=All
// (nothing is created) accepts the pod with every configuration field set, and refuses a bad
// field naming it.
#include <rex/core/random.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>
#include <rex/kubernetes/pod_spec.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "kubernetes/local_cluster.hpp"
#include "support/async_test.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

namespace json = boost::json;
using namespace rex::kubernetes;
using rex::test::admin_kubeconfig;
using rex::test::run_async;
using testing::HasSubstr;

class PodValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = rex::test::no_cluster_reason(); !why.empty())
      GTEST_SKIP() << why;
    api_ = std::make_unique<ApiClient>(
        io_.get_executor(), load_cluster_access({.path = admin_kubeconfig(), .context = {}}));
  }

  // The pod as the API server would store it, without storing it.
  json::value dry_run(const json::object& pod) {
    const std::string ns(pod.at("metadata").at("namespace").as_string());
    return run_async(io_, api_->call("POST", "/api/v1/namespaces/" + ns + "/pods?dryRun=All", pod));
  }

  PodSpecConfig every_field() const {
    PodSpecConfig c;
    c.name = "rex-" + rex::random_hex(4);
    c.namespace_name = "default";
    c.image = "rex.local/busybox:1.35";
    c.image_pull_policy = "Never";
    c.server_image = "rex.local/rex-server:test";
    c.server_port = 8123;
    c.token_secret = c.name + "-token";
    c.max_lifetime = 600;
    c.labels = {{"team", "a"}};
    c.rex_labels = {{"rex.owner", "test"}, {"rex.deployment", "d1"}};
    c.env = {{"A", "1"}};
    c.resources =
        json::parse(R"({"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"memory":"128Mi"}})")
            .as_object();
    c.node_selector = {{"kubernetes.io/os", "linux"}};
    c.tolerations =
        json::parse(R"([{"key":"gpu","operator":"Exists","effect":"NoSchedule"}])").as_array();
    c.runtime_class_name = "";  // a RuntimeClass must exist; none does in the local cluster
    c.service_account = "default";
    c.image_pull_secrets = {"registry-a"};
    c.pod_overrides = json::parse(R"({"spec":{"hostname":"sandbox"}})").as_object();
    return c;
  }

  boost::asio::io_context io_;
  std::unique_ptr<ApiClient> api_;
};

TEST_F(PodValidation, EveryFieldIsAccepted) {
  const PodSpecConfig c = every_field();
  const json::value stored = dry_run(pod_manifest(c));
  EXPECT_EQ(stored.at_pointer("/metadata/name").as_string(), c.name);
  EXPECT_EQ(stored.at_pointer("/spec/activeDeadlineSeconds"), 600);
  EXPECT_EQ(stored.at_pointer("/spec/hostname"), "sandbox");
  EXPECT_EQ(stored.at_pointer("/spec/containers/0/resources/limits/memory"), "128Mi");
  try {
    run_async(io_, api_->call("GET", "/api/v1/namespaces/default/pods/" + c.name));
    ADD_FAILURE() << "the dry run created the pod";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404u);
  }
}

TEST_F(PodValidation, ABadFieldIsRefusedByName) {
  PodSpecConfig c = every_field();
  c.resources =
      json::parse(R"({"requests":{"memory":"256Mi"},"limits":{"memory":"128Mi"}})").as_object();
  try {
    dry_run(pod_manifest(c));
    ADD_FAILURE() << "a memory request above its limit was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422u);
    EXPECT_EQ(e.reason(), "Invalid");
    EXPECT_THAT(e.message(), HasSubstr("spec.containers[0].resources.requests"));
  }
  c = every_field();
  c.pod_overrides = json::parse(R"({"spec":{"restartPolicy":"Sometimes"}})").as_object();
  try {
    dry_run(pod_manifest(c));
    ADD_FAILURE() << "restartPolicy Sometimes was accepted";
  } catch (const ApiError& e) {
    EXPECT_THAT(e.message(), HasSubstr("spec.restartPolicy"));
  }
}

}  // namespace
