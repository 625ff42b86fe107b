// Kubeconfigs and the ExecCredentials of exec plugins. The first byte picks the parser, the
// rest is the text.
//
// Properties: a kubeconfig either parses or is refused with a KubeconfigError naming its file
// (nothing else, no crash, no hang on aliases or nesting); a parsed one either resolves its
// current context or is refused the same way; what resolves has a server and a client
// certificate only with its key. An ExecCredential either reads or is refused naming the
// plugin; what reads has a token or a certificate with its key.
#include <rex/kubernetes/exec_credential.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;
using namespace rex::kubernetes;

void kubeconfig(std::string_view text) {
  const std::string file = (rex::fuzz::scratch_dir() / "config").string();
  Kubeconfig config;
  try {
    config = parse_kubeconfig(text, file);
  } catch (const KubeconfigError& e) {
    check(std::string_view(e.what()).starts_with(file), "a refused kubeconfig names its file");
    return;
  }
  try {
    const ClusterAccess a = resolve_context(config);
    check(!a.server.empty(), "a resolved context has a server");
    check(a.client_cert_pem.empty() == a.client_key_pem.empty(),
          "a client certificate comes with its key");
    check(!a.namespace_name.empty(), "a resolved context has a namespace");
  } catch (const KubeconfigError&) {
  }
}

void exec_credential(std::string_view text) {
  ExecPlugin plugin;
  plugin.command = "plugin";
  plugin.api_version = "client.authentication.k8s.io/v1";
  plugin.interactive_mode = "Never";
  try {
    const ExecCredential c = parse_exec_credential(text, plugin);
    check(!c.token.empty() || !c.client_cert_pem.empty(), "a credential has a token or a cert");
    check(c.client_cert_pem.empty() == c.client_key_pem.empty(),
          "a client certificate comes with its key");
  } catch (const KubeconfigError& e) {
    check(std::string_view(e.what()).find("plugin") != std::string_view::npos,
          "a refused credential names the plugin");
  }
}

using Parser = void (*)(std::string_view);
constexpr Parser kParsers[] = {kubeconfig, exec_credential};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  constexpr std::size_t kCount = sizeof kParsers / sizeof kParsers[0];
  kParsers[data[0] % kCount](std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}
