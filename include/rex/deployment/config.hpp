// DeploymentConfig: what to start, as data. Read from JSON (a file, a CLI flag, an evaluation
// instance) with a "type" discriminator, each type mapped one to one onto a settings struct,
// and turned into a Deployment by make_deployment().
//
// Field names follow SWE-ReX's deployment configs wherever they mean the same thing, so an
// existing SWE-agent deployment section loads unchanged. SWE-ReX fields that rex has no use for
// (python_standalone_dir, exec_shell) are accepted and ignored. Unknown fields are refused, as
// SWE-ReX refuses them: a typo must not silently fall back to a default.
#pragma once

#include <rex/deployment/deployment.hpp>
#include <rex/deployment/settings.hpp>
#include <rex/protocol/actions.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <any>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

/// A LocalRuntime in this process: bash sessions on this machine.
struct LocalDeploymentConfig {
  static constexpr std::string_view backend = "local";

  std::string working_dir{};  // sessions start here (created when missing); empty: current dir
  std::map<std::string, std::string> env{};  // added to every session's environment
};
BOOST_DESCRIBE_STRUCT(LocalDeploymentConfig, (), (working_dir, env))

/// A running rex-server or swerex-remote. host may be a whole base URL (http, https, http+unix);
/// a port, when set, is appended to it.
struct RemoteDeploymentConfig {
  static constexpr std::string_view backend = "remote";
  static constexpr settings::Rule rules[] = {{.member = "port", .min = 1, .max = 65535}};

  std::string auth_token{};
  std::string host = "http://127.0.0.1";
  std::optional<int> port{};
  double timeout = 0.15;          // is_alive's timeout, seconds (SWE-ReX's meaning)
  double startup_timeout = 10.0;  // start() waits this long for the server to answer
  // stop() closes the server's sessions (SWE-ReX's behaviour). Off for a client that works
  // beside others' sessions and must leave them alone (`rex shell`'s terminal); not in JSON.
  bool close_on_stop = true;
};
BOOST_DESCRIBE_STRUCT(RemoteDeploymentConfig, (),
                      (auth_token, host, port, timeout, startup_timeout))

/// Scripted observations for testing agents without running anything (see DummyRuntime).
struct DummyDeploymentConfig {
  static constexpr std::string_view backend = "dummy";

  std::vector<BashObservation> run_in_session_outputs{};
};
BOOST_DESCRIBE_STRUCT(DummyDeploymentConfig, (), ())

enum class PullPolicy { never, missing, always };
BOOST_DESCRIBE_ENUM(PullPolicy, never, missing, always)

/// A container started through the Docker Engine API (or Podman's compatible API), with
/// rex-server injected into it. See docker_deployment.hpp.
struct DockerDeploymentConfig {
  static constexpr std::string_view backend = "docker";
  static constexpr settings::Rule rules[] = {
      {.member = "port", .min = 1, .max = 65535},
      {.member = "container_runtime", .choices = "docker|podman"},
      {.member = "server_transfer", .choices = "auto|mount|upload"},
      {.member = "connect", .choices = "auto|port|container_ip"},
      {.member = "pids_limit", .min = -1},
      {.member = "security_profile", .choices = "default|hardened"}};

  // SWE-ReX's fields.
  std::string image = "python:3.11";
  std::optional<int> port{};  // host port on 127.0.0.1; none: the engine picks a free one
  std::vector<std::string> docker_args{};  // docker-run flags, translated (docker_args.hpp)
  double startup_timeout = 180.0;
  PullPolicy pull = PullPolicy::missing;
  bool remove_images = false;  // remove the image after stop (when no other container uses it)
  std::optional<std::string> platform{};  // "linux/amd64"; also taken from --platform
  bool remove_container = true;
  std::string container_runtime = "docker";  // docker | podman: picks the default engine socket
  std::string docker_internal_host = "http://127.0.0.1";  // where published ports are reached

