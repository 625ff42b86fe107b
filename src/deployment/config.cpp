// The backend table, and deployment configs from and to JSON through it: strictly, every field
// known, every value checked, each error naming "type.field".
#include <rex/deployment/config.hpp>
#include <rex/deployment/daytona_deployment.hpp>
#include <rex/deployment/docker_args.hpp>
#include <rex/deployment/docker_deployment.hpp>
#include <rex/deployment/docker_gc.hpp>
#include <rex/deployment/dummy_deployment.hpp>
#include <rex/deployment/e2b_deployment.hpp>
#include <rex/deployment/fargate_deployment.hpp>
#include <rex/deployment/fargate_gc.hpp>
#include <rex/deployment/gateway_deployment.hpp>
#include <rex/deployment/kubernetes_deployment.hpp>
#include <rex/deployment/kubernetes_gc.hpp>
#include <rex/deployment/local_deployment.hpp>
#if REX_WITH_MODAL
#include <rex/deployment/modal_deployment.hpp>
#endif
#include <rex/aws/client.hpp>
#include <rex/deployment/registry.hpp>
#include <rex/deployment/remote_deployment.hpp>
#include <rex/docker/engine.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>
#include <rex/protocol/json.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "core/json_kind.hpp"

namespace rex {

namespace json = boost::json;

namespace {

using settings::Reader;

// What the field types do not say: the checks across fields, and the fields each backend
// accepts without keeping (SWE-ReX's that rex has no use for).

void check_gateway(GatewayDeploymentConfig& c, Reader& r) {
  if (c.environment.empty())
    r.fail("environment", "must not be empty");
}

void check_e2b(E2BDeploymentConfig& c, Reader& r) {
  if (c.template_id.empty())
    r.fail("template", "must not be empty");
  if (!(c.timeout > 0))
    r.fail("timeout", "must be a positive number of seconds");
  if (!c.template_server_path.empty() && c.template_server_path.front() != '/')
    r.fail("template_server_path", "must be an absolute path in the sandbox");
}

void check_kubernetes(KubernetesDeploymentConfig& c, Reader& r) {
  if (c.image.empty())
    r.fail("image", "must not be empty");
  for (const auto& [key, value] : c.resources) {
    if (key != "requests" && key != "limits" && key != "claims")
      r.fail("resources", fmt::format("unknown key \"{}\" (expected requests, limits or claims)",
                                      std::string(key)));
    if (!value.is_object() && key != "claims")
      r.fail("resources", fmt::format("{}: expected an object such as {{\"cpu\": \"500m\", "
                                      "\"memory\": \"1Gi\"}}",
                                      std::string(key)));
  }
  for (const auto& t : c.tolerations) {
    if (!t.is_object())
      r.fail("tolerations", "expected an array of objects ({\"key\", \"operator\", ...})");
  }
}

void positive_seconds(Reader& r, std::string_view key, double value) {
  if (!(value > 0))
    r.fail(key, "must be a positive number of seconds");
}

void check_fargate(FargateDeploymentConfig& c, Reader& r) {
  if (c.image.empty())
    r.fail("image", "must not be empty");
  if (c.cluster_name.empty())
    r.fail("cluster_name", "must not be empty");
  positive_seconds(r, "container_timeout", c.container_timeout);
  positive_seconds(r, "runtime_timeout", c.runtime_timeout);
  positive_seconds(r, "startup_timeout", c.startup_timeout);
}

void check_daytona(DaytonaDeploymentConfig& c, Reader& r) {
  if (c.image.empty() && c.snapshot.empty())
    r.fail("image", "must not be empty (or give a snapshot)");
  if (!(c.container_timeout >= 60))
    r.fail("container_timeout", "must be at least 60 seconds (Daytona counts minutes)");
  positive_seconds(r, "runtime_timeout", c.runtime_timeout);
  positive_seconds(r, "startup_timeout", c.startup_timeout);
}

#if REX_WITH_MODAL
void check_modal(ModalDeploymentConfig& c, Reader& r) {
  json::object kwargs;
  r.object("modal_sandbox_kwargs", kwargs);
  if (!kwargs.empty())
    r.fail("modal_sandbox_kwargs",
           "holds arguments of Modal's Python SDK; give the Sandbox message's fields as "
           "sandbox_definition instead");
  if (c.image.empty())
    r.fail("image", "must not be empty");
  if (c.app_name.empty())
    r.fail("app_name", "must not be empty");
  if (!(c.deployment_timeout >= 1 && c.deployment_timeout <= 86400))
    r.fail("deployment_timeout", "must be from 1 to 86400 seconds (Modal's limit)");
  positive_seconds(r, "startup_timeout", c.startup_timeout);
  positive_seconds(r, "runtime_timeout", c.runtime_timeout);
}
#endif

void check_dummy(DummyDeploymentConfig& c, Reader& r) {
  if (const json::value* v = r.raw("run_in_session_outputs")) {
    // SWE-ReX's DummyRuntime takes one observation or a list of them.
    try {
      if (v->is_array()) {
        for (const auto& item : v->as_array())
          c.run_in_session_outputs.push_back(from_json<BashObservation>(item));
      } else {
        c.run_in_session_outputs.push_back(from_json<BashObservation>(*v));
      }
    } catch (const ProtocolError& e) {
      r.fail("run_in_session_outputs", e.what());
    }
  }
}

json::object encode_dummy(const DeploymentConfig& config) {
  json::array outputs;
  for (const auto& obs : config.get<DummyDeploymentConfig>().run_in_session_outputs)
    outputs.push_back(rex::to_json(obs));
  return json::object{{"type", "dummy"}, {"run_in_session_outputs", std::move(outputs)}};
}

void check_docker(DockerDeploymentConfig& c, Reader& r) {
  std::optional<std::string> ignored;
  r.optional_string("python_standalone_dir", ignored);  // rex needs no Python in the image
  std::vector<std::string> ignored_list;
  r.strings("exec_shell", ignored_list);  // rex runs no shell command to start its server
  if (c.image.empty())
    r.fail("image", "must not be empty");
  if (c.memory)
    (void)parse_size(*c.memory, "docker.memory");
  // SWE-ReX moves --platform out of docker_args into platform, and refuses both at once.
  std::optional<std::string> from_args;
  json::object scratch;
  apply_docker_args(c.docker_args, scratch, from_args);
  if (from_args) {
    if (c.platform && *c.platform != *from_args)
      r.fail("platform", "given both as platform and as --platform in docker_args");
    c.platform = from_args;
  }
}

template <class T>
constexpr std::span<const settings::Rule> rules_of() noexcept {
  if constexpr (requires { T::rules; })
    return T::rules;
  else
    return {};
}

// A backend's table entry from its settings struct T, its checks and its deployment D.
template <class T, auto Check>
DeploymentConfig decode(const json::object& object) {
  Reader r(object, T::backend);
  T c;
  settings::read(r, c, rules_of<T>());
  if constexpr (!std::is_same_v<decltype(Check), std::nullptr_t>)
    Check(c, r);
  r.finish();
  return c;
}

template <class T>
json::object encode(const DeploymentConfig& config) {
  json::object o = settings::write(config.get<T>(), rules_of<T>());
  o.emplace("type", T::backend);
  return o;
}

template <class T, class D>
std::unique_ptr<Deployment> make(asio::any_io_executor executor, DeploymentConfig config) {
  if constexpr (std::is_constructible_v<D, asio::any_io_executor, T>)
    return std::make_unique<D>(std::move(executor), std::move(config.get<T>()));
  else
    return std::make_unique<D>(std::move(config.get<T>()));
}

template <class T, class D, auto Check = nullptr>
constexpr Backend backend(std::string_view summary, std::span<const BackendFlag> flags,
                          std::string (*describe)(const DeploymentConfig&) = nullptr,
                          json::object (*encoder)(const DeploymentConfig&) = encode<T>) {
  return Backend{T::backend, summary, flags, decode<T, Check>, encoder, make<T, D>, describe};
}

// Short names for prompts and messages.
std::string describe_remote(const DeploymentConfig& config) {
  const auto& c = config.get<RemoteDeploymentConfig>();
  return c.port ? fmt::format("remote {}:{}", c.host, *c.port) : "remote " + c.host;
}
std::string describe_docker(const DeploymentConfig& config) {
  const auto& c = config.get<DockerDeploymentConfig>();
  return (c.container_runtime == "podman" ? "podman " : "docker ") + c.image;
}
std::string describe_gateway(const DeploymentConfig& config) {
  const auto& c = config.get<GatewayDeploymentConfig>();
  return fmt::format("gateway {} ({})", c.url, c.environment);
}
std::string describe_kubernetes(const DeploymentConfig& config) {
  const auto& c = config.get<KubernetesDeploymentConfig>();
  return fmt::format("kubernetes {}{}", c.image,
                     c.namespace_name.empty() ? "" : " in " + c.namespace_name);
}
std::string describe_fargate(const DeploymentConfig& config) {
  const auto& c = config.get<FargateDeploymentConfig>();
  return fmt::format("fargate {} on {}", c.image, c.cluster_name);
}
std::string describe_daytona(const DeploymentConfig& config) {
  const auto& c = config.get<DaytonaDeploymentConfig>();
  return "daytona " + (c.snapshot.empty() ? c.image : c.snapshot);
}
std::string describe_e2b(const DeploymentConfig& config) {
  const auto& c = config.get<E2BDeploymentConfig>();
  return fmt::format("e2b {}{}", c.template_id, c.api_url.empty() ? "" : " at " + c.api_url);
}
#if REX_WITH_MODAL
std::string describe_modal(const DeploymentConfig& config) {
  return "modal " + config.get<ModalDeploymentConfig>().image;
}
#endif

// `rex gc` where each backend's settings point.
asio::awaitable<GcReport> gc_docker(asio::any_io_executor executor, DeploymentConfig config,
                                    GcOptions options) {
  const auto& c = config.get<DockerDeploymentConfig>();
  auto where = docker::engine_config_from_environment(c.container_runtime);
  if (!c.engine.empty())
    where.host = c.engine;
  docker::Engine engine(executor, where);
  co_return co_await collect_garbage(engine, options);
}

asio::awaitable<GcReport> gc_kubernetes(asio::any_io_executor executor, DeploymentConfig config,
                                        GcOptions options) {
  const auto& c = config.get<KubernetesDeploymentConfig>();
  kubernetes::KubeconfigOptions where;
  where.path = c.kubeconfig;
  where.context = c.context;
  kubernetes::ApiClient api(executor, kubernetes::load_cluster_access(where));
  KubernetesGcOptions k8s;
  k8s.gc = options;
  k8s.namespace_name = c.namespace_name;  // empty: every namespace
  co_return co_await collect_kubernetes_garbage(api, k8s);
}

asio::awaitable<GcReport> gc_fargate(asio::any_io_executor executor, DeploymentConfig config,
                                     GcOptions options) {
  const auto& c = config.get<FargateDeploymentConfig>();
  aws::AwsClient client(executor, aws::config_from_environment(c.profile, c.region));
  FargateGcOptions fargate;
  fargate.gc = options;
  fargate.cluster = c.cluster_name;
  co_return co_await collect_fargate_garbage(client, fargate);
}

template <class T, auto Open>
std::unique_ptr<SandboxBackend> open(asio::any_io_executor executor, DeploymentConfig settings) {
  return Open(std::move(executor), std::move(settings.get<T>()));
}

// `rex gc` through a SandboxBackend: what carries rex.managed=1, by the shared rules.
template <class T, auto Open>
asio::awaitable<GcReport> gc_by_listing(asio::any_io_executor executor, DeploymentConfig config,
                                        GcOptions options) {
  std::shared_ptr<SandboxBackend> backend = Open(executor, std::move(config.get<T>()));
  std::map<std::string, std::string> managed{{std::string(labels::managed), "1"}};
  std::vector<SandboxInfo> listed = co_await backend->list(std::move(managed));
  std::vector<GcCandidate> found;
  for (auto& s : listed)
    found.push_back(GcCandidate{s.id, {}, std::move(s.labels)});
  std::function<asio::awaitable<void>(const GcCandidate&)> remove =
      [backend](const GcCandidate& c) -> asio::awaitable<void> { co_await backend->destroy(c.id); };
  auto sweeping = sweep_garbage(std::move(found), options, std::move(remove));
  co_return co_await std::move(sweeping);
}

// A backend that lists its sandboxes: `rex gc` there, and a SandboxBackend.
template <class T, auto Open>
constexpr Backend listing(Backend b, asio::awaitable<GcReport> (*gc)(asio::any_io_executor,
                                                                     DeploymentConfig, GcOptions)) {
  b.gc = gc;
  b.open = open<T, Open>;
  return b;
}

// What the deployment options' flags set on each backend.
constexpr auto integer = FlagKind::integer;
constexpr auto number = FlagKind::number;
constexpr BackendFlag startup_flag{"--startup-timeout", "startup_timeout",
                                   "seconds to wait for the sandbox to answer", number};
constexpr BackendFlag env_flag{"--env", "env", "KEY=VALUE set in sessions (repeatable)",
                               FlagKind::map};
constexpr BackendFlag workdir_flag{"--workdir", "working_dir", "the directory sessions start in"};
constexpr BackendFlag image_flag{"--image", "image", "the image to start"};

constexpr BackendFlag local_flags[] = {workdir_flag, env_flag};
constexpr BackendFlag remote_flags[] = {
    {"--url", "host", "the server's base URL (or host)"},
    {"--token", "auth_token", "the server's auth token"},
    {"--port", "port", "the server's port", integer},
    startup_flag,
};
constexpr BackendFlag docker_flags[] = {
    image_flag,
    {"--port", "port", "the host port to publish the server on", integer},
    {"--pull", "pull", "never, missing or always"},
    {"--docker-arg", "docker_args",
     "a docker-run flag (repeat for more, e.g. --docker-arg=--memory=1g)", FlagKind::list},
    startup_flag,
    workdir_flag,
    env_flag,
    {"--keep", "remove_container", "keep the container after exit", FlagKind::off},
    {"--engine", "engine",
     "the engine, as DOCKER_HOST (unix:///PATH, tcp://HOST:PORT); default: DOCKER_HOST or the "
     "runtime's socket"},
};
constexpr BackendFlag gateway_flags[] = {
    {"--url", "url", "the gateway's base URL"},
    {"--token", "token", "an API key"},
    startup_flag,
    env_flag,
    {"--environment", "environment", "the environment of the session"},
};
constexpr BackendFlag e2b_flags[] = {
    {"--url", "api_url", "the API's URL"},
    {"--token", "api_key", "an API key"},
    {"--port", "server_port", "the server's port in the sandbox", integer},
    startup_flag,
    env_flag,
    {"--environment", "template", "the template"},
};
constexpr BackendFlag kubernetes_flags[] = {
    image_flag,
    {"--port", "port", "the server's port in the pod", integer},
    startup_flag,
    workdir_flag,
    env_flag,
    {"--namespace", "namespace",
     "the namespace of the pod (default: the context's; rex gc: every namespace)"},
    {"--context", "context", "the kubeconfig context (default: the current)"},
    {"--kubeconfig", "kubeconfig",
     "kubeconfig files, ':'-separated (default: KUBECONFIG or ~/.kube/config)"},
};
constexpr BackendFlag fargate_flags[] = {
    image_flag,
    {"--port", "port", "the server's port in the task", integer},
    startup_flag,
    env_flag,
    {"--cluster", "cluster_name", "the ECS cluster (default: rex-cluster)"},
    {"--region", "region", "the AWS region (default: as the AWS CLI finds it)"},
    {"--profile", "profile", "the AWS profile (default: as the AWS CLI finds it)"},
};
constexpr BackendFlag daytona_flags[] = {
    image_flag,
    {"--url", "api_url", "the API's URL"},
    {"--token", "api_key", "an API key"},
    {"--port", "port", "the server's port in the sandbox", integer},
    startup_flag,
    env_flag,
};
#if REX_WITH_MODAL
constexpr BackendFlag modal_flags[] = {
    image_flag,
    {"--url", "server_url", "the API's URL"},
    {"--port", "port", "the server's port in the sandbox", integer},
    startup_flag,
    env_flag,
    {"--environment", "environment", "Modal's environment"},
};
#endif

const Backend table[] = {
    backend<LocalDeploymentConfig, LocalDeployment>("bash sessions on this machine", local_flags),
    backend<RemoteDeploymentConfig, RemoteDeployment>("a running rex-server or swerex-remote",
                                                      remote_flags, describe_remote),
    listing<DockerDeploymentConfig, open_docker_backend>(
        backend<DockerDeploymentConfig, DockerDeployment, check_docker>(
            "a container of a Docker engine", docker_flags, describe_docker),
        gc_docker),
    backend<DummyDeploymentConfig, DummyDeployment, check_dummy>("scripted answers, nothing runs",
                                                                 {}, nullptr, encode_dummy),
    backend<GatewayDeploymentConfig, GatewayDeployment, check_gateway>(
        "a session of a rex gateway", gateway_flags, describe_gateway),
    listing<E2BDeploymentConfig, open_e2b_backend>(
        backend<E2BDeploymentConfig, E2BDeployment, check_e2b>(
            "a sandbox of E2B or an E2B-compatible endpoint", e2b_flags, describe_e2b),
        gc_by_listing<E2BDeploymentConfig, open_e2b_backend>),
    listing<KubernetesDeploymentConfig, open_kubernetes_backend>(
        backend<KubernetesDeploymentConfig, KubernetesDeployment, check_kubernetes>(
            "a pod of a Kubernetes cluster", kubernetes_flags, describe_kubernetes),
        gc_kubernetes),
    listing<FargateDeploymentConfig, open_fargate_backend>(
        backend<FargateDeploymentConfig, FargateDeployment, check_fargate>(
            "a task of AWS Fargate", fargate_flags, describe_fargate),
        gc_fargate),
    listing<DaytonaDeploymentConfig, open_daytona_backend>(
        backend<DaytonaDeploymentConfig, DaytonaDeployment, check_daytona>(
            "a Daytona sandbox", daytona_flags, describe_daytona),
        gc_by_listing<DaytonaDeploymentConfig, open_daytona_backend>),
#if REX_WITH_MODAL
    listing<ModalDeploymentConfig, open_modal_backend>(
        backend<ModalDeploymentConfig, ModalDeployment, check_modal>("a Modal sandbox", modal_flags,
                                                                     describe_modal),
        gc_by_listing<ModalDeploymentConfig, open_modal_backend>),
#endif
};

constexpr BackendAlias aliases[] = {
    {"podman", "docker", "container_runtime", "podman", "a container of Podman (its Docker API)"},
};

#if REX_WITH_MODAL
constexpr std::span<const MissingBackend> missing{};
#else
constexpr MissingBackend missing_table[] = {
    {"modal", "this rex was built without gRPC and protobuf (REX_WITH_MODAL=OFF)"}};
constexpr std::span<const MissingBackend> missing = missing_table;
#endif

}  // namespace

std::span<const Backend> backends() noexcept {
  return table;
}

std::span<const BackendAlias> backend_aliases() noexcept {
  return aliases;
}

std::span<const MissingBackend> missing_backends() noexcept {
  return missing;
}

const Backend* find_backend(std::string_view name) noexcept {
  for (const Backend& b : table) {
    if (b.name == name)
      return &b;
  }
  return nullptr;
}

std::string backend_names() {
  std::string names;
  for (const Backend& b : table) {
    names += (names.empty() ? "" : ", ") + std::string(b.name);
    for (const BackendAlias& a : aliases) {
      if (a.backend == b.name)
        names += ", " + std::string(a.name);
    }
  }
  return names;
}

std::string backend_names(const std::function<bool(const Backend&)>& which) {
  std::string names;
  for (const Backend& b : table) {
    if (which(b))
      names += (names.empty() ? "" : ", ") + std::string(b.name);
  }
  return names;
}

const BackendFlag& backend_flag(std::string_view flag, std::string_view type) {
  if (const Backend* b = find_backend(type)) {
    if (const BackendFlag* f = b->flag(flag))
      return *f;
  }
  // Those the flag applies to, for the error.
  const std::string types =
      backend_names([flag](const Backend& b) { return b.flag(flag) != nullptr; });
  if (types.empty())
    throw DeploymentConfigError(fmt::format("{}: unknown deployment flag", flag));
  throw DeploymentConfigError(
      fmt::format("{} does not apply to a {} deployment (only to {})", flag, type, types));
}

std::vector<const BackendFlag*> deployment_flags() {
  std::vector<const BackendFlag*> flags;
  for (const Backend& b : table) {
    for (const BackendFlag& f : b.flags) {
      if (std::none_of(flags.begin(), flags.end(),
                       [&](const auto* g) { return g->flag == f.flag; }))
        flags.push_back(&f);
    }
  }
  return flags;
}

std::string backend_flag_help(std::string_view flag) {
  // Backends saying the same of the flag share one clause: "docker, kubernetes: the image".
  std::vector<std::pair<std::string, std::string_view>> clauses;
  for (const Backend& b : table) {
    if (const BackendFlag* f = b.flag(flag)) {
      auto same = std::find_if(clauses.begin(), clauses.end(),
                               [&](const auto& c) { return c.second == f->help; });
      if (same == clauses.end())
        clauses.emplace_back(std::string(b.name), f->help);
      else
        same->first += ", " + std::string(b.name);
    }
  }
  std::string help;
  for (const auto& [names, text] : clauses)
    help += fmt::format("{}{}: {}", help.empty() ? "" : "; ", names, text);
  return help;
}

std::optional<json::object> backend_base_config(std::string_view name) {
  if (find_backend(name) != nullptr)
    return json::object{{"type", name}};
  for (const BackendAlias& a : aliases) {
    if (a.name == name && find_backend(a.backend) != nullptr)
      return json::object{{"type", a.backend}, {a.field, a.value}};
  }
  return std::nullopt;
}

std::string describe_deployment(const DeploymentConfig& config) {
  const Backend* b = find_backend(config.type());
  return b != nullptr && b->describe != nullptr ? b->describe(config) : std::string(config.type());
}

std::string_view deployment_type(const DeploymentConfig& config) noexcept {
  return config.type();
}

std::span<const std::string_view> hardened_capabilities() noexcept {
  static constexpr std::string_view caps[] = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID",
                                              "KILL",  "SETGID",       "SETUID"};
  return caps;
}

