// The runtime conformance suite (tests/conformance) through KubernetesDeployment: a fresh pod of
// the bookworm test image per test on the local cluster, reached at the pod's address and through
// the API server's pod proxy. The pod's files and processes are not this process's, so the suite
// makes its runtime-side paths and checks through the runtime.
#include <rex/backends/kubernetes/kubernetes_deployment.hpp>

#include <gtest/gtest.h>

#include "conformance/backend_conformance.hpp"
#include "conformance/conformance.hpp"
#include "kubernetes/local_cluster.hpp"
#include "support/async_test.hpp"
#include "support/deployed_runtime.hpp"

namespace rex::test {
namespace {

using DeployedPod = DeployedRuntime<KubernetesDeployment>;

KubernetesDeploymentConfig bookworm(std::string connect) {
  KubernetesDeploymentConfig c = bookworm_pod("conformance");
  c.connect = std::move(connect);
  return c;
}

const RuntimeFactory kPodIp{"KubernetesPodIp",
                            [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                              return std::make_unique<DeployedPod>(io, bookworm("pod_ip"));
                            },
                            false};

const RuntimeFactory kProxy{"KubernetesProxy",
                            [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                              return std::make_unique<DeployedPod>(io, bookworm("proxy"));
                            },
                            false};

INSTANTIATE_TEST_SUITE_P(Kubernetes, RuntimeConformance, ::testing::Values(kPodIp, kProxy),
                         [](const auto& info) { return info.param.name; });

// The backend conformance suite on the local cluster: shared with the other k8s tests, so `rex gc
// --all` runs as a dry run only.
BackendCase cluster_backend() {
  BackendCase c;
  c.name = "Kubernetes";
  c.settings = [] {
    KubernetesDeploymentConfig k = bookworm_pod("backend-conformance");
    return DeploymentConfig(std::move(k));
  };
  c.request.image = "rex-test-bookworm:latest";
  c.failing.image = "rex-test-no-such-image:none";  // the pull policy is Never
  c.failing_says = "ErrImageNeverPull";
  c.collects_all = false;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Kubernetes, BackendConformance, ::testing::Values(cluster_backend()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Kubernetes, BackendGcConformance, ::testing::Values(cluster_backend()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