  // rex's fields.
  std::string engine{};  // DOCKER_HOST form (unix:///..., tcp://...); empty: the environment's
  std::string network_mode{};  // "none": no network, the server on a bind-mounted unix socket
  std::optional<std::string> memory{};  // "512m", "2g" or bytes
  std::optional<double> cpus{};         // 1.5 = one and a half cores
  std::optional<std::int64_t> pids_limit{};
  std::map<std::string, std::string> env{};
  std::vector<std::string> mounts{};  // "HOST:CONTAINER[:ro]", as docker run -v
  std::map<std::string, std::string> labels{};
  std::string working_dir{};
  std::string user{};
  // Merged into the Engine API's container-create body last, objects key by key, so anything
  // the fields above do not cover can still be set.
  boost::json::object create_options{};
  std::string server_path{};  // the static rex-server to inject; empty: found automatically
  std::string server_transfer = "auto";  // auto | mount | upload (auto: mount when local)
  // How the client reaches the server: auto | port | container_ip. port: a port published on
  // 127.0.0.1 (SWE-ReX's way; works with every engine). container_ip: the container's own
  // address on its network, nothing published, so no proxy process and no firewall rules per
  // container (cheaper starts and stops); this machine must route to that network, as it does
  // to a rootful local engine's bridge. auto: container_ip when the engine is local and the
  // network's gateway is an address of this machine, unless port or docker_internal_host is
  // set; port otherwise. Network modes none and host use a unix socket whatever this says.
  std::string connect = "auto";
  double max_lifetime = 86400.0;  // rex-server exits after this many seconds; 0: never
  // Docker's init (docker-init) as PID 1. Without it rex-server is PID 1 and stays behind as
  // the init that reaps orphaned processes and passes signals on, and nothing in the container
  // keeps the server's token in its environment (docker-init keeps it in /proc/1/environ).
  bool init = false;
  std::string container_name{};  // empty: rex-<deployment id>
  // "default", or "hardened": no new privileges, every capability dropped but
  // hardened_capabilities(), a read-only root (tmpfs /tmp and /var/tmp, the work dir a volume),
  // memory and pids limits unless set, and no network (the server on a unix socket).
  std::string security_profile = "default";
};
BOOST_DESCRIBE_STRUCT(DockerDeploymentConfig, (),
                      (image, port, docker_args, startup_timeout, pull, remove_images, platform,
                       remove_container, container_runtime, docker_internal_host, engine,
                       network_mode, memory, cpus, pids_limit, env, mounts, labels, working_dir,
                       user, create_options, server_path, server_transfer, connect, max_lifetime,
                       init, container_name, security_profile))

/// The capabilities a hardened container keeps: what root inside a sandbox needs to own, chmod
/// and chown its files, switch to another user and signal its own processes.
/// CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID.
std::span<const std::string_view> hardened_capabilities() noexcept;

/// A session of a rex gateway (docs/gateway.md).
struct GatewayDeploymentConfig {
  static constexpr std::string_view backend = "gateway";

  std::string url = "http://127.0.0.1:8000";  // the gateway's base URL
  std::string token{};                        // an API key of the gateway (none: no keys there)
  std::string environment = "local";          // one of the gateway's environments
  std::string provider{};                     // empty: the environment's
  std::optional<double> timeout{};            // idle seconds before the gateway ends it
  std::optional<double> max_lifetime{};       // seconds; none: the environment's
  std::map<std::string, std::string> metadata{};
  std::map<std::string, std::string> env{};
  double startup_timeout = 120.0;  // the create's answer and the sandbox's first answer
};
BOOST_DESCRIBE_STRUCT(GatewayDeploymentConfig, (),
                      (url, token, environment, provider, timeout, max_lifetime, metadata, env,
                       startup_timeout))

/// A sandbox of E2B, or of any E2B-compatible endpoint (rex/deployment/e2b_deployment.hpp).
/// Empty strings take E2B's environment variables, as its SDKs do.
struct E2BDeploymentConfig {
  static constexpr std::string_view backend = "e2b";
  static constexpr settings::Rule rules[] = {{.member = "template_id", .name = "template"},
                                             {.member = "server_port", .min = 0, .max = 65535}};

