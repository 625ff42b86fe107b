#include <rex/core/text.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "kubernetes/small_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace rex::kubernetes {

namespace fs = std::filesystem;

namespace {

// Fields that name files, resolved against the folder of the file that holds them.
constexpr std::string_view kPathFields[] = {"certificate-authority", "client-certificate",
                                            "client-key", "tokenFile"};

using detail::read_small_file;

std::string anchored(const std::string& path, const std::string& file) {
  if (path.empty() || fs::path(path).is_absolute())
    return path;
  return (fs::path(file).parent_path() / path).lexically_normal().string();
}

std::string scalar(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar())
    throw KubeconfigError(fmt::format("{}: expected a single value", where));
  return node.Scalar();
}

ExecPlugin read_exec(const YAML::Node& node, const std::string& file, const std::string& where) {
  if (!node.IsMap())
    throw KubeconfigError(fmt::format("{}.exec: expected a mapping", where));
  ExecPlugin p;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string at = fmt::format("{}.exec.{}", where, key);
    if (key == "command") {
      p.command = scalar(kv.second, at);
    } else if (key == "args") {
      if (!kv.second.IsSequence() && !kv.second.IsNull())
        throw KubeconfigError(fmt::format("{}: expected a list", at));
      for (const auto& a : kv.second)
        p.args.push_back(scalar(a, at));
    } else if (key == "env") {
      if (!kv.second.IsSequence() && !kv.second.IsNull())
        throw KubeconfigError(fmt::format("{}: expected a list of name and value", at));
      for (const auto& e : kv.second) {
        if (!e.IsMap() || !e["name"] || !e["value"])
          throw KubeconfigError(fmt::format("{}: each entry needs a name and a value", at));
        p.env.emplace_back(scalar(e["name"], at), scalar(e["value"], at));
      }
    } else if (key == "apiVersion") {
      p.api_version = scalar(kv.second, at);
    } else if (key == "provideClusterInfo") {
      p.provide_cluster_info = scalar(kv.second, at) == "true";
    } else if (key == "interactiveMode") {
      p.interactive_mode = scalar(kv.second, at);
    } else if (key == "installHint") {
      p.install_hint = scalar(kv.second, at);
    }
  }
  if (p.command.empty())
    throw KubeconfigError(fmt::format("{}.exec: no command", where));
  if (p.api_version != "client.authentication.k8s.io/v1" &&
      p.api_version != "client.authentication.k8s.io/v1beta1")
    throw KubeconfigError(fmt::format(
        "{}.exec: apiVersion {:?} is not one rex speaks (client.authentication.k8s.io/v1 or "
        "v1beta1)",
        where, p.api_version));
  if (p.api_version.ends_with("/v1") && p.interactive_mode.empty())
    throw KubeconfigError(fmt::format(
        "{}.exec: interactiveMode is required with client.authentication.k8s.io/v1", where));
  if (!p.interactive_mode.empty() && p.interactive_mode != "Never" &&
      p.interactive_mode != "IfAvailable" && p.interactive_mode != "Always")
    throw KubeconfigError(
        fmt::format("{}.exec: interactiveMode {:?} is not Never, IfAvailable or Always", where,
                    p.interactive_mode));
  if (p.command.find('/') != std::string::npos)
    p.command = anchored(p.command, file);
  return p;
}

// One of clusters, users or contexts: a list of {name, <kind>: {...}}.
void read_entries(const YAML::Node& list, std::string_view kind, std::string_view inner,
                  const std::string& file, std::map<std::string, Kubeconfig::Entry>& into) {
  if (!list || list.IsNull())
    return;
  if (!list.IsSequence())
    throw KubeconfigError(fmt::format("{}: {} must be a list", file, kind));
  for (const auto& item : list) {
    if (!item.IsMap() || !item["name"])
      throw KubeconfigError(fmt::format("{}: every entry of {} needs a name", file, kind));
    const std::string name = scalar(item["name"], fmt::format("{}: {}[].name", file, kind));
    const std::string where = fmt::format("{}: {} {:?}", file, inner, name);
    Kubeconfig::Entry entry;
    entry.file = file;
    const YAML::Node body = item[std::string(inner)];
    if (body && !body.IsNull()) {
      if (!body.IsMap())
        throw KubeconfigError(fmt::format("{}: expected a mapping", where));
      for (const auto& kv : body) {
        const std::string key = kv.first.Scalar();
        if (key == "exec" && inner == "user") {
          entry.exec = read_exec(kv.second, file, where);
        } else if (key == "auth-provider") {
          const YAML::Node provider_name = kv.second["name"];
          entry.fields[key] = provider_name && provider_name.IsScalar() ? provider_name.Scalar()
                                                                        : std::string("(unnamed)");
        } else if (kv.second.IsScalar()) {
          entry.fields[key] = kv.second.Scalar();
        }
      }
    }
    for (const auto field : kPathFields) {
      const auto it = entry.fields.find(std::string(field));
      if (it != entry.fields.end())
        it->second = anchored(it->second, file);
    }
    into.emplace(name, std::move(entry));  // within a file too, the first of a name stays
  }
}

