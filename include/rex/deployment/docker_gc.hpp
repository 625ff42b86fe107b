// Garbage collection of rex's containers: finds the containers that rex processes started and
// can no longer remove themselves (the process is gone, killed or the machine rebooted, or the
// container's lifetime has passed) and removes them. It is what `rex gc` runs.
//
// A container belongs to rex when it carries the label rex.managed=1; DockerDeployment adds it
// with the owner's identity (host name, boot id, pid and process start time, so a reused pid is
// not mistaken for the owner) and the expiry time. Containers whose owner runs on another host
// are left alone until they expire.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

namespace asio = boost::asio;

namespace docker {
class Engine;
}

/// Label keys on every container a DockerDeployment creates (and every pod and Secret of a
/// KubernetesDeployment).
namespace labels {
inline constexpr std::string_view managed = "rex.managed";          // "1"
inline constexpr std::string_view deployment = "rex.deployment";    // deployment id
inline constexpr std::string_view owner_host = "rex.owner.host";    // host name
inline constexpr std::string_view owner_boot = "rex.owner.boot";    // kernel boot id
inline constexpr std::string_view owner_pid = "rex.owner.pid";      // pid
inline constexpr std::string_view owner_start = "rex.owner.start";  // start time (clock ticks)
inline constexpr std::string_view expires = "rex.expires";          // unix seconds; absent: never
// A rex gateway's sandbox: its gateway removes it (even after its own restart), so gc leaves it
// until it expires.
inline constexpr std::string_view gateway = "rex.gateway";  // the gateway's id
inline constexpr std::string_view session = "rex.session";  // the gateway's session id
}  // namespace labels

/// This process's identity, as the owner labels carry it.
std::map<std::string, std::string> owner_labels();

struct GcOptions {
  bool all = false;      // remove every rex container, owners alive or not
  bool dry_run = false;  // report only
};

struct GcEntry {
  std::string id;
  std::string name;
  std::string reason;  // "owner process 1234 is gone", "expired 5 min ago", ...
};

struct GcReport {
  std::vector<GcEntry> removed;  // (or would be, in a dry run)
  std::vector<GcEntry> kept;     // with why: "owner process 1234 is running"
  std::vector<std::string> errors;
};

/// Why a container with these labels should go, or empty when it should stay; decided from the
/// labels, the clock and, for owners on this machine, whether the owner process still runs. A
/// gateway's sandbox stays until it expires: its gateway may be down only until its restart.
std::string gc_reason(const std::map<std::string, std::string>& container_labels,
                      std::int64_t now_unix, const GcOptions& options);

/// Why a sandbox with these labels, which gc_reason() keeps, stays: "owner process 1234 is
/// running", "owned by a process on HOST; removed once it expires", ...
std::string gc_keep_reason(const std::map<std::string, std::string>& labels);

asio::awaitable<GcReport> collect_garbage(docker::Engine& engine, GcOptions options = {});

}  // namespace rex
