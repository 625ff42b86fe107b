// KubernetesDeployment: Secret, pod, watch, route, readiness, teardown (see the header). The pod's
// object is kubernetes/pod_spec.hpp's; what its status means is pod_status.hpp's.
#include <rex/backends/kubernetes/kubernetes_deployment.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/deployment/server_binary.hpp>

#include <rex/core/object_fields.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/timeout.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>
#include <rex/kubernetes/pod_spec.hpp>
#include <rex/kubernetes/pod_watch.hpp>
#include <rex/runtime/remote_runtime.hpp>
#include <rex/version.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <functional>

#include "backends/kubernetes/kubernetes_calls.hpp"
#include "backends/kubernetes/pod_status.hpp"
#include "core/clock.hpp"
#include "deployment/hand_over.hpp"
#include "deployment/local_addresses.hpp"

namespace rex {

namespace json = boost::json;
namespace k8s = kubernetes;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kDeleteWait = std::chrono::seconds(30);       // stop() waits this long for the pod
constexpr auto kStatusCheckEvery = std::chrono::seconds(1);  // while the server starts

// A DNS-1123 subdomain (what a pod's name must be): lowercase letters, digits, '-' and '.',
// starting and ending with a letter or digit, at most 253 characters.
bool valid_object_name(const std::string& name) {
  if (name.empty() || name.size() > 253)
    return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back()))
    return false;
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '.')
      return false;
  }
  return true;
}

// The credentials a client through the pod proxy sends, refreshed before each call.
struct ProxyCredentials {
  std::string authorization;
};

struct PodStart {
  asio::any_io_executor executor;
  KubernetesDeploymentConfig config;
  std::string id;  // the deployment's, in the pod's name and labels
  std::string token = random_hex(16);
  std::string pod;
  std::string secret;
  std::string ns;
  std::shared_ptr<k8s::ApiClient> api;
  bool pod_created = false;
  bool secret_created = false;
  std::string pod_uid;
  std::string url;
  bool proxy = false;
  std::shared_ptr<ProxyCredentials> credentials = std::make_shared<ProxyCredentials>();
  std::unique_ptr<RemoteRuntime> remote;
  std::function<void(DeploymentStage, std::string)> report;  // told each stage of the start
  std::string last_summary;

  void emit(DeploymentStage stage, std::string message) const {
    if (report)
      report(stage, std::move(message));
  }

  // The headers of a client through the pod proxy: the credentials as last refreshed.
  std::function<std::vector<std::pair<std::string, std::string>>()> proxy_headers() const {
    return [creds = credentials] {
      std::vector<std::pair<std::string, std::string>> h;
      if (!creds->authorization.empty())
        h.emplace_back("Authorization", creds->authorization);
      return h;
    };
  }

  std::string pod_path() const { return fmt::format("/api/v1/namespaces/{}/pods/{}", ns, pod); }
  std::string where() const { return fmt::format("pod {}/{}", ns, pod); }

  std::map<std::string, std::string> rex_labels() const {
    std::map<std::string, std::string> l = owner_labels();
    l[std::string(labels::deployment)] = id;
    if (config.max_lifetime.count() > 0)
      l[std::string(labels::expires)] = std::to_string(
          rex::detail::unix_seconds() +
          static_cast<std::int64_t>((config.max_lifetime + config.startup_timeout).count()) + 60);
    return l;
  }

  json::object manifest() const {
    k8s::PodSpecConfig p;
    p.name = pod;
    p.namespace_name = ns.empty() ? std::string("<namespace>") : ns;
    p.image = config.image;
    p.image_pull_policy = config.image_pull_policy;
    p.server_image = config.server_image.empty() ? default_server_image() : config.server_image;
    p.server_port = config.port;
    p.token_secret = secret;
    p.max_lifetime = config.max_lifetime.count();
    p.labels = config.labels;
    p.rex_labels = rex_labels();
    p.env = config.env;
    p.working_dir = config.working_dir;
    p.resources = config.resources;
    p.node_selector = config.node_selector;
    p.tolerations = config.tolerations;
    p.runtime_class_name = config.runtime_class_name;
    p.service_account = config.service_account;
    p.image_pull_secrets = config.image_pull_secrets;
    p.pod_overrides = config.pod_overrides;
    return k8s::pod_manifest(p);
  }

