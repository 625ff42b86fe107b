// Kubeconfig: how a client reaches a Kubernetes API server, found as kubectl finds it.
//
// - Files: the given path (several separated by ':'), else $KUBECONFIG (the same), else
//   ~/.kube/config. Several files merge as kubectl merges them: for each cluster, user and
//   context name the first file that defines it wins, and so does the first current-context.
// - In a pod (no kubeconfig file, KUBERNETES_SERVICE_HOST and _PORT set): the service
//   account's token (re-read on use: the kubelet rotates it), CA and namespace.
// - The context named, else the current one; its cluster (server, CA from a file or inline
//   data, insecure-skip-tls-verify, tls-server-name), its user (client certificate and key
//   from files or inline data, token, tokenFile, username and password, exec plugin) and its
//   namespace ("default" when it names none). Relative paths are relative to the file that
//   holds the entry.
//
// Guarantees: everything that makes a kubeconfig unusable (unreadable or malformed file, a
// context, cluster or user that is missing, bad base64, an unsupported auth-provider) is a
// KubeconfigError naming the file and the entry, found here and not at the first request.
// Credentials that change (token files, exec plugins) are resolved by the client per use.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::kubernetes {

class KubeconfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A user's `exec` entry: a program that prints an ExecCredential (exec_credential.hpp).
struct ExecPlugin {
  std::string command;  // a path with '/' is relative to the kubeconfig's folder
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to ours
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  bool provide_cluster_info = false;
  std::string interactive_mode;  // Never, IfAvailable or Always (v1 requires one)
  std::string install_hint;      // shown when the program cannot be run
};

/// What a client needs to reach one API server as one user.
struct ClusterAccess {
  std::string source;   // where it came from: "FILE, context NAME" or "in-cluster service account"
  std::string context;  // the context's name (empty in-cluster)
  std::string server;   // the API server's base URL
  std::string namespace_name = "default";

  std::string ca_pem;  // certificates to trust (PEM); empty: the system's
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // the name to expect in the server's certificate, when set

  std::string client_cert_pem;  // a client certificate and its key (PEM), or neither
  std::string client_key_pem;
  std::string token;       // a bearer token
  std::string token_file;  // a file holding the bearer token, read at each use
  std::string username;    // basic authentication
  std::string password;
  std::optional<ExecPlugin> exec;
};

struct KubeconfigOptions {
  std::string path;     // files separated by ':'; empty: $KUBECONFIG, else ~/.kube/config
  std::string context;  // empty: the current context
  // The service account's folder in a pod (for tests to point elsewhere).
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

/// One kubeconfig file's entries, each remembering the folder of its file.
struct Kubeconfig {
  struct Entry {
    std::string file;  // the file that defined it
    std::map<std::string, std::string> fields;
    std::optional<ExecPlugin> exec;  // users only
  };
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_file;
};

/// Parses one kubeconfig (YAML or JSON); `file` names it in errors and anchors its relative
/// paths. Throws KubeconfigError.
Kubeconfig parse_kubeconfig(std::string_view text, const std::string& file);

/// Merges `more` under `into` (kubectl's rule: what `into` defines stays).
void merge_kubeconfig(Kubeconfig& into, Kubeconfig more);

/// Resolves a context of a (merged) kubeconfig. Throws KubeconfigError.
ClusterAccess resolve_context(const Kubeconfig& config, const std::string& context = {});

/// Finds and resolves as kubectl does (see the top of this file). Throws KubeconfigError.
ClusterAccess load_cluster_access(const KubeconfigOptions& options = {});

}  // namespace rex::kubernetes
