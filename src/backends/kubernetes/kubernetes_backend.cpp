// A Kubernetes cluster's pods as a SandboxBackend.
#include <rex/backends/kubernetes/kubernetes_deployment.hpp>
#include <rex/core/object_fields.hpp>
#include <rex/deployment/sizes.hpp>
#include <rex/http/url.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/exec_credential.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <chrono>

namespace rex {

namespace {

namespace json = boost::json;
namespace k8s = rex::kubernetes;

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

std::string label_selector(const std::map<std::string, std::string>& labels) {
  std::string s;
  for (const auto& [k, v] : labels)
    s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v);
  return http::url_encode(s);
}

class KubernetesBackend final : public SandboxBackend {
 public:
  /// DeploymentConfigError when the kubeconfig cannot be used (named with its file and entry).
  KubernetesBackend(asio::any_io_executor executor, KubernetesDeploymentConfig settings)
      : executor_(std::move(executor)), settings_(std::move(settings)) {
    k8s::KubeconfigOptions where;
    where.path = settings_.kubeconfig;
    where.context = settings_.context;
    try {
      k8s::ClusterAccess access = k8s::load_cluster_access(where);
      if (settings_.namespace_name.empty())
        settings_.namespace_name = access.namespace_name;
      api_ = std::make_unique<k8s::ApiClient>(executor_, std::move(access));
    } catch (const k8s::KubeconfigError& e) {
      throw DeploymentConfigError(fmt::format("kubernetes: {}", e.what()));
    }
  }

  std::string_view name() const noexcept override { return "kubernetes"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    KubernetesDeploymentConfig d = settings(request);
    StartedSandbox started;
    started.working_dir = d.working_dir;
    started.own_filesystem = true;
    std::string failure;
    try {
      co_await refresh();
      KubernetesDeployment deployment(executor_, std::move(d));
      co_await deployment.start();  // deletes its pod itself when it fails
      const KubernetesHandoff handoff = deployment.release_pod();
      started.id = handoff.pod;
      started.url = handoff.url;
      started.token = handoff.token;
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty())
      throw DeploymentStartupError(fmt::format("kubernetes: {}", failure));
    co_return started;
  }

  asio::awaitable<void> destroy(std::string id) override {
    const std::string& ns = settings_.namespace_name;
    std::string failure;
    for (const auto& path : {fmt::format("/api/v1/namespaces/{}/pods/{}", ns, id),
                             fmt::format("/api/v1/namespaces/{}/secrets/{}-token", ns, id)}) {
      try {
        json::object now{{"gracePeriodSeconds", 0}};
        co_await api_->call("DELETE", path, std::move(now));
      } catch (const k8s::ApiError& e) {
        if (e.status() != 404 && failure.empty())
          failure = e.what();
      } catch (const std::exception& e) {
        if (failure.empty())
          failure = e.what();
      }
    }
    if (!failure.empty())
      throw DeploymentStartupError(
          fmt::format("kubernetes: cannot delete pod {}/{}: {}", ns, id, failure));
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    co_await refresh();
    std::vector<SandboxInfo> out;
    std::string next;
    do {
      std::string path = fmt::format("/api/v1/namespaces/{}/pods?labelSelector={}&limit=500",
                                     settings_.namespace_name, label_selector(labels));
      if (!next.empty())
        path += "&continue=" + http::url_encode(next);
      const json::value page = co_await api_->call("GET", path);
      for (const auto& pod : page.at("items").as_array()) {
        SandboxInfo s;
        s.id = field_text(pod, {"metadata", "name"});
        const json::value* meta = pod.as_object().if_contains("metadata");
        const json::value* l = meta != nullptr && meta->is_object()
                                   ? meta->get_object().if_contains("labels")
                                   : nullptr;
        if (l != nullptr && l->is_object()) {
          for (const auto& [k, v] : l->get_object()) {
            if (v.is_string())
              s.labels[std::string(k)] = std::string(v.get_string());
          }
        }
        s.running = field_text(pod, {"status", "phase"}) == "Running" &&
                    field_text(pod, {"metadata", "deletionTimestamp"}).empty();
        if (const auto t = k8s::parse_rfc3339(field_text(pod, {"metadata", "creationTimestamp"})))
          s.created_at = std::chrono::duration<double>(t->time_since_epoch()).count();
        out.push_back(std::move(s));
      }
      next = field_text(page, {"metadata", "continue"});
    } while (!next.empty());
    co_return out;
  }

  void configure_client(const std::string& url, http::ClientConfig& client) const override {
    if (!url.starts_with(api_->access().server))
      return;  // the pod's own address: nothing between the caller and the server
    http::ClientConfig tls = api_->tls_config();
    client.ca_pem = std::move(tls.ca_pem);
    client.verify_peer = tls.verify_peer;
    client.tls_server_name = std::move(tls.tls_server_name);
    client.cert_pem = std::move(tls.cert_pem);
    client.key_pem = std::move(tls.key_pem);
    client.header_source = [authorization = authorization_] {
      std::vector<std::pair<std::string, std::string>> h;
      if (!authorization->empty())
        h.emplace_back("Authorization", *authorization);
      return h;
    };
  }

 private:
  asio::awaitable<void> refresh() { *authorization_ = co_await api_->authorization(); }

  KubernetesDeploymentConfig settings(SandboxRequest& request) const {
    if (request.image.empty())
      throw DeploymentStartupError(
          fmt::format("{} names no image; the kubernetes provider needs one", request.purpose));
    if (!request.network.empty() && request.network != "default")
      throw DeploymentStartupError(
          fmt::format("{} sets network {:?}, which the kubernetes provider cannot give a pod (a "
                      "NetworkPolicy of the namespace decides a pod's network)",
                      request.purpose, request.network));
    if (!request.mounts.empty())
      throw DeploymentStartupError(fmt::format(
          "{} mounts host paths, which the kubernetes provider does not do", request.purpose));
    KubernetesDeploymentConfig d = settings_;
    d.image = std::move(request.image);
    d.env = std::move(request.env);
    d.working_dir = request.working_dir.empty() ? std::string(kContainerWorkingDir)
                                                : std::move(request.working_dir);
    json::object limits;
    if (request.memory) {
      try {
        limits["memory"] = parse_size(*request.memory, "memory");
      } catch (const std::exception& e) {
        throw DeploymentStartupError(fmt::format("{}: {}", request.purpose, e.what()));
      }
    }
    if (request.cpus)
      limits["cpu"] = fmt::format("{}m", static_cast<std::int64_t>(*request.cpus * 1000 + 0.5));
    if (!limits.empty())
      d.resources["limits"] = std::move(limits);
    for (auto& [k, v] : request.labels)
      d.labels[k] = v;
    d.max_lifetime = Seconds(request.lifetime);
    if (!request.name.empty())
      d.pod_name = dns_label_part(request.name);
    return d;
  }

  asio::any_io_executor executor_;
  KubernetesDeploymentConfig settings_;
  std::unique_ptr<k8s::ApiClient> api_;
  // The pod proxy's Authorization header as last refreshed, shared with every client made by
  // configure_client().
  std::shared_ptr<std::string> authorization_ = std::make_shared<std::string>();
};

}  // namespace

std::unique_ptr<SandboxBackend> open_kubernetes_backend(asio::any_io_executor executor,
                                                        KubernetesDeploymentConfig settings) {
  return std::make_unique<KubernetesBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
