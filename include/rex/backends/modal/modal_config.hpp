// ModalDeploymentConfig: a Modal sandbox (modal_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/object.hpp>

#include <map>
#include <string>
#include <string_view>

namespace rex {

// A Modal sandbox (rex/backends/modal/modal_deployment.hpp, docs/modal.md): SWE-ReX's field names
// where it has them, rex's own after. Empty strings take Modal's environment variables.
struct ModalDeploymentConfig {
  static constexpr std::string_view backend = "modal";
  static constexpr settings::Rule rules[] = {{.member = "port", .min = 1, .max = 65535}};

  std::string image = "python:3.11";   // a registry image; it needs nothing at all
  Seconds startup_timeout{180.0};      // the image, the sandbox's start and its tunnel
  Seconds runtime_timeout{60.0};       // from the tunnel to the server's first answer
  Seconds deployment_timeout{3600.0};  // the sandbox's lifetime: Modal ends it, and the server
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

}  // namespace rex
