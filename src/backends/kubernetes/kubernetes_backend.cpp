// A Kubernetes cluster's pods as a SandboxBackend.
#include <rex/backends/kubernetes/kubernetes_deployment.hpp>
#include <rex/core/object_fields.hpp>
#include <rex/deployment/sizes.hpp>
#include <rex/http/url.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/exec_credential.hpp>
#include <rex/kubernetes/kubeconfig.hpp>
#include <rex/kubernetes/pod_watch.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <chrono>

#include "backends/kubernetes/kubernetes_calls.hpp"
#include "backends/kubernetes/pod_status.hpp"
#include "deployment/hand_over.hpp"

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

constexpr auto kDestroyWait = std::chrono::seconds(30);      // destroy() waits this long
constexpr auto kLostCheckTimeout = std::chrono::seconds(5);  // lost(): the pod's status

}  // namespace

namespace detail {

KubernetesBackend::KubernetesBackend(asio::any_io_executor executor,
                                     KubernetesDeploymentConfig settings, bool cluster_now)
    : executor_(std::move(executor)), settings_(std::move(settings)) {
  check_kubernetes_config(settings_);
  if (cluster_now)
    api();
}

k8s::ApiClient& KubernetesBackend::api() {
  if (api_)
    return *api_;
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
  return *api_;
}

bool KubernetesBackend::through_proxy(const std::string& url) const noexcept {
  return api_ && url.starts_with(api_->access().server);
}

asio::awaitable<StartedSandbox> KubernetesBackend::create(SandboxRequest request) {
  std::string failure;
  try {
    KubernetesDeploymentConfig d = settings_for(request);
    auto refreshing = refresh_client(api().access().server);
    co_await std::move(refreshing);
    auto creating = create_kubernetes_pod(executor_, std::move(d), std::move(request.deployment_id),
                                          std::move(request.progress));
    co_return co_await std::move(creating);  // it deletes what it made when it fails
  } catch (const std::exception& e) {
    failure = e.what();
  }
  throw DeploymentStartupError(failure.starts_with("kubernetes") ? failure
                                                                 : "kubernetes: " + failure);
}

asio::awaitable<void> KubernetesBackend::destroy(std::string id) {
  std::string failure;
  std::string ns;
  try {
    k8s::ApiClient& cluster = api();
    ns = settings_.namespace_name;
    const std::string pod_path = fmt::format("/api/v1/namespaces/{}/pods/{}", ns, id);
    bool gone = false;
    std::string uid;
    try {
      json::object now{{"gracePeriodSeconds", 0}, {"propagationPolicy", "Background"}};
      const json::value deleting = co_await cluster.call("DELETE", pod_path, std::move(now));
      uid = field_text(deleting, {"metadata", "uid"});
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404)
        throw;
      gone = true;
    }
    // Gone at once when the kubelet had nothing left to stop; else its DELETED event is
    // awaited, watched from the state read after the delete.
    if (!gone) {
      std::string rv;
      try {
        const json::value now = co_await cluster.call("GET", pod_path);
        gone = !uid.empty() && field_text(now, {"metadata", "uid"}) != uid;
        rv = field_text(now, {"metadata", "resourceVersion"});
      } catch (const k8s::ApiError& e) {
        if (e.status() != 404)
          throw;
        gone = true;
      }
      if (!gone) {
        auto is_gone = [&uid](const json::object& object, bool deleted) {
          return deleted || field_text(object, {"metadata", "uid"}) != uid;
        };
        gone = co_await k8s::watch_pod(cluster, ns, id, rv,
                                       std::chrono::steady_clock::now() + kDestroyWait, is_gone);
      }
      if (!gone)
        failure = fmt::format("it was still there {} s after its deletion", kDestroyWait.count());
    }
    // The cluster deletes the Secret with its pod; a start cut short may have left it alone.
    try {
      co_await cluster.call("DELETE",
                            fmt::format("/api/v1/namespaces/{}/secrets/{}-token", ns, id));
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404 && failure.empty())
        failure = e.what();
    }
  } catch (const std::exception& e) {
    if (failure.empty())
      failure = e.what();
  }
  if (!failure.empty())
    throw DeploymentStartupError(
        fmt::format("kubernetes: cannot delete pod {}/{}: {}", ns, id, failure));
}

