// KubernetesDeployment: a pod per sandbox on a Kubernetes cluster, with rex-server put into the
// user's image by an init container, reached by a RemoteRuntime (docs/kubernetes.md).
//
// - The cluster is found as kubectl finds it (rex/kubernetes/kubeconfig.hpp): config.kubeconfig
//   or $KUBECONFIG or ~/.kube/config, a context, or the service account of the pod this runs in.
// - start(): a Secret with a fresh token for the server, then the pod (rex/kubernetes/
//   pod_spec.hpp) with rex's labels (owner process, deployment id, expiry), then the Secret is
//   made the pod's dependent so that the cluster deletes it with the pod. The pod is watched,
//   not polled, until its sandbox container runs; a pod that cannot start (an image that cannot
//   be pulled, a container that cannot be created or exits) fails start() at once with the
//   reason the kubelet gave and the container's last log lines, and one that stays unscheduled
//   fails at startup_timeout with the scheduler's message. Progress goes to the hooks:
//   creating, scheduled, initialising, starting, waiting for the server, ready.
// - Reaching the server: through the API server's pod proxy (/api/v1/namespaces/NS/pods/
//   NAME:PORT/proxy/...) with the kubeconfig's credentials, or at the pod's address when this
//   process can route there (config.connect). Keep-alive, retries and streamed output work
//   through both.
// - A call that fails while the pod has ended (evicted, OOM-killed, deleted, past its deadline,
//   its node lost) throws SandboxLostError (rex/deployment/backend.hpp) naming the pod and the
//   reason; is_alive() answers false with it.
// - stop() deletes the pod with grace period 0 and waits until it is gone, and deletes the
//   Secret. A failed start() does the same. Destroying a started deployment without stop()
//   starts the deletion in the background; `rex gc --kubernetes` removes what a killed process
//   left behind, by label. The lifecycle is SandboxDeployment's over this backend; the calls
//   are the backend's create(), destroy() and lost().
#pragma once

#include <rex/backends/kubernetes/kubernetes_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/sandbox_deployment.hpp>

#include <memory>
#include <string>

namespace rex {

namespace detail {
class KubernetesBackend;
}

/// The Deployment over this backend's SandboxBackend (rex/deployment/sandbox_deployment.hpp) with
/// `config` as its settings; its sandbox id is the pod's name.
class KubernetesDeployment final : public SandboxDeployment {
 public:
  /// DeploymentConfigError for settings that cannot work (a bad pod name, connect value, ...),
  /// before anything is started; a kubeconfig is read by start().
  KubernetesDeployment(asio::any_io_executor executor, KubernetesDeploymentConfig config);

  /// The settings, the pod's name filled in.
  const KubernetesDeploymentConfig& config() const noexcept { return config_; }
  /// The pod's name: config.pod_name, else rex-<deployment id>.
  const std::string& pod_name() const noexcept { return config_.pod_name; }
  /// The pods' namespace, once start() read the kubeconfig.
  const std::string& namespace_name() const noexcept;
  /// True when the server is reached through the API server's pod proxy.
  bool through_proxy() const noexcept;

 private:
  KubernetesDeployment(asio::any_io_executor executor, KubernetesDeploymentConfig config,
                       std::string id);
  const detail::KubernetesBackend& cluster() const noexcept;

  KubernetesDeploymentConfig config_;
};

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_kubernetes_backend(asio::any_io_executor executor,
                                                        KubernetesDeploymentConfig settings);

}  // namespace rex
