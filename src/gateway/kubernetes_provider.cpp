#include <rex/gateway/kubernetes_provider.hpp>

#include <rex/deployment/docker_args.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/deployment/kubernetes_deployment.hpp>
#include <rex/http/url.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/exec_credential.hpp>
#include <rex/kubernetes/kubeconfig.hpp>
#include <rex/kubernetes/object_fields.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <chrono>

namespace rex::gateway {

namespace json = boost::json;
namespace k8s = rex::kubernetes;

namespace {

// A DNS label's characters: lowercase letters, digits and '-'.
std::string dns_label_part(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    out += ok ? c : '-';
  }
  while (!out.empty() && out.back() == '-')
    out.pop_back();
  return out;
}

}  // namespace

struct KubernetesProvider::Impl {
  asio::any_io_executor executor;
  KubernetesProviderConfig config;
  std::unique_ptr<k8s::ApiClient> api;
  std::string ns;
  // The pod proxy's Authorization header as last refreshed, shared with every client made by
  // configure_client().
  std::shared_ptr<std::string> authorization = std::make_shared<std::string>();

  asio::awaitable<void> refresh() { *authorization = co_await api->authorization(); }

  KubernetesDeploymentConfig deployment_config(const SandboxSpec& spec) const {
    const Environment& env = spec.environment;
    if (env.image.empty())
      throw ProviderError(fmt::format(
          "environment {} names no image; the kubernetes provider needs one", env.name));
    if (!env.network.empty() && env.network != "default")
      throw ProviderError(fmt::format(
          "environment {} sets network {:?}, which the kubernetes provider cannot give a pod (a "
          "NetworkPolicy of the namespace decides a pod's network)",
          env.name, env.network));
    if (!env.mounts.empty())
      throw ProviderError(fmt::format(
          "environment {} mounts host paths, which the kubernetes provider does not do", env.name));
    KubernetesDeploymentConfig d;
    d.image = env.image;
    d.namespace_name = ns;
    d.kubeconfig = config.kubeconfig;
    d.context = config.context;
    d.server_image = config.server_image;
    d.image_pull_policy = config.image_pull_policy;
    d.connect = config.connect;
    d.startup_timeout = config.startup_timeout;
    d.env = spec.env;
    d.working_dir = env.working_dir.empty() ? std::string(kSandboxWorkingDir) : env.working_dir;
    json::object limits;
    if (env.memory) {
      try {
        limits["memory"] = parse_size(*env.memory, "memory");
      } catch (const std::exception& e) {
        throw ProviderError(fmt::format("environment {}: {}", env.name, e.what()));
      }
    }
    if (env.cpus)
      limits["cpu"] = fmt::format("{}m", static_cast<std::int64_t>(*env.cpus * 1000 + 0.5));
    if (!limits.empty())
      d.resources["limits"] = std::move(limits);
    d.labels[std::string(labels::gateway)] = config.gateway_id;
    d.labels[std::string(labels::session)] = spec.session_id;
    d.max_lifetime = spec.max_lifetime;
    d.pod_name = fmt::format("rex-{}-{}", dns_label_part(config.gateway_id.substr(0, 12)),
                             dns_label_part(spec.session_id));
    return d;
  }
};

KubernetesProvider::KubernetesProvider(asio::any_io_executor executor,
                                       KubernetesProviderConfig config)
    : impl_(std::make_unique<Impl>()) {
  impl_->executor = std::move(executor);
  impl_->config = std::move(config);
  k8s::KubeconfigOptions where;
  where.path = impl_->config.kubeconfig;
  where.context = impl_->config.context;
  try {
    k8s::ClusterAccess access = k8s::load_cluster_access(where);
    impl_->ns =
        impl_->config.namespace_name.empty() ? access.namespace_name : impl_->config.namespace_name;
    impl_->api = std::make_unique<k8s::ApiClient>(impl_->executor, std::move(access));
  } catch (const k8s::KubeconfigError& e) {
    throw ProviderError(fmt::format("kubernetes: {}", e.what()));
  }
}

