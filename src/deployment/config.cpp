// Deployment configs from and to JSON, strictly: every field known, every value checked, and
// each error naming "type.field".
#include <rex/deployment/config.hpp>
#include <rex/deployment/daytona_deployment.hpp>
#include <rex/deployment/docker_args.hpp>
#include <rex/deployment/docker_deployment.hpp>
#include <rex/deployment/dummy_deployment.hpp>
#include <rex/deployment/e2b_deployment.hpp>
#include <rex/deployment/fargate_deployment.hpp>
#include <rex/deployment/gateway_deployment.hpp>
#include <rex/deployment/kubernetes_deployment.hpp>
#include <rex/deployment/local_deployment.hpp>
#include <rex/deployment/modal_deployment.hpp>
#include <rex/deployment/remote_deployment.hpp>
#include <rex/protocol/json.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/json_kind.hpp"

namespace rex {

namespace json = boost::json;

namespace {

// Reads the fields of one config object, and refuses what it did not read.
class Reader {
 public:
  Reader(const json::object& object, std::string_view type) : object_(object), type_(type) {}

  void string(std::string_view key, std::string& out) {
    if (const json::value* v = take(key)) {
      if (!v->is_string())
        wrong(key, "a string", *v);
      out = std::string(v->as_string());
    }
  }

  void optional_string(std::string_view key, std::optional<std::string>& out) {
    if (const json::value* v = take(key)) {
      if (v->is_null())
        out.reset();
      else if (v->is_string())
        out = std::string(v->as_string());
      else
        wrong(key, "a string or null", *v);
    }
  }

  void boolean(std::string_view key, bool& out) {
    if (const json::value* v = take(key)) {
      if (!v->is_bool())
        wrong(key, "true or false", *v);
      out = v->as_bool();
    }
  }

  void number(std::string_view key, double& out, double min = 0) {
    if (const json::value* v = take(key)) {
      if (!v->is_number())
        wrong(key, "a number", *v);
      out = v->to_number<double>();
      if (!std::isfinite(out) || out < min)
        fail(key, fmt::format("{} must be a number of at least {}", out, min));
    }
  }

  void optional_number(std::string_view key, std::optional<double>& out, double min = 0) {
    if (const json::value* v = take(key)) {
      if (v->is_null()) {
        out.reset();
        return;
      }
      double d = 0;
      number_of(key, *v, d);
      if (d < min)
        fail(key, fmt::format("{} must be at least {}", d, min));
      out = d;
    }
  }