  asio::awaitable<void> start();
  asio::awaitable<void> create_secret();
  asio::awaitable<void> create_pod();
  asio::awaitable<void> adopt_secret();
  asio::awaitable<json::object> wait_running(Clock::time_point deadline, std::string rv);
  asio::awaitable<bool> watch(std::string rv, Clock::time_point until, const k8s::PodSeen& seen);
  asio::awaitable<void> wait_alive(Clock::time_point deadline);
  asio::awaitable<std::string> log_tail(std::string container);
  asio::awaitable<void> refresh_credentials();
  [[noreturn]] void fail_ended(const detail::PodState& st, const std::string& logs) const;
  asio::awaitable<void> release();
};

asio::awaitable<void> PodStart::refresh_credentials() {
  if (proxy && api)
    credentials->authorization = co_await api->authorization();
}

asio::awaitable<std::string> PodStart::log_tail(std::string container) {
  http::ClientRequest request;
  request.target = pod_path() + "/log?container=" + container + "&tailLines=30";
  request.timeout = std::chrono::seconds(10);
  try {
    const http::ClientResponse response = co_await api->request(std::move(request));
    if (response.status == 200)
      co_return response.body;
    co_return fmt::format("(its log could not be read: HTTP {})", response.status);
  } catch (const std::exception& e) {
    co_return fmt::format("(its log could not be read: {})", e.what());
  }
}

void PodStart::fail_ended(const detail::PodState& st, const std::string& logs) const {
  std::string message = fmt::format("{} ({}): {}", where(), config.image, st.summary);
  if (!logs.empty())
    message += "; last log lines:\n" + logs;
  throw DeploymentStartupError(message);
}

asio::awaitable<void> PodStart::create_secret() {
  json::object labels;
  for (const auto& [k, v] : rex_labels())
    labels[k] = v;
  json::object body{
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata", json::object{{"name", secret}, {"labels", std::move(labels)}}},
      {"type", "Opaque"},
      {"stringData", json::object{{"token", token}}},
  };
  const std::string path = fmt::format("/api/v1/namespaces/{}/secrets", ns);
  try {
    co_await api->call("POST", path, std::move(body));
  } catch (const k8s::ApiError& e) {
    throw DeploymentStartupError(
        fmt::format("{}: cannot create its token's Secret {}: {}", where(), secret, e.what()));
  }
  secret_created = true;
}

asio::awaitable<void> PodStart::create_pod() {
  emit(DeploymentStage::creating, fmt::format("creating {} from {}", where(), config.image));
  json::value created;
  try {
    created = co_await api->call("POST", fmt::format("/api/v1/namespaces/{}/pods", ns), manifest());
  } catch (const k8s::ApiError& e) {
    throw DeploymentStartupError(
        fmt::format("{}: cannot create the pod from {}: {}", where(), config.image, e.what()));
  }
  pod_created = true;
  pod_uid = field_text(created, {"metadata", "uid"});
}

// The Secret becomes the pod's dependent: the cluster's garbage collector deletes it with the
// pod, whoever deletes the pod.
asio::awaitable<void> PodStart::adopt_secret() {
  json::object patch{
      {"metadata", json::object{{"ownerReferences", json::array{json::object{{"apiVersion", "v1"},
                                                                             {"kind", "Pod"},
                                                                             {"name", pod},
                                                                             {"uid", pod_uid}}}}}}};
  try {
    co_await api->call("PATCH", fmt::format("/api/v1/namespaces/{}/secrets/{}", ns, secret),
                       std::move(patch), "application/merge-patch+json");
  } catch (const k8s::ApiError& e) {
    throw DeploymentStartupError(
        fmt::format("{}: cannot make Secret {} its dependent: {}", where(), secret, e.what()));
  }
}

// Watches the pod from resource version `rv` until `seen` returns true for an object (true) or
// `until` passes (false).
asio::awaitable<bool> PodStart::watch(std::string rv, Clock::time_point until,
                                      const k8s::PodSeen& seen) {
  co_return co_await k8s::watch_pod(*api, ns, pod, std::move(rv), until, seen);
}

