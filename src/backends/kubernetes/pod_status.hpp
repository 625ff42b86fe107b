// What a pod's status says about a sandbox: still on its way, its server's container running, or
// ended for a reason a person can act on. KubernetesDeployment reads every pod object its watch
// sees through this, and again when a call into a running sandbox fails.
#pragma once

#include <boost/json/object.hpp>

#include <string>

namespace rex::detail {

enum class PodProgress {
  pending,  // not scheduled, pulling, initialising: keep waiting
  running,  // the sandbox's container runs (its server may not listen yet)
  ended,    // it will not run (again): the summary says why
};

struct PodState {
  PodProgress progress = PodProgress::pending;
  // One line: "scheduled on node-1; init container rex-server-install: waiting (PodInitializing)",
  // "container sandbox terminated: OOMKilled (exit code 137)", "pod failed: Evicted: ...".
  std::string summary;
  std::string node;       // where it was scheduled, or empty
  std::string pod_ip;     // its address, once it has one
  bool deleting = false;  // metadata.deletionTimestamp is set
  // The container that ran and ended (an init container that failed, or the sandbox's): its
  // log may say more. Empty when none did.
  std::string ran_container;
};

/// The sandbox container's name in the pod (kubernetes/pod_spec.hpp).
inline constexpr const char* kSandboxContainer = "sandbox";

PodState assess_pod(const boost::json::object& pod);

}  // namespace rex::detail