  std::string api_key{};      // X-API-KEY of the control API; empty: E2B_API_KEY
  std::string api_url{};      // the control API; empty: E2B_API_URL, else https://api.DOMAIN
  std::string sandbox_url{};  // one URL for every sandbox port (E2b-Sandbox-* headers); empty:
                              // E2B_SANDBOX_URL, else https://PORT-SANDBOX.DOMAIN
  std::string domain{};       // empty: E2B_DOMAIN, else e2b.app (or what the create answers)
  std::string template_id = "base";  // E2B's template (on a rex gateway: an environment)
  double timeout = 3600;             // the sandbox's lifetime in seconds; E2B ends it then
  std::map<std::string, std::string> metadata{};
  std::map<std::string, std::string> env{};  // the sandbox's environment variables
  std::string server_path{};  // the static rex-server to upload; empty: found as Docker's is
  // A rex-server already in the template (an absolute path in the sandbox): started there, and
  // nothing but the token is uploaded. Empty: server_path is uploaded into each sandbox.
  std::string template_server_path{};
  int server_port = 0;             // rex-server's port in the sandbox; 0: any free one
  double startup_timeout = 120.0;  // each step: the create, the upload, the server's start
};
BOOST_DESCRIBE_STRUCT(E2BDeploymentConfig, (),
                      (api_key, api_url, sandbox_url, domain, template_id, timeout, metadata, env,
                       server_path, template_server_path, server_port, startup_timeout))

/// A pod of a Kubernetes cluster, with rex-server put into it by an init container
/// (rex/deployment/kubernetes_deployment.hpp, docs/kubernetes.md).
struct KubernetesDeploymentConfig {
  static constexpr std::string_view backend = "kubernetes";
  static constexpr settings::Rule rules[] = {
      {.member = "namespace_name", .name = "namespace"},
      {.member = "image_pull_policy", .choices = "Always|IfNotPresent|Never"},
      {.member = "port", .min = 1, .max = 65535},
      {.member = "connect", .choices = "auto|proxy|pod_ip"}};

  std::string image = "python:3.11";  // the sandbox's image; it needs a shell and nothing else
  std::string namespace_name{};       // "namespace"; empty: the kubeconfig context's
  std::string kubeconfig{};    // files separated by ':'; empty: $KUBECONFIG, ~/.kube/config, or
                               // the service account when this runs in a pod
  std::string context{};       // empty: the current context
  std::string server_image{};  // holds /rex-server; empty: rex.local/rex-server:<rex's version>
  std::string image_pull_policy = "IfNotPresent";  // Always | IfNotPresent | Never
  int port = 8000;                                 // rex-server's port in the pod
  boost::json::object resources{};                 // {"requests": {...}, "limits": {...}}
  std::map<std::string, std::string> node_selector{};
  boost::json::array tolerations{};
  std::string runtime_class_name{};
  std::string service_account{};  // empty: none, and no API token mounted into the sandbox
  std::vector<std::string> image_pull_secrets{};
  std::map<std::string, std::string> env{};
  std::map<std::string, std::string> labels{};
  std::string working_dir{};       // the sandbox container's; empty: the image's
  double startup_timeout = 180.0;  // scheduling, pulling and the server's first answer
  double max_lifetime = 86400.0;   // activeDeadlineSeconds and rex-server's own; 0: none
  // Merged into the whole pod object last (a JSON merge patch), for anything else.
  boost::json::object pod_overrides{};
  // How the client reaches the server: auto | proxy | pod_ip. proxy: through the API server's
  // pod proxy (works from anywhere the API server is reached). pod_ip: straight to the pod's
  // address (in the cluster, or on a node). auto: pod_ip when this process runs in a pod or the
  // pod's address is on a network of this machine, proxy otherwise.
  std::string connect = "auto";
  std::string pod_name{};  // empty: rex-<deployment id>
};
BOOST_DESCRIBE_STRUCT(KubernetesDeploymentConfig, (),
                      (image, namespace_name, kubeconfig, context, server_image, image_pull_policy,
                       port, resources, node_selector, tolerations, runtime_class_name,
                       service_account, image_pull_secrets, env, labels, working_dir,
                       startup_timeout, max_lifetime, pod_overrides, connect, pod_name))

// AWS Fargate (docs/deployments.md): SWE-ReX's field names where it has them, rex's own after.
struct FargateDeploymentConfig {
  static constexpr std::string_view backend = "fargate";
  static constexpr settings::Rule rules[] = {
      {.member = "port", .min = 1, .max = 65535},
      {.member = "log_group", .null_clears = true},
      {.member = "connect", .choices = "public_ip|private_ip"}};