std::string_view to_string(PullPolicy policy) noexcept {
  switch (policy) {
    case PullPolicy::never:
      return "never";
    case PullPolicy::missing:
      return "missing";
    case PullPolicy::always:
      return "always";
  }
  return "missing";
}

DeploymentConfig deployment_config_from_json(const json::value& value) {
  if (!value.is_object())
    throw DeploymentConfigError(fmt::format("deployment config: expected an object, got {}",
                                            detail::json_kind_phrase(value)));
  const json::object& o = value.as_object();
  std::string type = "docker";
  if (const json::value* t = o.if_contains("type")) {
    if (!t->is_string())
      throw DeploymentConfigError(fmt::format("deployment config: type: expected a string, got {}",
                                              detail::json_kind_phrase(*t)));
    type = std::string(t->as_string());
  }
  if (const Backend* b = find_backend(type))
    return b->decode(o);
  for (const MissingBackend& m : missing) {
    if (m.name == type)
      throw DeploymentConfigError(fmt::format(
          "deployment config: the {} backend is not in this build: {}", type, m.reason));
  }
  std::string names;
  for (std::size_t i = 0; i < std::size(table); ++i)
    names += fmt::format("{}{}",
                         i == 0                      ? ""
                         : i + 1 == std::size(table) ? " or "
                                                     : ", ",
                         table[i].name);
  throw DeploymentConfigError(
      fmt::format("deployment config: unknown type \"{}\" (expected {})", type, names));
}

DeploymentConfig load_deployment_config(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw DeploymentConfigError(fmt::format("cannot open deployment config '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  json::value value = json::parse(text.str(), ec);
  if (ec)
    throw DeploymentConfigError(fmt::format("{}: not valid JSON ({})", path, ec.message()));
  try {
    return deployment_config_from_json(value);
  } catch (const DeploymentConfigError& e) {
    throw DeploymentConfigError(fmt::format("{}: {}", path, e.what()));
  }
}

json::object to_json(const DeploymentConfig& config) {
  const Backend* b = find_backend(config.type());
  if (b == nullptr)
    throw DeploymentConfigError(fmt::format("the {} backend is not in this build", config.type()));
  return b->encode(config);
}

std::unique_ptr<Deployment> make_deployment(asio::any_io_executor executor,
                                            DeploymentConfig config) {
  const Backend* b = find_backend(config.type());
  if (b == nullptr)
    throw DeploymentConfigError(fmt::format("the {} backend is not in this build", config.type()));
  return b->make(std::move(executor), std::move(config));
}

}  // namespace rex
