// The runtime conformance suite (tests/conformance) through KubernetesDeployment: a fresh pod of
// the bookworm test image per test on the local cluster, reached at the pod's address and through
// the API server's pod proxy. The pod's files and processes are not this process's, so the suite
// makes its runtime-side paths and checks through the runtime.
#include <rex/deployment/kubernetes_deployment.hpp>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rex::test