asio::awaitable<json::object> PodStart::wait_running(Clock::time_point deadline, std::string rv) {
  json::object last;
  detail::PodState state;
  auto seen = [&](const json::object& object, bool deleted) {
    last = object;
    state = detail::assess_pod(object);
    if (deleted) {
      state.progress = detail::PodProgress::ended;
      state.summary = "the pod was deleted while it started";
    }
    if (state.summary != last_summary) {
      last_summary = state.summary;
      emit(DeploymentStage::starting, fmt::format("{}: {}", where(), state.summary));
    }
    return state.progress != detail::PodProgress::pending;
  };
  const bool decided = co_await watch(std::move(rv), deadline, seen);
  if (!decided)
    throw DeploymentStartupError(fmt::format(
        "{} ({}): its server did not start within startup_timeout {} s; the pod's state: {}",
        where(), config.image, config.startup_timeout.count(),
        last_summary.empty() ? std::string("no status yet") : last_summary));
  if (state.progress == detail::PodProgress::ended) {
    // (Not a conditional expression: g++ 12 mishandles co_await inside one.)
    std::string logs;
    if (!state.ran_container.empty())
      logs = co_await log_tail(state.ran_container);
    fail_ended(state, logs);
  }
  co_return last;
}

// Polls the server's is_alive until it answers (a refused connection, or the proxy's 503 for
// one, is noticed at once), checking the pod's status every second so that a server that
// exits fails the start with the reason.
asio::awaitable<void> PodStart::wait_alive(Clock::time_point deadline) {
  http::ClientConfig poll_config = proxy ? api->tls_config() : http::ClientConfig{};
  poll_config.retry.max_retries = 0;
  poll_config.timeout = std::chrono::seconds(5);
  if (proxy)
    poll_config.header_source = proxy_headers();
  http::Client poll(executor, url, poll_config);
  asio::steady_timer pause(executor);
  auto delay = std::chrono::milliseconds(2);
  auto next_check = Clock::now() + kStatusCheckEvery;
  std::string last = "no answer yet";
  while (Clock::now() < deadline) {
    co_await refresh_credentials();
    http::ClientRequest request;
    request.target = "/is_alive";
    request.headers.emplace_back("X-API-Key", token);
    request.timeout = std::min<Clock::duration>(std::chrono::seconds(5), deadline - Clock::now());
    try {
      const auto response = co_await poll.request(std::move(request));
      if (response.status == 200)
        co_return;
      last = fmt::format("HTTP {}: {}", response.status, response.body.substr(0, 300));
    } catch (const std::exception& e) {
      last = e.what();
    }
    if (Clock::now() >= next_check) {
      next_check = Clock::now() + kStatusCheckEvery;
      json::value now = co_await api->call("GET", pod_path());
      const detail::PodState st = detail::assess_pod(now.get_object());
      if (st.progress == detail::PodProgress::ended) {
        std::string logs;
        if (!st.ran_container.empty())
          logs = co_await log_tail(st.ran_container);
        fail_ended(st, logs);
      }
    }
    pause.expires_after(delay);
    co_await pause.async_wait(asio::use_awaitable);
    delay = std::min(delay * 2, std::chrono::milliseconds(50));
  }
  const std::string logs = co_await log_tail(detail::kSandboxContainer);
  throw DeploymentStartupError(fmt::format(
      "{} ({}): its server did not answer at {} within startup_timeout {} s (last check: {}); "
      "last log lines:\n{}",
      where(), config.image, url, config.startup_timeout.count(), last, logs));
}

