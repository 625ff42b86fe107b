// E2BDeploymentConfig: a sandbox of E2B or an E2B-compatible endpoint (e2b_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>

#include <map>
#include <string>
#include <string_view>

namespace rex {

/// A sandbox of E2B, or of any E2B-compatible endpoint (rex/backends/e2b/e2b_deployment.hpp).
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
  Seconds timeout{3600};             // the sandbox's lifetime in seconds; E2B ends it then
  std::map<std::string, std::string> metadata{};
  std::map<std::string, std::string> env{};  // the sandbox's environment variables
  std::string server_path{};  // the static rex-server to upload; empty: found as Docker's is
  // A rex-server already in the template (an absolute path in the sandbox): started there, and
  // nothing but the token is uploaded. Empty: server_path is uploaded into each sandbox.
  std::string template_server_path{};
  int server_port = 0;             // rex-server's port in the sandbox; 0: any free one
  Seconds startup_timeout{120.0};  // each step: the create, the upload, the server's start
};
BOOST_DESCRIBE_STRUCT(E2BDeploymentConfig, (),
                      (api_key, api_url, sandbox_url, domain, template_id, timeout, metadata, env,
                       server_path, template_server_path, server_port, startup_timeout))

}  // namespace rex
