// The providers a gateway's configuration names: local always, Docker and Podman when their
// engines can be addressed, the clouds and a cluster when configured (or when their own variables
// are set). Every provider but local is a backend of the backend table
// (rex/backends/backends.hpp) behind the one BackendProvider.
#include "gateway/providers.hpp"

#include <rex/backends/backends.hpp>
#include <rex/backends/daytona/daytona_config.hpp>
#include <rex/backends/docker/docker_config.hpp>
#include <rex/backends/e2b/e2b_config.hpp>
#include <rex/backends/fargate/fargate_config.hpp>
#include <rex/backends/kubernetes/kubernetes_config.hpp>
#include <rex/backends/modal/modal_config.hpp>
#include <rex/core/log.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/gateway/local_provider.hpp>

#include "gateway/backend_provider.hpp"

#include <cstdlib>
#include <stdexcept>

namespace rex::gateway {

namespace {

// Adds the provider `name` over the backend of `settings`; one whose backend refuses to open
// with a `Refusal` is logged and left out (anything else it throws goes on).
template <class Refusal = std::exception>
void add(Providers& made, const std::string& name, asio::any_io_executor ex,
         const std::string& gateway_id, DeploymentConfig settings) {
  const Backend* backend = find_backend(settings.type());
  if (backend == nullptr || backend->open == nullptr) {
    logging::warn("gateway: no {} provider: this rex was built without the {} backend", name,
                  settings.type());
    return;
  }
  try {
    made[name] = std::make_unique<BackendProvider>(
        backend->open(std::move(ex), std::move(settings)), gateway_id);
  } catch (const Refusal& x) {
    logging::warn("gateway: no {} provider: {}", name, x.what());
  }
}

}  // namespace

Providers make_providers(asio::any_io_executor ex, const GatewayConfig& cfg,
                         const std::filesystem::path& storage, const std::string& gateway_id,
                         std::string server_executable) {
  Providers made;
  LocalProviderConfig local;
  local.root = storage / "sandboxes";
  local.gateway_id = gateway_id;
  // The static rex-server beside this executable starts in a third of the time `rex server`
  // takes (no dynamic linking); the rex executable's own `server` otherwise.
  try {
    local.server_command = {find_rex_server("")};
  } catch (const std::exception&) {
    local.server_command = {std::move(server_executable), "server"};
  }
  made["local"] = std::make_unique<LocalProvider>(ex, std::move(local));
  for (const char* name : {"docker", "podman"}) {
    DockerDeploymentConfig docker;
    docker.container_runtime = name;
    docker.engine = docker.container_runtime == "docker" ? cfg.docker_engine : cfg.podman_engine;
    docker.startup_timeout = 120;
    add<std::invalid_argument>(made, name, ex, gateway_id, std::move(docker));
  }
  // E2B (or an E2B-compatible endpoint) when configured, or when E2B's own variable says so.
  if (cfg.e2b.enabled || std::getenv("E2B_API_KEY") != nullptr) {
    E2BDeploymentConfig e2b;
    e2b.api_key = cfg.e2b.api_key;
    e2b.api_url = cfg.e2b.api_url;
    e2b.sandbox_url = cfg.e2b.sandbox_url;
    e2b.domain = cfg.e2b.domain;
    e2b.template_server_path = cfg.e2b.template_server_path;
    add(made, "e2b", ex, gateway_id, std::move(e2b));
  }
  // Daytona when configured, or when Daytona's own variable says so.
  if (cfg.daytona.enabled || std::getenv("DAYTONA_API_KEY") != nullptr) {
    DaytonaDeploymentConfig daytona;
    daytona.api_key = cfg.daytona.api_key;
    daytona.api_url = cfg.daytona.api_url;
    daytona.target = cfg.daytona.target;
    add(made, "daytona", ex, gateway_id, std::move(daytona));
  }
  // Modal when configured, or when Modal's own variable says so.
  if (cfg.modal.enabled || std::getenv("MODAL_TOKEN_ID") != nullptr) {
    ModalDeploymentConfig modal;
    modal.token_id = cfg.modal.token_id;
    modal.token_secret = cfg.modal.token_secret;
    modal.server_url = cfg.modal.server_url;
    modal.environment = cfg.modal.environment;
    modal.app_name = cfg.modal.app_name;
    modal.ca_file = cfg.modal.ca_file;
    add(made, "modal", ex, gateway_id, std::move(modal));
  }
  if (cfg.fargate.enabled) {
    FargateDeploymentConfig fargate;
    fargate.cluster_name = cfg.fargate.cluster;
    fargate.region = cfg.fargate.region;
    fargate.profile = cfg.fargate.profile;
    fargate.server_image = cfg.fargate.server_image;
    fargate.subnet_id = cfg.fargate.subnet_id;
    fargate.security_group_id = cfg.fargate.security_group_id;
    fargate.connect = cfg.fargate.connect;
    fargate.port = cfg.fargate.port;
    fargate.runtime_timeout = 60;
    add(made, "fargate", ex, gateway_id, std::move(fargate));
  }
  if (cfg.kubernetes.enabled) {
    KubernetesDeploymentConfig k8s;
    k8s.kubeconfig = cfg.kubernetes.kubeconfig;
    k8s.context = cfg.kubernetes.context;
    k8s.namespace_name = cfg.kubernetes.namespace_name;
    k8s.server_image = cfg.kubernetes.server_image;
    k8s.image_pull_policy = cfg.kubernetes.image_pull_policy;
    k8s.connect = cfg.kubernetes.connect;
    k8s.startup_timeout = 120;
    add(made, "kubernetes", ex, gateway_id, std::move(k8s));
  }
  return made;
}

}  // namespace rex::gateway
