// Garbage collection of rex's pods: the pods (and their token Secrets) that KubernetesDeployments
// created and can no longer delete themselves, found by the label rex.managed=1 and judged by the
// same rules as containers (gc.hpp: owner process gone, machine rebooted, expired). It is
// what `rex gc --kubernetes` runs.
#pragma once

#include <rex/deployment/gc.hpp>

#include <boost/asio/awaitable.hpp>

#include <string>

namespace rex {

namespace kubernetes {
class ApiClient;
}

struct KubernetesGcOptions {
  GcOptions gc{};
  std::string namespace_name{};  // empty: every namespace
};

/// Deletes (grace period 0) the pods that should go, and the Secrets of rex whose pods are gone
/// or should go. Entries are named "NAMESPACE/pod/NAME" and "NAMESPACE/secret/NAME".
asio::awaitable<GcReport> collect_kubernetes_garbage(kubernetes::ApiClient& api,
                                                     KubernetesGcOptions options = {});

}  // namespace rex
