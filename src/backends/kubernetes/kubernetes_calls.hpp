// The kubernetes module's backend (kubernetes_backend.cpp) and what it calls of the pod's start
// (kubernetes_deployment.cpp). Internal to the module.
#pragma once

#include <rex/backends/kubernetes/kubernetes_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/kubernetes/api_client.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rex {

/// DeploymentConfigError for settings that cannot work (a pod name, connect, port).
void check_kubernetes_config(const KubernetesDeploymentConfig& config);

/// A pod of `config` (its Secret made its dependent) whose rex-server answers
/// (kubernetes_deployment.hpp), named rex-<deployment_id> unless config.pod_name names it, told
/// of each stage through `progress`. DeploymentStartupError with the kubelet's reason and the
/// container's last log lines; what the start made is deleted first.
asio::awaitable<StartedSandbox> create_kubernetes_pod(asio::any_io_executor executor,
                                                      KubernetesDeploymentConfig config,
                                                      std::string deployment_id,
                                                      SandboxProgress progress);

namespace detail {

/// The pods of the cluster and namespace of `settings` as a SandboxBackend; a sandbox's id is
/// its pod's name.
class KubernetesBackend final : public SandboxBackend {
 public:
  /// `cluster_now`: the kubeconfig is read here (DeploymentConfigError naming its file and
  /// entry), else at the first call (DeploymentStartupError then).
  KubernetesBackend(asio::any_io_executor executor, KubernetesDeploymentConfig settings,
                    bool cluster_now);

  std::string_view name() const noexcept override { return "kubernetes"; }
  asio::awaitable<StartedSandbox> create(SandboxRequest request) override;
  /// Deletes the pod (grace period 0) and waits until it is gone, then its Secret.
  asio::awaitable<void> destroy(std::string id) override;
  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override;
  /// Gone, ended (evicted, OOM-killed, past its deadline), being deleted, or its node lost;
  /// nothing when the API server cannot be asked.
  asio::awaitable<std::optional<std::string>> lost(std::string id) override;
  asio::awaitable<void> refresh_client(std::string url) override;
  bool renew_client(const std::string& url) override;
  void configure_client(const std::string& url, http::ClientConfig& client) const override;

  /// The namespace of the pods (the kubeconfig context's unless the settings name one); empty
  /// until the kubeconfig was read.
  const std::string& namespace_name() const noexcept { return settings_.namespace_name; }
  /// True when `url` is the API server's pod proxy.
  bool through_proxy(const std::string& url) const noexcept;

 private:
  kubernetes::ApiClient& api();
  KubernetesDeploymentConfig settings_for(SandboxRequest& request) const;

  asio::any_io_executor executor_;
  KubernetesDeploymentConfig settings_;
  std::unique_ptr<kubernetes::ApiClient> api_;
  // The pod proxy's Authorization header as last refreshed, shared with every client made by
  // configure_client().
  std::shared_ptr<std::string> authorization_ = std::make_shared<std::string>();
};

}  // namespace detail

}  // namespace rex
