// KubernetesDeploymentConfig: a pod of a Kubernetes cluster (kubernetes_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

/// A pod of a Kubernetes cluster, with rex-server put into it by an init container
/// (rex/backends/kubernetes/kubernetes_deployment.hpp, docs/kubernetes.md).
struct KubernetesDeploymentConfig {
  static constexpr std::string_view backend = "kubernetes";
  static constexpr settings::Rule rules[] = {
      {.member = "namespace_name", .name = "namespace"},
      {.member = "image_pull_policy", .choices = "Always|IfNotPresent|Never"},
      {.member = "port", .min = 1, .max = 65535},
      {.member = "connect", .choices = "auto|proxy|pod_ip"}};

  std::string image = "python:3.11";  // the sandbox's image; it needs a shell and nothing else
  std::string namespace_name{};       // "namespace"; empty: the kubeconfig context's
  std::string kubeconfig{};    // files separated by ':'; empty: $KUBECONFIG, ~/.kube/config, or
                               // the service account when this runs in a pod
  std::string context{};       // empty: the current context
  std::string server_image{};  // holds /rex-server; empty: rex.local/rex-server:<rex's version>
  std::string image_pull_policy = "IfNotPresent";  // Always | IfNotPresent | Never
  int port = 8000;                                 // rex-server's port in the pod
  boost::json::object resources{};                 // {"requests": {...}, "limits": {...}}
  std::map<std::string, std::string> node_selector{};
  boost::json::array tolerations{};
  std::string runtime_class_name{};
  std::string service_account{};  // empty: none, and no API token mounted into the sandbox
  std::vector<std::string> image_pull_secrets{};
  std::map<std::string, std::string> env{};
  std::map<std::string, std::string> labels{};
  std::string working_dir{};       // the sandbox container's; empty: the image's
  Seconds startup_timeout{180.0};  // scheduling, pulling and the server's first answer
  Seconds max_lifetime{86400.0};   // activeDeadlineSeconds and rex-server's own; 0: none
  // Merged into the whole pod object last (a JSON merge patch), for anything else.
  boost::json::object pod_overrides{};
  // How the client reaches the server: auto | proxy | pod_ip. proxy: through the API server's
  // pod proxy (works from anywhere the API server is reached). pod_ip: straight to the pod's
  // address (in the cluster, or on a node). auto: pod_ip when this process runs in a pod or the
  // pod's address is on a network of this machine, proxy otherwise.
  std::string connect = "auto";
  std::string pod_name{};  // empty: rex-<deployment id>
};
BOOST_DESCRIBE_STRUCT(KubernetesDeploymentConfig, (),
                      (image, namespace_name, kubeconfig, context, server_image, image_pull_policy,
                       port, resources, node_selector, tolerations, runtime_class_name,
                       service_account, image_pull_secrets, env, labels, working_dir,
                       startup_timeout, max_lifetime, pod_overrides, connect, pod_name))

}  // namespace rex
