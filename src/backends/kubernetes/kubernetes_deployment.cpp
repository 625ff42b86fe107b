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

#include "backends/kubernetes/pod_status.hpp"
#include "core/clock.hpp"
#include "deployment/local_addresses.hpp"

namespace rex {

namespace json = boost::json;
namespace k8s = kubernetes;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kDeleteWait = std::chrono::seconds(30);       // stop() waits this long for the pod
constexpr auto kStatusCheckEvery = std::chrono::seconds(1);  // while the server starts
constexpr auto kLostCheckTimeout = std::chrono::seconds(5);  // the pod's status after a failure
constexpr int kLostChecks = 6;  // more looks at a pod that seems alive after a failed call

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

}  // namespace

struct KubernetesDeployment::Impl {
  asio::any_io_executor executor;
  KubernetesDeploymentConfig config;
  std::string id = random_hex(6);
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
  std::unique_ptr<Runtime> runtime;
  bool runtime_closed = false;
  bool lost = false;  // the pod was found gone or ended: its server will not answer again
  bool started = false;
  bool stopped = false;
  std::function<void(const DeploymentEvent&)> hooks;
  std::string last_summary;

  void emit(DeploymentStage stage, std::string message) const {
    if (!hooks)
      return;
    DeploymentEvent e;
    e.stage = stage;
    e.message = std::move(message);
    hooks(e);
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
  asio::awaitable<std::optional<std::string>> why_lost();
  asio::awaitable<std::optional<std::string>> why_lost_patiently();
  asio::awaitable<void> refresh_credentials();
  [[noreturn]] void fail_ended(const detail::PodState& st, const std::string& logs) const;
  asio::awaitable<void> release();
};

namespace detail {

// The runtime handed out: the server's RemoteRuntime, whose failures are explained by the
// pod's status when the pod has ended, and whose proxy credentials are kept current.
class PodRuntime final : public Runtime {
 public:
  // The owner holds this runtime, so it outlives it.
  PodRuntime(KubernetesDeployment::Impl& owner, RemoteRuntime& inner)
      : owner_(&owner), inner_(inner) {}