  std::string image = "python:3.11";  // the sandbox's image; it needs nothing at all
  int port = 8880;                    // rex-server's port in the task
  std::string cluster_name = "rex-cluster";
  std::string execution_role_prefix = "rex-execution-role";
  std::string task_definition_prefix = "rex-task";
  std::string log_group = "/ecs/rex-deployment";  // CloudWatch Logs; empty: no logs
  std::string security_group_prefix = "rex-deployment-sg";
  boost::json::object fargate_args{};  // merged into RunTask's overrides (cpu, memory, ...)
  double container_timeout = 900.0;    // the task's lifetime: rex-server ends itself then
  double runtime_timeout = 60.0;       // from RUNNING to the server's first answer
  // rex's own:
  std::string server_image{};  // holds /rex-server, pullable by Fargate (ECR); empty: the default
  std::string region{};        // empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's
  std::string profile{};       // empty: AWS_PROFILE or default (the environment's keys first)
  std::string subnet_id{};     // empty: the first subnet of the default VPC
  std::string security_group_id{};  // empty: one opening `port` to ingress_cidr, made once
  std::string ingress_cidr = "0.0.0.0/0";
  bool assign_public_ip = true;
  std::string connect = "public_ip";            // public_ip | private_ip: which address of the task
  std::string cpu = "1024";                     // the task's CPU units
  std::string memory = "2048";                  // the task's memory (MiB)
  double startup_timeout = 300.0;               // RunTask to RUNNING
  std::map<std::string, std::string> env{};     // the sandbox container's environment
  std::map<std::string, std::string> labels{};  // the task's tags, besides rex's own
};
BOOST_DESCRIBE_STRUCT(FargateDeploymentConfig, (),
                      (image, port, cluster_name, execution_role_prefix, task_definition_prefix,
                       log_group, security_group_prefix, fargate_args, container_timeout,
                       runtime_timeout, server_image, region, profile, subnet_id, security_group_id,
                       ingress_cidr, assign_public_ip, connect, cpu, memory, startup_timeout, env,
                       labels))

// A Daytona sandbox (rex/deployment/daytona_deployment.hpp, docs/daytona.md): SWE-ReX's field
// names where it has them, rex's own after. Empty strings take Daytona's environment variables.
struct DaytonaDeploymentConfig {
  static constexpr std::string_view backend = "daytona";
  static constexpr settings::Rule rules[] = {{.member = "port", .min = 1, .max = 65535},
                                             {.member = "public_preview", .name = "public"}};

  std::string api_key{};              // empty: DAYTONA_API_KEY
  std::string target{};               // the region; empty: DAYTONA_TARGET, else Daytona's default
  int port = 8000;                    // rex-server's port in the sandbox
  double container_timeout = 900.0;   // the sandbox's time to live; rex-server's too
  double runtime_timeout = 60.0;      // from the server's start to its first answer
  std::string image = "python:3.11";  // the sandbox's image; it needs a POSIX shell
  // rex's own:
  std::string api_url{};          // empty: DAYTONA_API_URL, else https://app.daytona.io/api
  std::string organization_id{};  // X-Daytona-Organization-ID (for a JWT instead of a key)
  std::string snapshot{};         // a Daytona snapshot to start from instead of image
  bool public_preview = false;    // "public": the port's preview needs no token
  std::map<std::string, std::string> env{};     // the sandbox's environment variables
  std::map<std::string, std::string> labels{};  // besides rex's own
  boost::json::object sandbox_args{};  // merged into the create request (cpu, memory, disk, ...)
  std::string server_path{};           // the static rex-server to upload; empty: found as usual
  double startup_timeout = 300.0;      // the create, the image's build and the sandbox's start
};
BOOST_DESCRIBE_STRUCT(DaytonaDeploymentConfig, (),
                      (api_key, target, port, container_timeout, runtime_timeout, image, api_url,
                       organization_id, snapshot, public_preview, env, labels, sandbox_args,
                       server_path, startup_timeout))

// A Modal sandbox (rex/deployment/modal_deployment.hpp, docs/modal.md): SWE-ReX's field names
// where it has them, rex's own after. Empty strings take Modal's environment variables.
struct ModalDeploymentConfig {
  static constexpr std::string_view backend = "modal";
  static constexpr settings::Rule rules[] = {{.member = "port", .min = 1, .max = 65535}};

