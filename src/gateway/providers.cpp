// The providers a gateway's configuration names: local always, Docker and Podman when their
// engines can be addressed, the clouds when configured (or when their own variables are set).
#include "gateway/providers.hpp"

#include <rex/core/log.hpp>
#include <rex/deployment/docker_deployment.hpp>
#include <rex/gateway/daytona_provider.hpp>
#include <rex/gateway/docker_provider.hpp>
#include <rex/gateway/e2b_provider.hpp>
#include <rex/gateway/fargate_provider.hpp>
#include <rex/gateway/kubernetes_provider.hpp>
#include <rex/gateway/local_provider.hpp>
#include <rex/gateway/modal_provider.hpp>

#include <cstdlib>
#include <stdexcept>

namespace rex::gateway {

std::map<std::string, std::unique_ptr<Provider>, std::less<>> make_providers(
    asio::any_io_executor ex, const GatewayConfig& cfg, const std::filesystem::path& storage,
    const std::string& gateway_id, std::string server_executable) {
  std::map<std::string, std::unique_ptr<Provider>, std::less<>> made;
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
    DockerProviderConfig docker;
    docker.name = name;
    docker.gateway_id = gateway_id;
    docker.engine = docker.name == "docker" ? cfg.docker_engine : cfg.podman_engine;
    try {
      made[name] = std::make_unique<DockerProvider>(ex, std::move(docker));
    } catch (const std::invalid_argument& x) {
      logging::warn("gateway: no {} provider: {}", name, x.what());
    }
  }
  // E2B (or an E2B-compatible endpoint) when configured, or when E2B's own variable says so.
  if (cfg.e2b.enabled || std::getenv("E2B_API_KEY") != nullptr) {
    E2BProviderConfig e2b;
    e2b.gateway_id = gateway_id;
    e2b.api_key = cfg.e2b.api_key;
    e2b.api_url = cfg.e2b.api_url;
    e2b.sandbox_url = cfg.e2b.sandbox_url;
    e2b.domain = cfg.e2b.domain;
    e2b.template_server_path = cfg.e2b.template_server_path;
    try {
      made["e2b"] = std::make_unique<E2BProvider>(ex, std::move(e2b));
    } catch (const std::exception& x) {
      logging::warn("gateway: no e2b provider: {}", x.what());
    }
  }
  // Daytona when configured, or when Daytona's own variable says so.
  if (cfg.daytona.enabled || std::getenv("DAYTONA_API_KEY") != nullptr) {
    DaytonaProviderConfig daytona;
    daytona.gateway_id = gateway_id;
    daytona.api_key = cfg.daytona.api_key;
    daytona.api_url = cfg.daytona.api_url;
    daytona.target = cfg.daytona.target;
    try {
      made["daytona"] = std::make_unique<DaytonaProvider>(ex, std::move(daytona));
    } catch (const std::exception& x) {
      logging::warn("gateway: no daytona provider: {}", x.what());
    }
  }
  // Modal when configured, or when Modal's own variable says so.
  if (cfg.modal.enabled || std::getenv("MODAL_TOKEN_ID") != nullptr) {
    ModalProviderConfig modal;
    modal.gateway_id = gateway_id;
    modal.token_id = cfg.modal.token_id;
    modal.token_secret = cfg.modal.token_secret;
    modal.server_url = cfg.modal.server_url;
    modal.environment = cfg.modal.environment;
    modal.app_name = cfg.modal.app_name;
    modal.ca_file = cfg.modal.ca_file;
    try {
      made["modal"] = std::make_unique<ModalProvider>(ex, std::move(modal));
    } catch (const std::exception& x) {
      logging::warn("gateway: no modal provider: {}", x.what());
    }
  }
  if (cfg.fargate.enabled) {
    FargateProviderConfig fargate;
    fargate.gateway_id = gateway_id;
    fargate.cluster = cfg.fargate.cluster;
    fargate.region = cfg.fargate.region;
    fargate.profile = cfg.fargate.profile;
    fargate.server_image = cfg.fargate.server_image;
    fargate.subnet_id = cfg.fargate.subnet_id;
    fargate.security_group_id = cfg.fargate.security_group_id;
    fargate.connect = cfg.fargate.connect;
    fargate.port = cfg.fargate.port;
    try {
      made["fargate"] = std::make_unique<FargateProvider>(ex, std::move(fargate));
    } catch (const std::exception& x) {
      logging::warn("gateway: no fargate provider: {}", x.what());
    }
  }
  if (cfg.kubernetes.enabled) {
    KubernetesProviderConfig k8s;
    k8s.gateway_id = gateway_id;
    k8s.kubeconfig = cfg.kubernetes.kubeconfig;
    k8s.context = cfg.kubernetes.context;
    k8s.namespace_name = cfg.kubernetes.namespace_name;
    k8s.server_image = cfg.kubernetes.server_image;
    k8s.image_pull_policy = cfg.kubernetes.image_pull_policy;
    k8s.connect = cfg.kubernetes.connect;
    try {
      made["kubernetes"] = std::make_unique<KubernetesProvider>(ex, std::move(k8s));
    } catch (const std::exception& x) {
      logging::warn("gateway: no kubernetes provider: {}", x.what());
    }
  }
  return made;
}

}  // namespace rex::gateway