  // The server's answer, and the pod's status: at the pod's address a server may still answer
  // for a moment after its pod was deleted or failed, until the kubelet has stopped it.
  // (The pod's status first: a server whose pod has gone may not even refuse the connection.)
  asio::awaitable<IsAliveResponse> is_alive() override {
    if (auto lost = co_await owner_->why_lost())
      co_return IsAliveResponse{false,
                                fmt::format("{}: the sandbox is gone: {}", owner_->where(), *lost)};
    co_await owner_->refresh_credentials();
    co_return co_await inner_.is_alive();
  }
  asio::awaitable<CreateBashSessionResponse> create_session(CreateBashSessionRequest r) override {
    return guarded<CreateBashSessionResponse>([this, r] { return inner_.create_session(r); });
  }
  asio::awaitable<BashObservation> run_in_session(Action a) override {
    return guarded<BashObservation>([this, a] { return inner_.run_in_session(a); });
  }
  asio::awaitable<BashObservation> run_in_session_streaming(Action a, OutputListener l) override {
    return guarded<BashObservation>([this, a, l] { return inner_.run_in_session_streaming(a, l); });
  }
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest r) override {
    return guarded<CloseBashSessionResponse>([this, r] { return inner_.close_session(r); });
  }
  asio::awaitable<CommandResponse> execute(Command c) override {
    return guarded<CommandResponse>([this, c] { return inner_.execute(c); });
  }
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest r) override {
    return guarded<ReadFileResponse>([this, r] { return inner_.read_file(r); });
  }
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest r) override {
    return guarded<WriteFileResponse>([this, r] { return inner_.write_file(r); });
  }
  asio::awaitable<UploadResponse> upload(UploadRequest r) override {
    return guarded<UploadResponse>([this, r] { return inner_.upload(r); });
  }
  asio::awaitable<DownloadResponse> download(DownloadRequest r) override {
    return guarded<DownloadResponse>([this, r] { return inner_.download(r); });
  }
  asio::awaitable<CloseResponse> close() override {
    return guarded<CloseResponse>([this] { return inner_.close(); });
  }
  asio::awaitable<std::optional<ProcessEnd>> start_process(ProcessConfig c,
                                                           ProcessListener l) override {
    return guarded<std::optional<ProcessEnd>>([this, c, l] { return inner_.start_process(c, l); });
  }
  asio::awaitable<std::optional<ProcessEnd>> connect_process(ProcessSelector w,
                                                             ProcessListener l) override {
    return guarded<std::optional<ProcessEnd>>(
        [this, w, l] { return inner_.connect_process(w, l); });
  }
  asio::awaitable<ProcessListResponse> list_processes() override {
    return guarded<ProcessListResponse>([this] { return inner_.list_processes(); });
  }
  asio::awaitable<void> send_process_input(ProcessInput i) override {
    return guarded_void([this, i] { return inner_.send_process_input(i); });
  }
  asio::awaitable<void> send_session_input(SessionInput i) override {
    return guarded_void([this, i] { return inner_.send_session_input(i); });
  }
  asio::awaitable<void> signal_process(ProcessSignal s) override {
    return guarded_void([this, s] { return inner_.signal_process(s); });
  }
  asio::awaitable<void> resize_process(ProcessResize r) override {
    return guarded_void([this, r] { return inner_.resize_process(r); });
  }
  asio::awaitable<std::optional<ProcessEnd>> attach_session(SessionAttach a,
                                                            ProcessListener l) override {
    return guarded<std::optional<ProcessEnd>>([this, a, l] { return inner_.attach_session(a, l); });
  }
  asio::awaitable<void> resize_session(SessionResize r) override {
    return guarded_void([this, r] { return inner_.resize_session(r); });
  }

 private:
  // Failures that may mean the pod is gone: the connection (to the pod, or the proxy's to it)
  // broke or timed out, or the API server answered for the pod (404: no such pod; 5xx: the
  // proxy could not reach it).
  static bool may_be_lost(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const http::ConnectionError&) {
      return true;
    } catch (const http::RequestTimeoutError&) {
      return true;
    } catch (const http::HttpError& e) {
      return e.status() == 404 || e.status() >= 500;
    } catch (...) {
      return false;
    }
  }

  // An API server that refused the proxy's credentials: an exec plugin's token may have been
  // revoked early.
  static bool refused(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const http::HttpError& e) {
      return e.status() == 401;
    } catch (...) {
      return false;
    }
  }

  template <class T>
  asio::awaitable<T> guarded(std::function<asio::awaitable<T>()> call) {
    co_await owner_->refresh_credentials();
    std::exception_ptr failure;
    try {
      co_return co_await call();
    } catch (...) {
      failure = std::current_exception();
    }
    if (owner_->proxy && refused(failure) && owner_->api->access().exec) {
      owner_->api->renew_credentials();
      co_await owner_->refresh_credentials();
      co_return co_await call();
    }
    co_await explain(failure);
    std::rethrow_exception(failure);
  }

  asio::awaitable<void> guarded_void(std::function<asio::awaitable<void>()> call) {
    co_await owner_->refresh_credentials();
    std::exception_ptr failure;
    try {
      co_await call();
      co_return;
    } catch (...) {
      failure = std::current_exception();
    }
    co_await explain(failure);
    std::rethrow_exception(failure);
  }

  // Throws SandboxLostError when the failure came from a pod that has ended.
  asio::awaitable<void> explain(const std::exception_ptr& failure) {
    if (!may_be_lost(failure))
      co_return;
    const auto lost = co_await owner_->why_lost_patiently();
    if (!lost)
      co_return;
    json::object info{{"pod", owner_->where()}, {"reason", *lost}};
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      info["error"] = e.what();
    }
    throw SandboxLostError(fmt::format("{}: the sandbox is gone: {}", owner_->where(), *lost),
                           std::move(info));
  }

  KubernetesDeployment::Impl* owner_;
  RemoteRuntime& inner_;
};

}  // namespace detail