std::string field(const Kubeconfig::Entry& e, const std::string& key) {
  const auto it = e.fields.find(key);
  return it == e.fields.end() ? std::string() : it->second;
}

std::string decoded(const std::string& text, const std::string& where) {
  Base64Decoded d = base64_decode(text);
  if (!d.error.empty())
    throw KubeconfigError(fmt::format("{}: {}", where, d.error));
  return std::move(d.bytes);
}

// Inline data wins over a file, as in kubectl.
std::string data_or_file(const Kubeconfig::Entry& e, const std::string& key,
                         const std::string& where) {
  if (const std::string data = field(e, key + "-data"); !data.empty())
    return decoded(data, fmt::format("{}.{}-data", where, key));
  if (const std::string path = field(e, key); !path.empty())
    return read_small_file(path, fmt::format("{}.{}", where, key));
  return {};
}

std::string names_of(const std::map<std::string, Kubeconfig::Entry>& entries) {
  std::string out;
  for (const auto& [name, entry] : entries)
    out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? std::string("none") : out;
}

std::vector<std::string> split_paths(std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(':', start), list.size());
    if (end > start)
      out.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

ClusterAccess in_cluster(const std::string& host, const std::string& port, const std::string& dir) {
  ClusterAccess a;
  a.source = "in-cluster service account";
  const bool v6 = host.find(':') != std::string::npos;
  a.server = fmt::format("https://{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", port);
  a.token_file = (fs::path(dir) / "token").string();
  if (::access(a.token_file.c_str(), R_OK) != 0)
    throw KubeconfigError(
        fmt::format("in a pod (KUBERNETES_SERVICE_HOST is set) but its service "
                    "account token {} cannot be read: {}",
                    a.token_file, std::strerror(errno)));
  a.ca_pem = read_small_file((fs::path(dir) / "ca.crt").string(), "the service account's CA");
  const fs::path ns = fs::path(dir) / "namespace";
  if (fs::exists(ns)) {
    const std::string name = detail::without_trailing_space(
        read_small_file(ns.string(), "the service account's namespace"));
    if (!name.empty())
      a.namespace_name = name;
  }
  return a;
}

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

Kubeconfig parse_kubeconfig(std::string_view text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw KubeconfigError(fmt::format("{}: not a valid kubeconfig: {} (line {}, column {})", file,
                                      e.msg, e.mark.line + 1, e.mark.column + 1));
  }
  Kubeconfig config;
  if (!root || root.IsNull())
    return config;
  if (!root.IsMap())
    throw KubeconfigError(fmt::format("{}: a kubeconfig is a mapping", file));
  try {
    read_entries(root["clusters"], "clusters", "cluster", file, config.clusters);
    read_entries(root["users"], "users", "user", file, config.users);
    read_entries(root["contexts"], "contexts", "context", file, config.contexts);
    if (const YAML::Node current = root["current-context"]; current && !current.IsNull()) {
      config.current_context = scalar(current, file + ": current-context");
      config.current_context_file = file;
    }
  } catch (const YAML::Exception& e) {
    throw KubeconfigError(fmt::format("{}: not a valid kubeconfig: {}", file, e.msg));
  }
  return config;
}

void merge_kubeconfig(Kubeconfig& into, Kubeconfig more) {
  into.clusters.merge(more.clusters);
  into.users.merge(more.users);
  into.contexts.merge(more.contexts);
  if (into.current_context.empty()) {
    into.current_context = std::move(more.current_context);
    into.current_context_file = std::move(more.current_context_file);
  }
}