asio::awaitable<void> PodStart::start() {
  const auto t0 = Clock::now();
  const auto deadline = t0 + duration_from_seconds(config.startup_timeout.count());
  k8s::KubeconfigOptions options;
  options.path = config.kubeconfig;
  options.context = config.context;
  k8s::ClusterAccess access;
  try {
    access = k8s::load_cluster_access(options);
  } catch (const k8s::KubeconfigError& e) {
    throw DeploymentStartupError(fmt::format("kubernetes deployment: {}", e.what()));
  }
  ns = config.namespace_name.empty() ? access.namespace_name : config.namespace_name;
  const bool in_cluster = access.context.empty() && access.source.starts_with("in-cluster");
  try {
    api = std::make_shared<k8s::ApiClient>(executor, std::move(access));
  } catch (const k8s::KubeconfigError& e) {
    throw DeploymentStartupError(fmt::format("kubernetes deployment: {}", e.what()));
  }

  co_await create_secret();
  co_await create_pod();
  co_await adopt_secret();
  const json::object running = co_await wait_running(deadline, std::string());
  const detail::PodState st = detail::assess_pod(running);

  proxy = config.connect == "proxy" ||
          (config.connect == "auto" && !in_cluster && !detail::on_local_network(st.pod_ip));
  if (!proxy && st.pod_ip.empty())
    throw DeploymentStartupError(fmt::format("{}: it runs but has no address", where()));
  if (proxy) {
    url = fmt::format("{}{}:{}/proxy", api->access().server, pod_path(), config.port);
  } else {
    const bool v6 = st.pod_ip.find(':') != std::string::npos;
    url = v6 ? fmt::format("http://[{}]:{}", st.pod_ip, config.port)
             : fmt::format("http://{}:{}", st.pod_ip, config.port);
  }
  emit(DeploymentStage::waiting, fmt::format("waiting for the server at {}", url));
  co_await wait_alive(deadline);

  RemoteRuntimeConfig rc;
  rc.url = url;
  rc.auth_token = token;
  if (proxy) {
    rc.client = api->tls_config();
    rc.client.header_source = proxy_headers();
    // The pod proxy cuts an answer that starts before it has read the client's whole body:
    // see ClientConfig::chunked_request_bodies.
    rc.client.chunked_request_bodies = true;
  }
  remote = std::make_unique<RemoteRuntime>(executor, std::move(rc));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  emit(DeploymentStage::waiting, fmt::format("{} answered at {} in {:.0f} ms", where(), url, ms));
}

asio::awaitable<void> PodStart::release() {
  remote.reset();
  if (!api)
    co_return;
  if (pod_created) {
    bool gone = false;
    try {
      json::object options{{"gracePeriodSeconds", 0}, {"propagationPolicy", "Background"}};
      co_await api->call("DELETE", pod_path(), std::move(options));
    } catch (const k8s::ApiError& e) {
      gone = e.status() == 404;
    } catch (const std::exception&) {
      // Unreachable: `rex gc --kubernetes` finds it by its labels.
    }
    // Gone at once when the kubelet had nothing left to stop; else its DELETED event is
    // awaited, watched from the state read after the delete.
    try {
      std::string rv;
      if (!gone) {
        const json::value now = co_await api->call("GET", pod_path());
        gone = field_text(now, {"metadata", "uid"}) != pod_uid;
        rv = field_text(now, {"metadata", "resourceVersion"});
      }
      if (!gone) {
        auto is_gone = [this](const json::object& object, bool deleted) {
          return deleted || field_text(object, {"metadata", "uid"}) != pod_uid;
        };
        gone = co_await watch(rv, Clock::now() + kDeleteWait, is_gone);
      }
    } catch (const k8s::ApiError& e) {
      gone = gone || e.status() == 404;
    } catch (const std::exception&) {
    }
    pod_created = !gone;
  }
  if (secret_created) {
    try {
      co_await api->call("DELETE", fmt::format("/api/v1/namespaces/{}/secrets/{}", ns, secret));
      secret_created = false;
    } catch (const k8s::ApiError& e) {
      secret_created = e.status() != 404;
    } catch (const std::exception&) {
    }
  }
}

}  // namespace

void check_kubernetes_config(const KubernetesDeploymentConfig& config) {
  if (!config.pod_name.empty() && !valid_object_name(config.pod_name))
    throw DeploymentConfigError(fmt::format(
        "kubernetes.pod_name: \"{}\" is not a valid name (lowercase letters, digits, '-' and "
        "'.', starting and ending with a letter or digit)",
        config.pod_name));
  if (config.connect != "auto" && config.connect != "proxy" && config.connect != "pod_ip")
    throw DeploymentConfigError(fmt::format(
        "kubernetes.connect: expected one of auto, proxy, pod_ip, got \"{}\"", config.connect));
  if (config.port < 1 || config.port > 65535)
    throw DeploymentConfigError(
        fmt::format("kubernetes.port: {} is out of range (1..65535)", config.port));
}