  std::string image = "python:3.11";   // a registry image; it needs nothing at all
  double startup_timeout = 180.0;      // the image, the sandbox's start and its tunnel
  double runtime_timeout = 60.0;       // from the tunnel to the server's first answer
  double deployment_timeout = 3600.0;  // the sandbox's lifetime: Modal ends it, and the server
  bool install_pipx = true;            // accepted for SWE-ReX's configs; rex needs no pipx
  // rex's own:
  int port = 8000;               // rex-server's port in the sandbox, behind an encrypted tunnel
  std::string app_name = "rex";  // the Modal app the sandboxes belong to (made if missing)
  std::string environment{};     // empty: MODAL_ENVIRONMENT, else the workspace's default
  std::string server_url{};      // empty: MODAL_SERVER_URL, else https://api.modal.com
  std::string token_id{};        // empty: MODAL_TOKEN_ID
  std::string token_secret{};    // empty: MODAL_TOKEN_SECRET
  std::string server_path{};     // the static rex-server to mount; empty: found as usual
  std::string ca_file{};         // extra trusted certificates (PEM) for the API and tunnels
  std::map<std::string, std::string> env{};     // the sandbox's environment (a secret of the app)
  std::map<std::string, std::string> labels{};  // the sandbox's tags, besides rex's own
  // Merged into Modal's Sandbox message (protobuf's JSON form: {"resources": {"milliCpu":
  // 2000}, "workdir": "/src"}), for anything else.
  boost::json::object sandbox_definition{};
};
BOOST_DESCRIBE_STRUCT(ModalDeploymentConfig, (),
                      (image, startup_timeout, runtime_timeout, deployment_timeout, install_pipx,
                       port, app_name, environment, server_url, token_id, token_secret, server_path,
                       ca_file, env, labels, sandbox_definition))

/// The settings of one backend, whichever it is: a value, as the settings struct is (a copy is
/// independent of the original). Made from any settings struct above (each names its backend);
/// the default is a local deployment.
class DeploymentConfig {
 public:
  DeploymentConfig() : DeploymentConfig(LocalDeploymentConfig{}) {}
  template <class T>
  requires requires { std::string_view(T::backend); }
  DeploymentConfig(T settings) : type_(T::backend), value_(std::move(settings)) {}

  /// The backend's name: "docker", "kubernetes", ...
  std::string_view type() const noexcept { return type_; }
  /// The settings when they are a T, else null.
  template <class T>
  T* get_if() noexcept {
    return std::any_cast<T>(&value_);
  }
  template <class T>
  const T* get_if() const noexcept {
    return std::any_cast<T>(&value_);
  }
  template <class T>
  bool holds() const noexcept {
    return get_if<T>() != nullptr;
  }
  /// The settings as a T; std::bad_any_cast when they are another backend's.
  template <class T>
  T& get() {
    return std::any_cast<T&>(value_);
  }
  template <class T>
  const T& get() const {
    return std::any_cast<const T&>(value_);
  }

 private:
  std::string_view type_;
  std::any value_;
};

/// The backend's name: "local", "remote", "docker", "dummy", "gateway", "e2b", "kubernetes",
/// "fargate", "daytona" or "modal".
std::string_view deployment_type(const DeploymentConfig& config) noexcept;

/// Decodes a config object; "type" selects the backend (absent: "docker", as SWE-agent's
/// default). DeploymentConfigError for an unknown type, an unknown field, a wrong type or a
/// bad value, naming it.
DeploymentConfig deployment_config_from_json(const boost::json::value& json);
/// Reads a JSON file holding one config object. DeploymentConfigError names the file.
DeploymentConfig load_deployment_config(const std::string& path);
/// Every field, so the result loads back to the same config.
boost::json::object to_json(const DeploymentConfig& config);

std::string_view to_string(PullPolicy policy) noexcept;

/// The deployment for a config. Nothing starts until start(). DeploymentConfigError for
/// settings that cannot work together (checked here, before anything runs).
std::unique_ptr<Deployment> make_deployment(asio::any_io_executor executor,
                                            DeploymentConfig config);

}  // namespace rex