// Why the pod will not answer any more, or nothing while it still runs (or cannot be asked).
asio::awaitable<std::optional<std::string>> KubernetesDeployment::Impl::why_lost() {
  if (!api)
    co_return std::nullopt;
  http::ClientRequest request;
  request.target = pod_path();
  request.headers.emplace_back("Accept", "application/json");
  request.timeout = kLostCheckTimeout;
  http::ClientResponse response;
  try {
    response = co_await api->request(std::move(request));
  } catch (const std::exception&) {
    co_return std::nullopt;  // the API server is out of reach: nothing to say about the pod
  }
  if (response.status == 404) {
    lost = true;
    co_return std::string("the pod no longer exists (it was deleted)");
  }
  if (response.status != 200)
    co_return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(response.body, ec);
  if (ec || !v.is_object())
    co_return std::nullopt;
  if (field_text(v, {"metadata", "uid"}) != pod_uid && !pod_uid.empty()) {
    lost = true;
    co_return std::string("the pod was deleted (another pod of the same name exists now)");
  }
  const detail::PodState st = detail::assess_pod(v.get_object());
  lost = st.progress == detail::PodProgress::ended;
  if (lost)
    co_return st.summary;
  if (st.deleting)
    co_return std::string("the pod is being deleted");
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
      co_return fmt::format("its node {} stopped reporting ({})", st.node,
                            reason.empty() ? "NodeLost" : reason);
    }
  }
  co_return std::nullopt;
}