asio::awaitable<StartedSandbox> create_kubernetes_pod(asio::any_io_executor executor,
                                                      KubernetesDeploymentConfig config,
                                                      std::string deployment_id,
                                                      SandboxProgress progress) {
  if (config.image.empty())
    throw DeploymentConfigError("kubernetes.image: must not be empty");
  check_kubernetes_config(config);
  auto s = std::make_shared<PodStart>();
  s->executor = std::move(executor);
  s->config = std::move(config);
  s->id = deployment_id.empty() ? random_hex(6) : std::move(deployment_id);
  s->pod = s->config.pod_name.empty() ? "rex-" + s->id : s->config.pod_name;
  if (!valid_object_name(s->pod))
    throw DeploymentConfigError(fmt::format("kubernetes: \"{}\" is not a valid pod name", s->pod));
  s->secret = s->pod + "-token";
  s->report = [progress = std::move(progress)](DeploymentStage stage, std::string message) {
    if (progress)
      progress(DeploymentEvent{stage, std::move(message)});
  };
  std::exception_ptr failure;
  try {
    auto starting = s->start();
    co_await std::move(starting);
    StartedSandbox started;
    started.id = s->pod;
    started.url = s->url;
    started.token = s->token;
    started.own_filesystem = true;
    // Where sessions work: the settings' place, else the image's.
    auto refreshing = s->refresh_credentials();
    co_await std::move(refreshing);
    auto finding = detail::working_dir_of(*s->remote, s->config.working_dir, "/");
    started.working_dir = co_await std::move(finding);
    s->remote->close_idle_connections();
    co_return started;
  } catch (const DeploymentStartupError&) {
    failure = std::current_exception();
  } catch (const DeploymentConfigError&) {
    failure = std::current_exception();
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted)
      failure = std::current_exception();  // cancelled: still release what was made
    else
      failure = std::make_exception_ptr(
          DeploymentStartupError(fmt::format("kubernetes {}: {}", s->where(), e.what())));
  } catch (const std::exception& e) {
    failure = std::make_exception_ptr(
        DeploymentStartupError(fmt::format("kubernetes {}: {}", s->where(), e.what())));
  }
  auto releasing = s->release();
  co_await std::move(releasing);
  std::rethrow_exception(failure);
}

KubernetesDeployment::KubernetesDeployment(asio::any_io_executor executor,
                                           KubernetesDeploymentConfig config)
    : KubernetesDeployment(std::move(executor), std::move(config), random_hex(6)) {}

namespace {

// The settings of the deployment `id`: its pod named after it unless named.
KubernetesDeploymentConfig named(KubernetesDeploymentConfig config, const std::string& id) {
  if (config.image.empty())
    throw DeploymentConfigError("kubernetes.image: must not be empty");
  check_kubernetes_config(config);  // a pod_name given is checked there
  if (config.pod_name.empty())
    config.pod_name = "rex-" + id;
  return config;
}

SandboxRequest request_of(const KubernetesDeploymentConfig& config, std::string id) {
  SandboxRequest r;
  r.image = config.image;
  r.deployment_id = std::move(id);
  r.purpose = "the kubernetes deployment";
  return r;
}

}  // namespace

KubernetesDeployment::KubernetesDeployment(asio::any_io_executor executor,
                                           KubernetesDeploymentConfig config, std::string id)
    : SandboxDeployment(
          executor, std::make_unique<detail::KubernetesBackend>(executor, named(config, id), false),
          request_of(config, id)),
      config_(named(std::move(config), id)) {}

const detail::KubernetesBackend& KubernetesDeployment::cluster() const noexcept {
  return static_cast<const detail::KubernetesBackend&>(backend());
}

const std::string& KubernetesDeployment::namespace_name() const noexcept {
  return cluster().namespace_name();
}

bool KubernetesDeployment::through_proxy() const noexcept {
  return !url().empty() && cluster().through_proxy(url());
}

}  // namespace rex