asio::awaitable<std::optional<std::string>> KubernetesBackend::lost(std::string id) {
  k8s::ApiClient* cluster = nullptr;
  try {
    cluster = &api();
  } catch (const std::exception&) {
    co_return std::nullopt;
  }
  const std::string where = fmt::format("pod {}/{}", settings_.namespace_name, id);
  http::ClientRequest request;
  request.target = fmt::format("/api/v1/namespaces/{}/pods/{}", settings_.namespace_name, id);
  request.headers.emplace_back("Accept", "application/json");
  request.timeout = kLostCheckTimeout;
  http::ClientResponse response;
  try {
    response = co_await cluster->request(std::move(request));
  } catch (const std::exception&) {
    co_return std::nullopt;  // the API server is out of reach: nothing to say about the pod
  }
  if (response.status == 404)
    co_return where + ": the pod no longer exists (it was deleted)";
  if (response.status != 200)
    co_return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(response.body, ec);
  if (ec || !v.is_object())
    co_return std::nullopt;
  const PodState st = assess_pod(v.get_object());
  if (st.progress == PodProgress::ended)
    co_return fmt::format("{}: {}", where, st.summary);
  if (st.deleting)
    co_return where + ": the pod is being deleted";
  // The node stopped reporting: the node controller marks the pod's Ready condition Unknown.
  const json::value* status = v.get_object().if_contains("status");
  const json::value* conditions = status != nullptr && status->is_object()
                                      ? status->get_object().if_contains("conditions")
                                      : nullptr;
  if (conditions != nullptr && conditions->is_array()) {
    for (const auto& c : conditions->get_array()) {
      if (field_text(c, {"type"}) != "Ready" || field_text(c, {"status"}) != "Unknown")
        continue;
      const std::string reason = field_text(c, {"reason"});
      co_return fmt::format("{}: its node {} stopped reporting ({})", where, st.node,
                            reason.empty() ? "NodeLost" : reason);
    }
  }
  co_return std::nullopt;
}

asio::awaitable<void> KubernetesBackend::refresh_client(std::string url) {
  if (through_proxy(url))
    *authorization_ = co_await api_->authorization();
}

bool KubernetesBackend::renew_client(const std::string& url) {
  if (!through_proxy(url) || !api_->access().exec)
    return false;
  api_->renew_credentials();  // an exec plugin's token revoked early
  return true;
}

void KubernetesBackend::configure_client(const std::string& url, http::ClientConfig& client) const {
  if (!through_proxy(url))
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
  // The pod proxy cuts an answer that starts before it has read the client's whole body: see
  // ClientConfig::chunked_request_bodies.
  client.chunked_request_bodies = true;
}

asio::awaitable<std::vector<SandboxInfo>> KubernetesBackend::list(
    std::map<std::string, std::string> labels) {
  k8s::ApiClient& cluster = api();
  std::vector<SandboxInfo> out;
  std::string next;
  do {
    std::string path = fmt::format("/api/v1/namespaces/{}/pods?labelSelector={}&limit=500",
                                   settings_.namespace_name, label_selector(labels));
    if (!next.empty())
      path += "&continue=" + http::url_encode(next);
    const json::value page = co_await cluster.call("GET", path);
    for (const auto& pod : page.at("items").as_array()) {
      SandboxInfo s;
      s.id = field_text(pod, {"metadata", "name"});
      const json::value* meta = pod.as_object().if_contains("metadata");
      const json::value* l =
          meta != nullptr && meta->is_object() ? meta->get_object().if_contains("labels") : nullptr;
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

KubernetesDeploymentConfig KubernetesBackend::settings_for(SandboxRequest& request) const {
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
  // The request over the settings, where it sets a field.
  KubernetesDeploymentConfig d = settings_;
  detail::lay_request_over(d, request);
  if (!request.working_dir.empty())
    d.working_dir = std::move(request.working_dir);
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
  if (request.lifetime.count() > 0)
    d.max_lifetime = request.lifetime;
  if (!request.name.empty())
    d.pod_name = dns_label_part(request.name);
  return d;
}

}  // namespace detail

std::unique_ptr<SandboxBackend> open_kubernetes_backend(asio::any_io_executor executor,
                                                        KubernetesDeploymentConfig settings) {
  return std::make_unique<detail::KubernetesBackend>(std::move(executor), std::move(settings),
                                                     true);
}

}  // namespace rex
