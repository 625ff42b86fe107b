// The local cluster the tests labelled k8s run against (scripts/k8s.sh, started by
// scripts/test.sh): where its admin kubeconfig and certificate authority are, a client of it as
// its admin, and the settings of a test sandbox on it.
#pragma once

#include <rex/backends/backends.hpp>
#include <rex/backends/kubernetes/kubernetes_config.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

namespace rex::test {

/// $REX_KUBECONFIG, else where scripts/k8s.sh writes it.
inline std::string admin_kubeconfig() {
  const char* env = std::getenv("REX_KUBECONFIG");
  return env != nullptr && *env != '\0' ? env : "/var/lib/rex-k8s/admin.kubeconfig";
}

/// The cluster's PKI folder (ca.crt, ca.key), beside the admin kubeconfig.
inline std::string cluster_pki_dir() {
  return (std::filesystem::path(admin_kubeconfig()).parent_path() / "pki").string();
}

/// Why the tests cannot run here, or empty when the cluster's kubeconfig is there.
inline std::string no_cluster_reason() {
  if (std::filesystem::exists(admin_kubeconfig()))
    return {};
  return "no cluster: " + admin_kubeconfig() +
         " does not exist (scripts/k8s.sh up starts one; scripts/test.sh does)";
}

/// A client of the cluster as its admin (system:masters).
inline std::unique_ptr<kubernetes::ApiClient> admin_api(boost::asio::any_io_executor executor) {
  kubernetes::KubeconfigOptions options;
  options.path = admin_kubeconfig();
  return std::make_unique<kubernetes::ApiClient>(std::move(executor),
                                                 kubernetes::load_cluster_access(options));
}

/// A sandbox of the bookworm test image on this cluster (imported into its containerd by the
/// k8s.images test: nothing is pulled), labelled rex.test=`test_label`.
inline KubernetesDeploymentConfig bookworm_pod(std::string test_label,
                                               double startup_timeout = 60) {
  KubernetesDeploymentConfig c;
  c.kubeconfig = admin_kubeconfig();
  c.image = "rex-test-bookworm:latest";
  c.image_pull_policy = "Never";
  c.startup_timeout = Seconds(startup_timeout);
  c.labels = {{"rex.test", std::move(test_label)}};
  return c;
}

}  // namespace rex::test