// After a call failed: the kubelet reports a container's end within a second or two, so a pod
// that still looks alive is asked again a few times before the failure is taken as a network's.
asio::awaitable<std::optional<std::string>> KubernetesDeployment::Impl::why_lost_patiently() {
  asio::steady_timer pause(executor);
  for (int attempt = 0;; ++attempt) {
    auto lost = co_await why_lost();
    if (lost || attempt == kLostChecks)
      co_return lost;
    pause.expires_after(std::chrono::milliseconds(500));
    co_await pause.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> KubernetesDeployment::Impl::refresh_credentials() {
  if (proxy && api)
    credentials->authorization = co_await api->authorization();
}

asio::awaitable<std::string> KubernetesDeployment::Impl::log_tail(std::string container) {
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

void KubernetesDeployment::Impl::fail_ended(const detail::PodState& st,
                                            const std::string& logs) const {
  std::string message = fmt::format("{} ({}): {}", where(), config.image, st.summary);
  if (!logs.empty())
    message += "; last log lines:\n" + logs;
  throw DeploymentStartupError(message);
}

asio::awaitable<void> KubernetesDeployment::Impl::create_secret() {
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

asio::awaitable<void> KubernetesDeployment::Impl::create_pod() {
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
asio::awaitable<void> KubernetesDeployment::Impl::adopt_secret() {
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
asio::awaitable<bool> KubernetesDeployment::Impl::watch(std::string rv, Clock::time_point until,
                                                        const k8s::PodSeen& seen) {
  co_return co_await k8s::watch_pod(*api, ns, pod, std::move(rv), until, seen);
}

asio::awaitable<json::object> KubernetesDeployment::Impl::wait_running(Clock::time_point deadline,
                                                                       std::string rv) {
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
asio::awaitable<void> KubernetesDeployment::Impl::wait_alive(Clock::time_point deadline) {
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

asio::awaitable<void> KubernetesDeployment::Impl::start() {
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
  runtime = std::make_unique<detail::PodRuntime>(*this, *remote);
  started = true;
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  emit(DeploymentStage::ready, fmt::format("{} ready at {} in {:.0f} ms", where(), url, ms));
}

asio::awaitable<void> KubernetesDeployment::Impl::release() {
  if (remote && !runtime_closed && !lost) {
    runtime_closed = true;
    auto closing = with_timeout(remote->close(), std::chrono::seconds(3));
    auto closed = capture(std::move(closing));
    (void)co_await std::move(closed);
    remote->close_idle_connections();
  }
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

KubernetesDeployment::KubernetesDeployment(asio::any_io_executor executor,
                                           KubernetesDeploymentConfig config)
    : impl_(std::make_shared<Impl>()) {
  impl_->executor = std::move(executor);
  impl_->config = std::move(config);
  Impl& i = *impl_;
  i.pod = i.config.pod_name.empty() ? "rex-" + i.id : i.config.pod_name;
  if (!valid_object_name(i.pod))
    throw DeploymentConfigError(fmt::format(
        "kubernetes.pod_name: \"{}\" is not a valid name (lowercase letters, digits, '-' and "
        "'.', starting and ending with a letter or digit)",
        i.pod));
  i.secret = i.pod + "-token";
  if (i.config.connect != "auto" && i.config.connect != "proxy" && i.config.connect != "pod_ip")
    throw DeploymentConfigError(fmt::format(
        "kubernetes.connect: expected one of auto, proxy, pod_ip, got \"{}\"", i.config.connect));
  if (i.config.image.empty())
    throw DeploymentConfigError("kubernetes.image: must not be empty");
  if (i.config.port < 1 || i.config.port > 65535)
    throw DeploymentConfigError(
        fmt::format("kubernetes.port: {} is out of range (1..65535)", i.config.port));
  i.hooks = [this](const DeploymentEvent& e) { emit(e); };
}

KubernetesDeployment::~KubernetesDeployment() {
  if (!impl_->stopped && (impl_->pod_created || impl_->secret_created)) {
    // In the background: the pod and the Secret go even though nobody waits for them.
    impl_->hooks = nullptr;
    auto impl = impl_;
    asio::co_spawn(
        impl->executor, [impl]() -> asio::awaitable<void> { co_await impl->release(); },
        asio::detached);
  }
}

asio::awaitable<void> KubernetesDeployment::start() {
  if (impl_->stopped)
    throw DeploymentStartupError("kubernetes deployment: cannot start again after stop()");
  if (impl_->started)
    co_return;
  std::exception_ptr failure;
  try {
    co_await impl_->start();
  } catch (const DeploymentStartupError&) {
    failure = std::current_exception();
  } catch (const DeploymentConfigError&) {
    failure = std::current_exception();
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted)
      failure = std::current_exception();  // cancelled: still release what was made
    else
      failure = std::make_exception_ptr(DeploymentStartupError(
          fmt::format("kubernetes deployment {}: {}", impl_->where(), e.what())));
  } catch (const std::exception& e) {
    failure = std::make_exception_ptr(DeploymentStartupError(
        fmt::format("kubernetes deployment {}: {}", impl_->where(), e.what())));
  }
  if (failure) {
    co_await impl_->release();
    std::rethrow_exception(failure);
  }
}

asio::awaitable<void> KubernetesDeployment::stop() {
  if (impl_->stopped)
    co_return;
  impl_->stopped = true;
  if (!impl_->api)
    co_return;
  impl_->emit(DeploymentStage::stopping, fmt::format("deleting {}", impl_->where()));
  impl_->started = false;
  co_await impl_->release();
  impl_->emit(DeploymentStage::stopped, fmt::format("{} deleted", impl_->where()));
}

asio::awaitable<IsAliveResponse> KubernetesDeployment::is_alive() {
  if (!impl_->started)
    co_return IsAliveResponse{false, impl_->stopped
                                         ? std::string("kubernetes deployment: stopped")
                                         : std::string("kubernetes deployment: not started")};
  co_return co_await impl_->runtime->is_alive();
}

Runtime& KubernetesDeployment::runtime() {
  if (!impl_->started)
    throw DeploymentNotStartedError(impl_->stopped ? "kubernetes deployment: stopped"
                                                   : "kubernetes deployment: not started");
  return *impl_->runtime;
}

bool KubernetesDeployment::started() const noexcept {
  return impl_->started;
}
const KubernetesDeploymentConfig& KubernetesDeployment::config() const noexcept {
  return impl_->config;
}
const std::string& KubernetesDeployment::deployment_id() const noexcept {
  return impl_->id;
}
const std::string& KubernetesDeployment::pod_name() const noexcept {
  return impl_->pod;
}
const std::string& KubernetesDeployment::namespace_name() const noexcept {
  return impl_->ns;
}
const std::string& KubernetesDeployment::url() const noexcept {
  return impl_->url;
}
bool KubernetesDeployment::through_proxy() const noexcept {
  return impl_->proxy;
}

KubernetesHandoff KubernetesDeployment::release_pod() {
  Impl& i = *impl_;
  if (!i.started)
    throw DeploymentNotStartedError(i.stopped ? "kubernetes deployment: stopped"
                                              : "kubernetes deployment: not started");
  KubernetesHandoff handoff{i.ns, i.pod, i.url, i.token, i.proxy};
  i.remote->close_idle_connections();
  i.runtime_closed = true;
  i.started = false;
  i.stopped = true;
  i.pod_created = false;
  i.secret_created = false;
  return handoff;
}

}  // namespace rex