KubernetesProvider::~KubernetesProvider() = default;

std::string_view KubernetesProvider::name() const noexcept {
  return "kubernetes";
}

asio::awaitable<SandboxAddress> KubernetesProvider::create(SandboxSpec spec) {
  KubernetesDeploymentConfig settings = impl_->deployment_config(spec);
  SandboxAddress address;
  address.working_dir = settings.working_dir;
  address.scratch_dir = std::string(kSandboxScratchDir);
  std::string failure;
  try {
    co_await impl_->refresh();
    KubernetesDeployment deployment(impl_->executor, std::move(settings));
    co_await deployment.start();  // deletes its pod itself when it fails
    const KubernetesHandoff handoff = deployment.release_pod();
    address.sandbox_id = handoff.pod;
    address.url = handoff.url;
    address.token = handoff.token;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(fmt::format("kubernetes: {}", failure));
  co_return address;
}

asio::awaitable<void> KubernetesProvider::destroy(std::string sandbox_id) {
  std::string failure;
  for (const auto& path :
       {fmt::format("/api/v1/namespaces/{}/pods/{}", impl_->ns, sandbox_id),
        fmt::format("/api/v1/namespaces/{}/secrets/{}-token", impl_->ns, sandbox_id)}) {
    try {
      json::object now{{"gracePeriodSeconds", 0}};
      co_await impl_->api->call("DELETE", path, std::move(now));
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404 && failure.empty())
        failure = e.what();
    } catch (const std::exception& e) {
      if (failure.empty())
        failure = e.what();
    }
  }
  if (!failure.empty())
    throw ProviderError(
        fmt::format("kubernetes: cannot delete pod {}/{}: {}", impl_->ns, sandbox_id, failure));
}

asio::awaitable<std::vector<SandboxListing>> KubernetesProvider::list() {
  co_await impl_->refresh();
  std::vector<SandboxListing> out;
  std::string next;
  do {
    std::string path = fmt::format("/api/v1/namespaces/{}/pods?labelSelector={}%3D{}&limit=500",
                                   impl_->ns, labels::gateway, impl_->config.gateway_id);
    if (!next.empty())
      path += "&continue=" + http::url_encode(next);
    const json::value page = co_await impl_->api->call("GET", path);
    for (const auto& pod : page.at("items").as_array()) {
      SandboxListing s;
      s.sandbox_id = k8s::field_text(pod, {"metadata", "name"});
      s.session_id = k8s::field_text(pod, {"metadata", "labels", labels::session});
      s.running = k8s::field_text(pod, {"status", "phase"}) == "Running" &&
                  k8s::field_text(pod, {"metadata", "deletionTimestamp"}).empty();
      if (const auto t =
              k8s::parse_rfc3339(k8s::field_text(pod, {"metadata", "creationTimestamp"})))
        s.created_at = std::chrono::duration<double>(t->time_since_epoch()).count();
      out.push_back(std::move(s));
    }
    next = k8s::field_text(page, {"metadata", "continue"});
  } while (!next.empty());
  co_return out;
}

void KubernetesProvider::configure_client(const std::string& url,
                                          http::ClientConfig& client) const {
  if (!url.starts_with(impl_->api->access().server))
    return;  // the pod's own address: nothing between the gateway and the server
  http::ClientConfig tls = impl_->api->tls_config();
  client.ca_pem = std::move(tls.ca_pem);
  client.verify_peer = tls.verify_peer;
  client.tls_server_name = std::move(tls.tls_server_name);
  client.cert_pem = std::move(tls.cert_pem);
  client.key_pem = std::move(tls.key_pem);
  client.header_source = [authorization = impl_->authorization] {
    std::vector<std::pair<std::string, std::string>> h;
    if (!authorization->empty())
      h.emplace_back("Authorization", *authorization);
    return h;
  };
}

}  // namespace rex::gateway