  template <class Int>
  void optional_integer(std::string_view key, std::optional<Int>& out, std::int64_t min,
                        std::int64_t max) {
    if (const json::value* v = take(key)) {
      if (v->is_null()) {
        out.reset();
        return;
      }
      std::int64_t i = 0;
      if (v->is_int64())
        i = v->as_int64();
      else if (v->is_uint64() && v->as_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
        i = static_cast<std::int64_t>(v->as_uint64());
      else if (v->is_double() && std::trunc(v->as_double()) == v->as_double() &&
               std::fabs(v->as_double()) < 9e15)
        i = static_cast<std::int64_t>(v->as_double());
      else
        wrong(key, "an integer or null", *v);
      if (i < min || i > max)
        fail(key, fmt::format("{} is out of range ({}..{})", i, min, max));
      out = static_cast<Int>(i);
    }
  }

  void strings(std::string_view key, std::vector<std::string>& out) {
    if (const json::value* v = take(key)) {
      if (!v->is_array())
        wrong(key, "an array of strings", *v);
      out.clear();
      for (const auto& item : v->as_array()) {
        if (!item.is_string())
          wrong(key, "an array of strings", item);
        out.emplace_back(item.as_string());
      }
    }
  }

  void string_map(std::string_view key, std::map<std::string, std::string>& out) {
    if (const json::value* v = take(key)) {
      if (!v->is_object())
        wrong(key, "an object of strings", *v);
      out.clear();
      for (const auto& [k, item] : v->as_object()) {
        if (item.is_string())
          out[std::string(k)] = std::string(item.as_string());
        else if (item.is_number() || item.is_bool())
          out[std::string(k)] = json::serialize(item);  // {"N": 1} means "1", as YAML users write
        else
          fail(key, fmt::format("value of \"{}\": expected a string, got {}", std::string(k),
                                detail::json_kind_phrase(item)));
      }
    }
  }

  void object(std::string_view key, json::object& out) {
    if (const json::value* v = take(key)) {
      if (!v->is_object())
        wrong(key, "an object", *v);
      out = v->as_object();
    }
  }

  template <class T>
  void choice(std::string_view key, T& out,
              std::initializer_list<std::pair<std::string_view, T>> options) {
    if (const json::value* v = take(key)) {
      if (v->is_string()) {
        for (const auto& [name, value] : options) {
          if (v->as_string() == name) {
            out = value;
            return;
          }
        }
      }
      std::string names;
      for (const auto& [name, value] : options)
        names += (names.empty() ? "" : ", ") + std::string(name);
      fail(key, fmt::format("expected one of {}, got {}", names, json::serialize(*v)));
    }
  }

  void array(std::string_view key, json::array& out) {
    if (const json::value* v = take(key)) {
      if (!v->is_array())
        wrong(key, "an array", *v);
      out = v->as_array();
    }
  }

  const json::value* raw(std::string_view key) { return take(key); }

  /// Unknown fields are errors, as in SWE-ReX's configs.
  void finish() const {
    for (const auto& [k, v] : object_) {
      if (k != "type" && !read_.contains(std::string(k))) {
        throw DeploymentConfigError(fmt::format("{}: unknown field \"{}\"", type_, std::string(k)));
      }
    }
  }

  [[noreturn]] void fail(std::string_view key, std::string message) const {
    throw DeploymentConfigError(fmt::format("{}.{}: {}", type_, key, message));
  }

 private:
  const json::value* take(std::string_view key) {
    read_.insert(std::string(key));
    return object_.if_contains(key);
  }

  void number_of(std::string_view key, const json::value& v, double& out) const {
    if (!v.is_number())
      wrong(key, "a number or null", v);
    out = v.to_number<double>();
  }

  [[noreturn]] void wrong(std::string_view key, std::string_view expected,
                          const json::value& got) const {
    fail(key, fmt::format("expected {}, got {}", expected, detail::json_kind_phrase(got)));
  }

  const json::object& object_;
  std::string type_;
  std::set<std::string> read_;
};

LocalDeploymentConfig read_local(Reader& r) {
  LocalDeploymentConfig c;
  r.string("working_dir", c.working_dir);
  r.string_map("env", c.env);
  return c;
}

RemoteDeploymentConfig read_remote(Reader& r) {
  RemoteDeploymentConfig c;
  r.string("auth_token", c.auth_token);
  r.string("host", c.host);
  r.optional_integer("port", c.port, 1, 65535);
  r.number("timeout", c.timeout);
  r.number("startup_timeout", c.startup_timeout);
  return c;
}

GatewayDeploymentConfig read_gateway(Reader& r) {
  GatewayDeploymentConfig c;
  r.string("url", c.url);
  r.string("token", c.token);
  r.string("environment", c.environment);
  r.string("provider", c.provider);
  r.optional_number("timeout", c.timeout);
  r.optional_number("max_lifetime", c.max_lifetime);
  r.string_map("metadata", c.metadata);
  r.string_map("env", c.env);
  r.number("startup_timeout", c.startup_timeout);
  if (c.environment.empty())
    r.fail("environment", "must not be empty");
  return c;
}

E2BDeploymentConfig read_e2b(Reader& r) {
  E2BDeploymentConfig c;
  r.string("api_key", c.api_key);
  r.string("api_url", c.api_url);
  r.string("sandbox_url", c.sandbox_url);
  r.string("domain", c.domain);
  r.string("template", c.template_id);
  r.number("timeout", c.timeout);
  r.string_map("metadata", c.metadata);
  r.string_map("env", c.env);
  r.string("server_path", c.server_path);
  r.string("template_server_path", c.template_server_path);
  std::optional<std::int64_t> port;
  r.optional_integer("server_port", port, 0, 65535);
  c.server_port = port ? static_cast<int>(*port) : 0;
  r.number("startup_timeout", c.startup_timeout);
  if (c.template_id.empty())
    r.fail("template", "must not be empty");
  if (!(c.timeout > 0))
    r.fail("timeout", "must be a positive number of seconds");
  if (!c.template_server_path.empty() && c.template_server_path.front() != '/')
    r.fail("template_server_path", "must be an absolute path in the sandbox");
  return c;
}

KubernetesDeploymentConfig read_kubernetes(Reader& r) {
  KubernetesDeploymentConfig c;
  r.string("image", c.image);
  r.string("namespace", c.namespace_name);
  r.string("kubeconfig", c.kubeconfig);
  r.string("context", c.context);
  r.string("server_image", c.server_image);
  r.choice("image_pull_policy", c.image_pull_policy,
           {{"Always", std::string("Always")},
            {"IfNotPresent", std::string("IfNotPresent")},
            {"Never", std::string("Never")}});
  std::optional<std::int64_t> port;
  r.optional_integer("port", port, 1, 65535);
  if (port)
    c.port = static_cast<int>(*port);
  r.object("resources", c.resources);
  r.string_map("node_selector", c.node_selector);
  r.array("tolerations", c.tolerations);
  r.string("runtime_class_name", c.runtime_class_name);
  r.string("service_account", c.service_account);
  r.strings("image_pull_secrets", c.image_pull_secrets);
  r.string_map("env", c.env);
  r.string_map("labels", c.labels);
  r.string("working_dir", c.working_dir);
  r.number("startup_timeout", c.startup_timeout);
  r.number("max_lifetime", c.max_lifetime);
  r.object("pod_overrides", c.pod_overrides);
  r.choice("connect", c.connect,
           {{"auto", std::string("auto")},
            {"proxy", std::string("proxy")},
            {"pod_ip", std::string("pod_ip")}});
  r.string("pod_name", c.pod_name);
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
  return c;
}

FargateDeploymentConfig read_fargate(Reader& r) {
  FargateDeploymentConfig c;
  r.string("image", c.image);
  std::optional<std::int64_t> port;
  r.optional_integer("port", port, 1, 65535);
  if (port)
    c.port = static_cast<int>(*port);
  r.string("cluster_name", c.cluster_name);
  r.string("execution_role_prefix", c.execution_role_prefix);
  r.string("task_definition_prefix", c.task_definition_prefix);
  if (const json::value* v = r.raw("log_group")) {
    if (v->is_null())
      c.log_group.clear();  // SWE-ReX's None: no logs
    else if (v->is_string())
      c.log_group = std::string(v->get_string());
    else
      r.fail("log_group", "expected a string or null");
  }
  r.string("security_group_prefix", c.security_group_prefix);
  r.object("fargate_args", c.fargate_args);
  r.number("container_timeout", c.container_timeout);
  r.number("runtime_timeout", c.runtime_timeout);
  r.string("server_image", c.server_image);
  r.string("region", c.region);
  r.string("profile", c.profile);
  r.string("subnet_id", c.subnet_id);
  r.string("security_group_id", c.security_group_id);
  r.string("ingress_cidr", c.ingress_cidr);
  r.boolean("assign_public_ip", c.assign_public_ip);
  r.choice("connect", c.connect,
           {{"public_ip", std::string("public_ip")}, {"private_ip", std::string("private_ip")}});
  r.string("cpu", c.cpu);
  r.string("memory", c.memory);
  r.number("startup_timeout", c.startup_timeout);
  r.string_map("env", c.env);
  r.string_map("labels", c.labels);
  if (c.image.empty())
    r.fail("image", "must not be empty");
  if (c.cluster_name.empty())
    r.fail("cluster_name", "must not be empty");
  if (!(c.container_timeout > 0))
    r.fail("container_timeout", "must be a positive number of seconds");
  if (!(c.runtime_timeout > 0))
    r.fail("runtime_timeout", "must be a positive number of seconds");
  if (!(c.startup_timeout > 0))
    r.fail("startup_timeout", "must be a positive number of seconds");
  return c;
}

DaytonaDeploymentConfig read_daytona(Reader& r) {
  DaytonaDeploymentConfig c;
  r.string("api_key", c.api_key);
  r.string("target", c.target);
  std::optional<std::int64_t> port;
  r.optional_integer("port", port, 1, 65535);
  if (port)
    c.port = static_cast<int>(*port);
  r.number("container_timeout", c.container_timeout);
  r.number("runtime_timeout", c.runtime_timeout);
  r.string("image", c.image);
  r.string("api_url", c.api_url);
  r.string("organization_id", c.organization_id);
  r.string("snapshot", c.snapshot);
  r.boolean("public", c.public_preview);
  r.string_map("env", c.env);
  r.string_map("labels", c.labels);
  r.object("sandbox_args", c.sandbox_args);
  r.string("server_path", c.server_path);
  r.number("startup_timeout", c.startup_timeout);
  if (c.image.empty() && c.snapshot.empty())
    r.fail("image", "must not be empty (or give a snapshot)");
  if (!(c.container_timeout >= 60))
    r.fail("container_timeout", "must be at least 60 seconds (Daytona counts minutes)");
  if (!(c.runtime_timeout > 0))
    r.fail("runtime_timeout", "must be a positive number of seconds");
  if (!(c.startup_timeout > 0))
    r.fail("startup_timeout", "must be a positive number of seconds");
  return c;
}

ModalDeploymentConfig read_modal(Reader& r) {
  ModalDeploymentConfig c;
  r.string("image", c.image);
  r.number("startup_timeout", c.startup_timeout);
  r.number("runtime_timeout", c.runtime_timeout);
  r.number("deployment_timeout", c.deployment_timeout);
  r.boolean("install_pipx", c.install_pipx);
  json::object kwargs;
  r.object("modal_sandbox_kwargs", kwargs);
  if (!kwargs.empty())
    r.fail("modal_sandbox_kwargs",
           "holds arguments of Modal's Python SDK; give the Sandbox message's fields as "
           "sandbox_definition instead");
  std::optional<std::int64_t> port;
  r.optional_integer("port", port, 1, 65535);
  if (port)
    c.port = static_cast<int>(*port);
  r.string("app_name", c.app_name);
  r.string("environment", c.environment);
  r.string("server_url", c.server_url);
  r.string("token_id", c.token_id);
  r.string("token_secret", c.token_secret);
  r.string("server_path", c.server_path);
  r.string("ca_file", c.ca_file);
  r.string_map("env", c.env);
  r.string_map("labels", c.labels);
  r.object("sandbox_definition", c.sandbox_definition);
  if (c.image.empty())
    r.fail("image", "must not be empty");
  if (c.app_name.empty())
    r.fail("app_name", "must not be empty");
  if (!(c.deployment_timeout >= 1 && c.deployment_timeout <= 86400))
    r.fail("deployment_timeout", "must be from 1 to 86400 seconds (Modal's limit)");
  if (!(c.startup_timeout > 0))
    r.fail("startup_timeout", "must be a positive number of seconds");
  if (!(c.runtime_timeout > 0))
    r.fail("runtime_timeout", "must be a positive number of seconds");
  return c;
}

DummyDeploymentConfig read_dummy(Reader& r) {
  DummyDeploymentConfig c;
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
  return c;
}

DockerDeploymentConfig read_docker(Reader& r) {
  DockerDeploymentConfig c;
  r.string("image", c.image);
  r.optional_integer("port", c.port, 1, 65535);
  r.strings("docker_args", c.docker_args);
  r.number("startup_timeout", c.startup_timeout);
  r.choice("pull", c.pull,
           {{"never", PullPolicy::never},
            {"missing", PullPolicy::missing},
            {"always", PullPolicy::always}});
  r.boolean("remove_images", c.remove_images);
  std::optional<std::string> ignored;
  r.optional_string("python_standalone_dir", ignored);  // rex needs no Python in the image
  std::vector<std::string> ignored_list;
  r.strings("exec_shell", ignored_list);  // rex runs no shell command to start its server
  r.optional_string("platform", c.platform);
  r.boolean("remove_container", c.remove_container);
  r.choice("container_runtime", c.container_runtime,
           {{"docker", std::string("docker")}, {"podman", std::string("podman")}});
  r.string("docker_internal_host", c.docker_internal_host);
  r.string("engine", c.engine);
  r.string("network_mode", c.network_mode);
  r.optional_string("memory", c.memory);
  r.optional_number("cpus", c.cpus);
  r.optional_integer("pids_limit", c.pids_limit, -1, INT64_MAX);
  r.string_map("env", c.env);
  r.strings("mounts", c.mounts);
  r.string_map("labels", c.labels);
  r.string("working_dir", c.working_dir);
  r.string("user", c.user);
  r.object("create_options", c.create_options);
  r.string("server_path", c.server_path);
  r.choice("server_transfer", c.server_transfer,
           {{"auto", std::string("auto")},
            {"mount", std::string("mount")},
            {"upload", std::string("upload")}});
  r.choice("connect", c.connect,
           {{"auto", std::string("auto")},
            {"port", std::string("port")},
            {"container_ip", std::string("container_ip")}});
  r.number("max_lifetime", c.max_lifetime);
  r.boolean("init", c.init);
  r.string("container_name", c.container_name);
  r.choice("security_profile", c.security_profile,
           {{"default", std::string("default")}, {"hardened", std::string("hardened")}});
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
  return c;
}

json::value optional_value(const std::optional<std::string>& s) {
  return s ? json::value(*s) : json::value(nullptr);
}

json::object map_value(const std::map<std::string, std::string>& m) {
  json::object o;
  for (const auto& [k, v] : m)
    o[k] = v;
  return o;
}

json::array list_value(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v)
    a.emplace_back(s);
  return a;
}

}  // namespace

std::string_view deployment_type(const DeploymentConfig& config) noexcept {
  static constexpr std::string_view names[] = {"local",   "remote", "docker",     "dummy",
                                               "gateway", "e2b",    "kubernetes", "fargate",
                                               "daytona", "modal"};
  static_assert(std::size(names) == std::variant_size_v<DeploymentConfig>,
                "a name for every deployment type, in the variant's order");
  return names[config.index()];
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
  Reader r(o, type);
  DeploymentConfig config;
  if (type == "local")
    config = read_local(r);
  else if (type == "remote")
    config = read_remote(r);
  else if (type == "docker")
    config = read_docker(r);
  else if (type == "dummy")
    config = read_dummy(r);
  else if (type == "gateway")
    config = read_gateway(r);
  else if (type == "e2b")
    config = read_e2b(r);
  else if (type == "kubernetes")
    config = read_kubernetes(r);
  else if (type == "fargate")
    config = read_fargate(r);
  else if (type == "daytona")
    config = read_daytona(r);
  else if (type == "modal")
    config = read_modal(r);
  else
    throw DeploymentConfigError(
        fmt::format("deployment config: unknown type \"{}\" (expected local, remote, docker, "
                    "dummy, gateway, e2b, kubernetes, fargate, daytona or modal)",
                    type));
  r.finish();
  return config;
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
  json::object o;
  o["type"] = deployment_type(config);
  if (const auto* c = std::get_if<LocalDeploymentConfig>(&config)) {
    o["working_dir"] = c->working_dir;
    o["env"] = map_value(c->env);
  } else if (const auto* c = std::get_if<RemoteDeploymentConfig>(&config)) {
    o["auth_token"] = c->auth_token;
    o["host"] = c->host;
    o["port"] = c->port ? json::value(*c->port) : json::value(nullptr);
    o["timeout"] = c->timeout;
    o["startup_timeout"] = c->startup_timeout;
  } else if (const auto* c = std::get_if<GatewayDeploymentConfig>(&config)) {
    o["url"] = c->url;
    o["token"] = c->token;
    o["environment"] = c->environment;
    o["provider"] = c->provider;
    o["timeout"] = c->timeout ? json::value(*c->timeout) : json::value(nullptr);
    o["max_lifetime"] = c->max_lifetime ? json::value(*c->max_lifetime) : json::value(nullptr);
    o["metadata"] = map_value(c->metadata);
    o["env"] = map_value(c->env);
    o["startup_timeout"] = c->startup_timeout;
  } else if (const auto* c = std::get_if<E2BDeploymentConfig>(&config)) {
    o["api_key"] = c->api_key;
    o["api_url"] = c->api_url;
    o["sandbox_url"] = c->sandbox_url;
    o["domain"] = c->domain;
    o["template"] = c->template_id;
    o["timeout"] = c->timeout;
    o["metadata"] = map_value(c->metadata);
    o["env"] = map_value(c->env);
    o["server_path"] = c->server_path;
    o["template_server_path"] = c->template_server_path;
    o["server_port"] = c->server_port;
    o["startup_timeout"] = c->startup_timeout;
  } else if (const auto* c = std::get_if<KubernetesDeploymentConfig>(&config)) {
    o["image"] = c->image;
    o["namespace"] = c->namespace_name;
    o["kubeconfig"] = c->kubeconfig;
    o["context"] = c->context;
    o["server_image"] = c->server_image;
    o["image_pull_policy"] = c->image_pull_policy;
    o["port"] = c->port;
    o["resources"] = c->resources;
    o["node_selector"] = map_value(c->node_selector);
    o["tolerations"] = c->tolerations;
    o["runtime_class_name"] = c->runtime_class_name;
    o["service_account"] = c->service_account;
    o["image_pull_secrets"] = list_value(c->image_pull_secrets);
    o["env"] = map_value(c->env);
    o["labels"] = map_value(c->labels);
    o["working_dir"] = c->working_dir;
    o["startup_timeout"] = c->startup_timeout;
    o["max_lifetime"] = c->max_lifetime;
    o["pod_overrides"] = c->pod_overrides;
    o["connect"] = c->connect;
    o["pod_name"] = c->pod_name;
  } else if (const auto* c = std::get_if<FargateDeploymentConfig>(&config)) {
    o["image"] = c->image;
    o["port"] = c->port;
    o["cluster_name"] = c->cluster_name;
    o["execution_role_prefix"] = c->execution_role_prefix;
    o["task_definition_prefix"] = c->task_definition_prefix;
    o["log_group"] = c->log_group;
    o["security_group_prefix"] = c->security_group_prefix;
    o["fargate_args"] = c->fargate_args;
    o["container_timeout"] = c->container_timeout;
    o["runtime_timeout"] = c->runtime_timeout;
    o["server_image"] = c->server_image;
    o["region"] = c->region;
    o["profile"] = c->profile;
    o["subnet_id"] = c->subnet_id;
    o["security_group_id"] = c->security_group_id;
    o["ingress_cidr"] = c->ingress_cidr;
    o["assign_public_ip"] = c->assign_public_ip;
    o["connect"] = c->connect;
    o["cpu"] = c->cpu;
    o["memory"] = c->memory;
    o["startup_timeout"] = c->startup_timeout;
    o["env"] = map_value(c->env);
    o["labels"] = map_value(c->labels);
  } else if (const auto* c = std::get_if<DaytonaDeploymentConfig>(&config)) {
    o["api_key"] = c->api_key;
    o["target"] = c->target;
    o["port"] = c->port;
    o["container_timeout"] = c->container_timeout;
    o["runtime_timeout"] = c->runtime_timeout;
    o["image"] = c->image;
    o["api_url"] = c->api_url;
    o["organization_id"] = c->organization_id;
    o["snapshot"] = c->snapshot;
    o["public"] = c->public_preview;
    o["env"] = map_value(c->env);
    o["labels"] = map_value(c->labels);
    o["sandbox_args"] = c->sandbox_args;
    o["server_path"] = c->server_path;
    o["startup_timeout"] = c->startup_timeout;
  } else if (const auto* c = std::get_if<ModalDeploymentConfig>(&config)) {
    o["image"] = c->image;
    o["startup_timeout"] = c->startup_timeout;
    o["runtime_timeout"] = c->runtime_timeout;
    o["deployment_timeout"] = c->deployment_timeout;
    o["install_pipx"] = c->install_pipx;
    o["port"] = c->port;
    o["app_name"] = c->app_name;
    o["environment"] = c->environment;
    o["server_url"] = c->server_url;
    o["token_id"] = c->token_id;
    o["token_secret"] = c->token_secret;
    o["server_path"] = c->server_path;
    o["ca_file"] = c->ca_file;
    o["env"] = map_value(c->env);
    o["labels"] = map_value(c->labels);
    o["sandbox_definition"] = c->sandbox_definition;
  } else if (const auto* c = std::get_if<DummyDeploymentConfig>(&config)) {
    json::array outputs;
    for (const auto& obs : c->run_in_session_outputs)
      outputs.push_back(rex::to_json(obs));
    o["run_in_session_outputs"] = std::move(outputs);
  } else if (const auto* c = std::get_if<DockerDeploymentConfig>(&config)) {
    o["image"] = c->image;
    o["port"] = c->port ? json::value(*c->port) : json::value(nullptr);
    o["docker_args"] = list_value(c->docker_args);
    o["startup_timeout"] = c->startup_timeout;
    o["pull"] = to_string(c->pull);
    o["remove_images"] = c->remove_images;
    o["platform"] = optional_value(c->platform);
    o["remove_container"] = c->remove_container;
    o["container_runtime"] = c->container_runtime;
    o["docker_internal_host"] = c->docker_internal_host;
    o["engine"] = c->engine;
    o["network_mode"] = c->network_mode;
    o["memory"] = optional_value(c->memory);
    o["cpus"] = c->cpus ? json::value(*c->cpus) : json::value(nullptr);
    o["pids_limit"] = c->pids_limit ? json::value(*c->pids_limit) : json::value(nullptr);
    o["env"] = map_value(c->env);
    o["mounts"] = list_value(c->mounts);
    o["labels"] = map_value(c->labels);
    o["working_dir"] = c->working_dir;
    o["user"] = c->user;
    o["create_options"] = c->create_options;
    o["server_path"] = c->server_path;
    o["server_transfer"] = c->server_transfer;
    o["connect"] = c->connect;
    o["max_lifetime"] = c->max_lifetime;
    o["init"] = c->init;
    o["container_name"] = c->container_name;
    o["security_profile"] = c->security_profile;
  }
  return o;
}

std::unique_ptr<Deployment> make_deployment(asio::any_io_executor executor,
                                            DeploymentConfig config) {
  return std::visit(
      [&](auto&& c) -> std::unique_ptr<Deployment> {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, LocalDeploymentConfig>)
          return std::make_unique<LocalDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, RemoteDeploymentConfig>)
          return std::make_unique<RemoteDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, DockerDeploymentConfig>)
          return std::make_unique<DockerDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, GatewayDeploymentConfig>)
          return std::make_unique<GatewayDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, E2BDeploymentConfig>)
          return std::make_unique<E2BDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, KubernetesDeploymentConfig>)
          return std::make_unique<KubernetesDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, FargateDeploymentConfig>)
          return std::make_unique<FargateDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, DaytonaDeploymentConfig>)
          return std::make_unique<DaytonaDeployment>(executor, std::move(c));
        else if constexpr (std::is_same_v<T, ModalDeploymentConfig>)
          return std::make_unique<ModalDeployment>(executor, std::move(c));
        else
          return std::make_unique<DummyDeployment>(std::move(c));
      },
      std::move(config));
}

}  // namespace rex
