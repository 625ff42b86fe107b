// The pod of a sandbox: the user's image, unchanged, with rex-server put in beside it.
//
// An init container from `server_image` (an image that holds the static rex-server at
// /rex-server) copies it into an emptyDir mounted at /rex in the sandbox's container, whose
// command becomes that server: the user's image needs nothing but what its commands use. The
// server reads its token from a Secret mounted at /rex-token (never from the pod's spec or its
// environment, which anyone who may read pods sees) and listens on `server_port`.
//
// Every field of the configuration lands where Kubernetes expects it; `pod_overrides` is merged
// last as a JSON merge patch (RFC 7386: objects merge, null removes, anything else replaces), for
// what the fields do not cover. The API server validates the result: a create with
// `?dryRun=All` checks it without creating anything.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <map>
#include <string>
#include <vector>

namespace rex::kubernetes {

struct PodSpecConfig {
  std::string name;            // the pod's name
  std::string namespace_name;  // where it goes
  std::string image;           // the sandbox's image
  std::string image_pull_policy = "IfNotPresent";
  std::string server_image;  // holds /rex-server
  int server_port = 8000;
  std::string token_secret;  // the Secret whose key "token" is rex-server's token
  double max_lifetime = 0;   // seconds; 0: none. Becomes activeDeadlineSeconds (rounded up)
  std::map<std::string, std::string> labels{};      // besides rex's own (`rex_labels`)
  std::map<std::string, std::string> rex_labels{};  // owner, deployment id, expiry
  std::map<std::string, std::string> env{};         // the sandbox's environment
  std::string working_dir{};                        // the container's; empty: the image's
  boost::json::object resources{};                  // {"requests": {...}, "limits": {...}}
  std::map<std::string, std::string> node_selector{};
  boost::json::array tolerations{};
  std::string runtime_class_name{};
  std::string service_account{};
  std::vector<std::string> image_pull_secrets{};
  boost::json::object pod_overrides{};  // merged into the whole pod last
};

/// The pod object (apiVersion v1, kind Pod) for `config`.
boost::json::object pod_manifest(const PodSpecConfig& config);

/// Applies `patch` to `target` as a JSON merge patch (RFC 7386).
void merge_patch(boost::json::value& target, const boost::json::value& patch);

}  // namespace rex::kubernetes
