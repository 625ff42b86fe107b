// The kubernetes backend's entry in the backend table: a pod of a Kubernetes cluster.
#include <rex/backends/kubernetes/kubernetes_config.hpp>
#include <rex/backends/kubernetes/kubernetes_deployment.hpp>
#include <rex/backends/kubernetes/kubernetes_gc.hpp>
#include <rex/deployment/registry.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <fmt/format.h>

namespace rex::modules {

namespace {

constexpr BackendFlag flags[] = {
    common_flags::image,
    {"--port", "port", "the server's port in the pod", FlagKind::integer},
    common_flags::startup_timeout,
    common_flags::workdir,
    common_flags::env,
    {"--namespace", "namespace",
     "the namespace of the pod (default: the context's; rex gc: every namespace)"},
    {"--context", "context", "the kubeconfig context (default: the current)"},
    {"--kubeconfig", "kubeconfig",
     "kubeconfig files, ':'-separated (default: KUBECONFIG or ~/.kube/config)"},
};

void check(KubernetesDeploymentConfig& c, settings::Reader& r) {
  if (c.image.empty() && !r.defaults())
    r.fail("image", "must not be empty");
  for (const auto& [key, value] : c.resources) {
    if (key != "requests" && key != "limits" && key != "claims")
      r.fail("resources", fmt::format("unknown key \"{}\" (expected requests, limits or claims)",
                                      std::string(key)));
    if (!value.is_object() && key != "claims")
      r.fail("resources", fmt::format("{}: expected an object such as {{\"cpu\": \"500m\", "
                                      "\"memory\": \"1Gi\"}}",
                                      std::string(key)));
  }
  for (const auto& t : c.tolerations) {
    if (!t.is_object())
      r.fail("tolerations", "expected an array of objects ({\"key\", \"operator\", ...})");
  }
}

std::string describe(const DeploymentConfig& config) {
  const auto& c = config.get<KubernetesDeploymentConfig>();
  return fmt::format("kubernetes {}{}", c.image,
                     c.namespace_name.empty() ? "" : " in " + c.namespace_name);
}

// `rex gc` in the cluster the settings point at.
asio::awaitable<GcReport> gc(asio::any_io_executor executor, DeploymentConfig config,
                             GcOptions options) {
  const auto& c = config.get<KubernetesDeploymentConfig>();
  kubernetes::KubeconfigOptions where;
  where.path = c.kubeconfig;
  where.context = c.context;
  kubernetes::ApiClient api(executor, kubernetes::load_cluster_access(where));
  KubernetesGcOptions k8s;
  k8s.gc = options;
  k8s.namespace_name = c.namespace_name;  // empty: every namespace
  co_return co_await collect_kubernetes_garbage(api, k8s);
}

}  // namespace

Backend kubernetes_entry() {
  Backend b = make_backend<KubernetesDeploymentConfig, KubernetesDeployment, check>(
      "a pod of a Kubernetes cluster", flags);
  b.title = "Kubernetes";
  // A gateway's sessions work in /workspace unless their environment says otherwise.
  b.provider_defaults = R"({"startup_timeout": 120, "working_dir": "/workspace"})";
  b.describe = describe;
  b.gc = gc;
  b.open = entry::open<KubernetesDeploymentConfig, open_kubernetes_backend>;
  return b;
}

}  // namespace rex::modules
