// ExecCredential: the credentials a kubeconfig's exec plugin prints (client.authentication.k8s.io
// v1 and v1beta1), and running that plugin as kubectl runs it.
//
// The plugin gets KUBERNETES_EXEC_INFO (an ExecCredential with spec.interactive false, and the
// cluster when provideClusterInfo is set), the entry's env on top of ours, no terminal and no
// stdin: rex is never interactive, so a plugin with interactiveMode Always is refused before it
// runs. Its stdout is the credential; its stderr goes into the error when it fails.
//
// Guarantees: a plugin that cannot be started (with the entry's installHint), exits non-zero,
// prints something that is not an ExecCredential of its apiVersion, or outlives the timeout
// (it is killed, with its process group) is a KubeconfigError naming the command.
#pragma once

#include <rex/kubernetes/kubeconfig.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace rex::kubernetes {

namespace asio = boost::asio;

struct ExecCredential {
  std::string token;            // a bearer token, or
  std::string client_cert_pem;  // a client certificate and key (both or neither)
  std::string client_key_pem;
  // When the plugin must run again; none: the credential does not expire.
  std::optional<std::chrono::system_clock::time_point> expires;
};

/// Reads a plugin's output. Throws KubeconfigError naming what is wrong.
ExecCredential parse_exec_credential(std::string_view output, const ExecPlugin& plugin);

/// An RFC 3339 time as the API writes them (2026-11-25T10:00:00Z, fractions and numeric offsets
/// allowed), clamped to 1970..about 2190; nothing when the text is not one.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

/// The KUBERNETES_EXEC_INFO a plugin gets.
std::string exec_info(const ExecPlugin& plugin, const ClusterAccess& cluster);

/// Runs the plugin and reads its credential. Throws KubeconfigError.
asio::awaitable<ExecCredential> run_exec_plugin(
    const ExecPlugin& plugin, const ClusterAccess& cluster,
    std::chrono::steady_clock::duration timeout = std::chrono::seconds(60));

}  // namespace rex::kubernetes
