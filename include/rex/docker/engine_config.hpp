// EngineConfig: where a Docker Engine API (Docker's, or Podman's compatible one) is and how to
// talk to it, as a plain settings struct; engine_config_from_environment() fills it the way the
// docker and podman command-line tools read their environment.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace rex::docker {

struct EngineConfig {
  // DOCKER_HOST forms: unix:///path/to.sock or tcp://HOST[:PORT] (port 2375, or 2376 with TLS);
  // empty: the default socket, unix:///var/run/docker.sock.
  std::string host{};
  bool tls = false;         // tcp only: https
  bool tls_verify = true;   // tls: check the engine's certificate against ca.pem
  std::string cert_path{};  // tls: directory holding ca.pem, cert.pem, key.pem
  std::string api_version = "1.41";
  std::chrono::milliseconds request_timeout = std::chrono::seconds(60);  // ordinary calls
  // For messages and hints only ("docker" or "podman"): which daemon to tell the user to start.
  std::string runtime = "docker";
};

/// From the environment, as the runtime's own CLI reads it.
/// "docker": DOCKER_HOST; DOCKER_TLS_VERIFY (any non-empty value: TLS and verification),
///   else DOCKER_TLS (non-empty: TLS without verification); DOCKER_CERT_PATH (default
///   $HOME/.docker); DOCKER_API_VERSION when set.
/// "podman": CONTAINER_HOST, else $XDG_RUNTIME_DIR/podman/podman.sock when not root, else
///   /run/podman/podman.sock; no TLS.
/// Any other container_runtime: std::invalid_argument naming it.
EngineConfig engine_config_from_environment(std::string_view container_runtime = "docker");

}  // namespace rex::docker
