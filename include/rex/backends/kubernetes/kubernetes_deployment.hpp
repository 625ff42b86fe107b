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
//   its node lost) throws SandboxLostError naming the pod and the reason; is_alive() answers
//   false with it.
// - stop() deletes the pod with grace period 0 and waits until it is gone, and deletes the
//   Secret. A failed start() does the same. Destroying a started deployment without stop()
//   starts the deletion in the background; `rex gc --kubernetes` removes what a killed process
//   left behind, by label.
#pragma once

#include <rex/backends/kubernetes/kubernetes_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/http/client_errors.hpp>

#include <memory>
#include <string>

namespace rex {

namespace detail {
class PodRuntime;
}

/// A call into a sandbox failed, and its pod has ended. extra_info: "pod", "reason".
class SandboxLostError : public http::ConnectionError {
 public:
  using http::ConnectionError::ConnectionError;
};

/// What reaching a started pod takes, for a process that keeps it beyond the deployment's life
/// (a gateway records it in its database).
struct KubernetesHandoff {
  std::string namespace_name;
  std::string pod;
  std::string url;             // the server's base URL
  std::string token;           // its X-API-Key
  bool through_proxy = false;  // the URL is the API server's pod proxy: send its credentials
};

class KubernetesDeployment final : public Deployment {
 public:
  /// DeploymentConfigError for settings that cannot work (a bad pod name, connect value, ...),
  /// before anything is started.
  KubernetesDeployment(asio::any_io_executor executor, KubernetesDeploymentConfig config);
  ~KubernetesDeployment() override;

  asio::awaitable<void> start() override;
  asio::awaitable<void> stop() override;
  asio::awaitable<IsAliveResponse> is_alive() override;
  Runtime& runtime() override;
  bool started() const noexcept override;

  const KubernetesDeploymentConfig& config() const noexcept;
  /// A random id, also in the pod's name and labels.
  const std::string& deployment_id() const noexcept;
  /// The pod's name and namespace (the namespace once start() resolved it).
  const std::string& pod_name() const noexcept;
  const std::string& namespace_name() const noexcept;
  /// The server's base URL (the pod proxy's or the pod's address); empty until started.
  const std::string& url() const noexcept;
  /// True when the server is reached through the API server's pod proxy.
  bool through_proxy() const noexcept;

  /// Hands the started pod over to the caller, who then owns its deletion (its Secret goes with
  /// it): the deployment forgets it, so neither stop() nor its destruction deletes it, and
  /// runtime() is no longer available. DeploymentNotStartedError unless started.
  KubernetesHandoff release_pod();

 private:
  friend class detail::PodRuntime;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_kubernetes_backend(asio::any_io_executor executor,
                                                        KubernetesDeploymentConfig settings);

}  // namespace rex
