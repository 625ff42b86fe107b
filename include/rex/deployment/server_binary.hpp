// Where the static rex-server that a backend puts into its sandboxes is found: one place for
// every backend (Docker and Podman inject it, Daytona and E2B upload it, Modal mounts it, the
// gateway's local provider runs it, Kubernetes and Fargate copy it from an image).
//
// Threading: reads the file system and the environment; call it from anywhere.
#pragma once

#include <string>

namespace rex {

/// The rex-server executable to put into a sandbox: `configured` (a settings' server_path) when
/// set, else $REX_SERVER_PATH, else rex-server beside this executable, else the one this library
/// was built with. Throws DeploymentStartupError listing the places tried when none exists.
std::string find_rex_server(const std::string& configured);

/// The image an init container copies rex-server from where a sandbox cannot be given the file
/// (Kubernetes, Fargate) and the settings name none: rex.local/rex-server:<rex's version>
/// (scripts/k8s.sh builds it; docs/kubernetes.md).
std::string default_server_image();

}  // namespace rex
