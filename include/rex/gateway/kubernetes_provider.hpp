// KubernetesProvider: sandboxes as pods of a Kubernetes cluster. Each sandbox is a
// KubernetesDeployment started from the environment's image and settings and then handed over:
// the gateway's database keeps how to reach it, so it outlives a gateway crash and is adopted on
// the next start.
//
// A pod carries the labels rex.gateway (this gateway's id) and rex.session (the session's id)
// beside KubernetesDeployment's own; list() finds this gateway's pods by the first and nothing
// else, so `rex gc --kubernetes` and other gateways leave them alone until they expire. Its name,
// rex-<gateway>-<session>, makes a second pod for one session impossible. The pod ends itself at
// the sandbox's hard deadline (activeDeadlineSeconds and rex-server's --max-lifetime).
//
// The gateway reaches a pod at its address when it runs in the cluster or on a node, else
// through the API server's pod proxy with the kubeconfig's credentials (configure_client()),
// which list() keeps current on every drift check.
//
// Environments: `image` (required), `memory` and `cpus` (the container's limits), `env`,
// `working_dir` (default /workspace). `network` and `mounts` have no meaning for a pod here and
// are refused with a message saying so.
//
// Threading: call every member from the io_context given at construction.
#pragma once

#include <rex/gateway/provider.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex::gateway {

struct KubernetesProviderConfig {
  std::string gateway_id;      // on every pod's rex.gateway label
  std::string kubeconfig;      // files separated by ':'; empty: as kubectl finds it
  std::string context;         // empty: the current context
  std::string namespace_name;  // empty: the context's
  std::string server_image;    // empty: KubernetesDeployment's default
  std::string image_pull_policy = "IfNotPresent";
  std::string connect = "auto";  // auto | proxy | pod_ip
  double startup_timeout = 120;  // seconds from create to the server's first answer
};

class KubernetesProvider final : public Provider {
 public:
  /// ProviderError when the kubeconfig cannot be used (named with its file and entry).
  KubernetesProvider(asio::any_io_executor executor, KubernetesProviderConfig config);
  ~KubernetesProvider() override;

  std::string_view name() const noexcept override;
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;
  void configure_client(const std::string& url, http::ClientConfig& client) const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
