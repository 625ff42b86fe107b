// This machine's own addresses, for telling whether a container engine's network is reachable
// from here (DockerDeployment's `connect: auto`).
#pragma once

#include <string>

namespace rex::detail {

/// Whether `address` (IPv4 or IPv6 text) is assigned to an interface of this machine.
bool is_local_address(const std::string& address);

/// Whether one of this machine's addresses lies in `subnet` ("172.17.0.0/16", "fd00::/64"). A
/// prefix of length 0 (a default route) or text that is no subnet: false.
bool has_local_address_in(const std::string& subnet);

}  // namespace rex::detail