ClusterAccess resolve_context(const Kubeconfig& config, const std::string& context) {
  const std::string name = context.empty() ? config.current_context : context;
  if (name.empty())
    throw KubeconfigError(
        fmt::format("the kubeconfig sets no current-context: name one of its contexts ({})",
                    names_of(config.contexts)));
  const auto ctx = config.contexts.find(name);
  if (ctx == config.contexts.end())
    throw KubeconfigError(fmt::format("context {:?} is not in the kubeconfig (its contexts: {})",
                                      name, names_of(config.contexts)));
  const std::string where = fmt::format("{}: context {:?}", ctx->second.file, name);
  ClusterAccess a;
  a.source = fmt::format("{}, context {}", ctx->second.file, name);
  a.context = name;
  if (const std::string ns = field(ctx->second, "namespace"); !ns.empty())
    a.namespace_name = ns;

  const std::string cluster_name = field(ctx->second, "cluster");
  const auto cluster = config.clusters.find(cluster_name);
  if (cluster_name.empty() || cluster == config.clusters.end())
    throw KubeconfigError(
        fmt::format("{}: its cluster {:?} is not in the kubeconfig (clusters: {})", where,
                    cluster_name, names_of(config.clusters)));
  const auto& c = cluster->second;
  const std::string cwhere = fmt::format("{}: cluster {:?}", c.file, cluster_name);
  a.server = field(c, "server");
  if (a.server.empty())
    throw KubeconfigError(fmt::format("{}: no server", cwhere));
  a.ca_pem = data_or_file(c, "certificate-authority", cwhere);
  a.insecure_skip_tls_verify = field(c, "insecure-skip-tls-verify") == "true";
  a.tls_server_name = field(c, "tls-server-name");
  if (a.insecure_skip_tls_verify && !a.ca_pem.empty())
    throw KubeconfigError(fmt::format(
        "{}: insecure-skip-tls-verify and a certificate authority exclude each other", cwhere));

  const std::string user_name = field(ctx->second, "user");
  if (user_name.empty())
    return a;  // anonymous
  const auto user = config.users.find(user_name);
  if (user == config.users.end())
    throw KubeconfigError(fmt::format("{}: its user {:?} is not in the kubeconfig (users: {})",
                                      where, user_name, names_of(config.users)));
  const auto& u = user->second;
  const std::string uwhere = fmt::format("{}: user {:?}", u.file, user_name);
  if (const std::string provider = field(u, "auth-provider"); !provider.empty())
    throw KubeconfigError(fmt::format(
        "{}: auth-provider {:?} is not supported (Kubernetes removed these plugins in 1.26); use "
        "an exec plugin, as kubectl does",
        uwhere, provider));
  a.client_cert_pem = data_or_file(u, "client-certificate", uwhere);
  a.client_key_pem = data_or_file(u, "client-key", uwhere);
  if (a.client_cert_pem.empty() != a.client_key_pem.empty())
    throw KubeconfigError(
        fmt::format("{}: a client certificate needs its key, and a key its "
                    "certificate",
                    uwhere));
  a.token = field(u, "token");
  a.token_file = field(u, "tokenFile");
  if (!a.token_file.empty() && ::access(a.token_file.c_str(), R_OK) != 0)
    throw KubeconfigError(fmt::format("{}.tokenFile: cannot read {}: {}", uwhere, a.token_file,
                                      std::strerror(errno)));
  a.username = field(u, "username");
  a.password = field(u, "password");
  a.exec = u.exec;
  const int ways = (a.token.empty() && a.token_file.empty() ? 0 : 1) +
                   (a.username.empty() ? 0 : 1) + (a.exec ? 1 : 0);
  if (ways > 1)
    throw KubeconfigError(fmt::format(
        "{}: more than one of token or tokenFile, username, and exec is set; keep one", uwhere));
  return a;
}

ClusterAccess load_cluster_access(const KubeconfigOptions& options) {
  std::vector<std::string> files;
  bool must_exist = false;
  std::string tried;
  if (!options.path.empty()) {
    files = split_paths(options.path);
    must_exist = true;
  } else if (const char* list = env_or_null("KUBECONFIG")) {
    files = split_paths(list);
    tried = fmt::format("the files of KUBECONFIG ({})", list);
  } else if (const char* home = env_or_null("HOME")) {
    files.push_back((fs::path(home) / ".kube" / "config").string());
    tried = fmt::format("{} does not exist", files.back());
  }
  Kubeconfig merged;
  bool found = false;
  for (const auto& file : files) {
    if (!must_exist && !fs::exists(file))
      continue;  // as kubectl: missing files of KUBECONFIG are skipped
    merge_kubeconfig(merged, parse_kubeconfig(read_small_file(file, "the kubeconfig"), file));
    found = true;
  }
  if (found)
    return resolve_context(merged, options.context);
  const char* host = env_or_null("KUBERNETES_SERVICE_HOST");
  const char* port = env_or_null("KUBERNETES_SERVICE_PORT");
  if (host != nullptr && port != nullptr) {
    if (!options.context.empty())
      throw KubeconfigError(fmt::format(
          "context {:?} was asked for, but there is no kubeconfig ({}); in a pod only its service "
          "account is available",
          options.context, tried.empty() ? std::string("HOME is not set") : tried));
    return in_cluster(host, port, options.service_account_dir);
  }
  throw KubeconfigError(fmt::format(
      "no kubeconfig: {}, and this is not a pod (KUBERNETES_SERVICE_HOST is not set); set "
      "KUBECONFIG or pass the kubeconfig's path",
      tried.empty() ? std::string("HOME is not set") : tried));
}

}  // namespace rex::kubernetes
