#include <rex/kubernetes/pod_spec.hpp>

#include <fmt/format.h>

#include <cmath>

namespace rex::kubernetes {

namespace json = boost::json;

namespace {

constexpr const char* kServerVolume = "rex-server";
constexpr const char* kTokenVolume = "rex-token";
constexpr const char* kServerDir = "/rex";
constexpr const char* kTokenDir = "/rex-token";

json::object string_map(const std::map<std::string, std::string>& m) {
  json::object o;
  for (const auto& [k, v] : m)
    o[k] = v;
  return o;
}

// The sandbox's command: the server, with its token read from the Secret's file so that it
// appears in no spec or command line (the server removes it from its own environment).
std::string server_command(const PodSpecConfig& c) {
  std::string line = fmt::format(
      "export REX_AUTH_TOKEN=\"$(cat {}/token)\" && exec {}/rex-server --host 0.0.0.0 --port {}",
      kTokenDir, kServerDir, c.server_port);
  if (c.max_lifetime > 0)
    line += fmt::format(" --max-lifetime {}", c.max_lifetime);
  return line;
}

}  // namespace

void merge_patch(json::value& target, const json::value& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object())
    target = json::object{};
  json::object& t = target.get_object();
  for (const auto& [key, value] : patch.get_object()) {
    if (value.is_null()) {
      t.erase(key);
      continue;
    }
    merge_patch(t[key], value);
  }
}

json::object pod_manifest(const PodSpecConfig& c) {
  std::map<std::string, std::string> labels = c.labels;
  for (const auto& [k, v] : c.rex_labels)
    labels[k] = v;  // rex's own win: gc finds pods by them

  json::array env;
  for (const auto& [k, v] : c.env)
    env.push_back(json::object{{"name", k}, {"value", v}});

  json::object sandbox{
      {"name", "sandbox"},
      {"image", c.image},
      {"imagePullPolicy", c.image_pull_policy},
      {"command", json::array{"/bin/sh", "-c", server_command(c)}},
      {"ports",
       json::array{json::object{
           {"name", "rex-server"}, {"containerPort", c.server_port}, {"protocol", "TCP"}}}},
      {"volumeMounts",
       json::array{
           json::object{{"name", kServerVolume}, {"mountPath", kServerDir}, {"readOnly", true}},
           json::object{{"name", kTokenVolume}, {"mountPath", kTokenDir}, {"readOnly", true}}}},
      {"readinessProbe",
       json::object{{"tcpSocket", json::object{{"port", c.server_port}}}, {"periodSeconds", 1}}},
  };
  if (!env.empty())
    sandbox["env"] = std::move(env);
  if (!c.working_dir.empty())
    sandbox["workingDir"] = c.working_dir;
  if (!c.resources.empty())
    sandbox["resources"] = c.resources;

  json::object install{
      {"name", "rex-server-install"},
      {"image", c.server_image},
      {"imagePullPolicy", c.image_pull_policy},
      {"command",
       json::array{"/rex-server", "--install", fmt::format("{}/rex-server", kServerDir)}},
      {"volumeMounts",
       json::array{json::object{{"name", kServerVolume}, {"mountPath", kServerDir}}}},
  };

  json::object spec{
      {"restartPolicy", "Never"},
      {"terminationGracePeriodSeconds", 0},
      {"automountServiceAccountToken", !c.service_account.empty()},
      {"enableServiceLinks", false},
      {"initContainers", json::array{std::move(install)}},
      {"containers", json::array{std::move(sandbox)}},
      {"volumes", json::array{json::object{{"name", kServerVolume}, {"emptyDir", json::object{}}},
                              json::object{{"name", kTokenVolume},
                                           {"secret", json::object{{"secretName", c.token_secret},
                                                                   {"defaultMode", 0400}}}}}},
  };
  if (c.max_lifetime > 0)
    spec["activeDeadlineSeconds"] = static_cast<std::int64_t>(std::ceil(c.max_lifetime));
  if (!c.node_selector.empty())
    spec["nodeSelector"] = string_map(c.node_selector);
  if (!c.tolerations.empty())
    spec["tolerations"] = c.tolerations;
  if (!c.runtime_class_name.empty())
    spec["runtimeClassName"] = c.runtime_class_name;
  if (!c.service_account.empty())
    spec["serviceAccountName"] = c.service_account;
  if (!c.image_pull_secrets.empty()) {
    json::array secrets;
    for (const auto& s : c.image_pull_secrets)
      secrets.push_back(json::object{{"name", s}});
    spec["imagePullSecrets"] = std::move(secrets);
  }

  json::value pod = json::object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       json::object{
           {"name", c.name}, {"namespace", c.namespace_name}, {"labels", string_map(labels)}}},
      {"spec", std::move(spec)},
  };
  if (!c.pod_overrides.empty())
    merge_patch(pod, c.pod_overrides);
  return std::move(pod.get_object());
}

}  // namespace rex::kubernetes
