// This machine's own addresses, for telling whether a container engine's network is reachable
// from here (the `connect: auto` of DockerDeployment and KubernetesDeployment).
#pragma once

#include <string>

namespace rex::detail {

/// Whether `address` (IPv4 or IPv6 text) is assigned to an interface of this machine.
bool is_local_address(const std::string& address);

/// Whether one of this machine's addresses lies in `subnet` ("172.17.0.0/16", "fd00::/64"). A
/// prefix of length 0 (a default route) or text that is no subnet: false.
bool has_local_address_in(const std::string& subnet);

/// Whether `address` lies in the network of one of this machine's interfaces (a pod's address on
/// a bridge of this node), so that it is reached without a router.
bool on_local_network(const std::string& address);

}  // namespace rex::detail
