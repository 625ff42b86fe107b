// What every backend's garbage collection shares: the labels rex puts on everything it starts
// (a container, a pod, a task, a cloud's sandbox), the rules that decide from them whether a
// sandbox's owner is gone, and the report `rex gc` prints.
//
// A sandbox belongs to rex when it carries the label rex.managed=1, with its owner's identity
// (host name, boot id, pid and process start time, so a reused pid is not mistaken for the
// owner) and its expiry time. Sandboxes whose owner runs on another host are left alone until
// they expire; a gateway's stay until they expire (their gateway removes them).
//
// Threading: gc_reason() reads /proc; sweep_garbage() runs on the caller's executor.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

namespace asio = boost::asio;

/// Label keys on everything a deployment starts (containers, pods and their Secrets, tasks, cloud
/// sandboxes).
namespace labels {
inline constexpr std::string_view managed = "rex.managed";          // "1"
inline constexpr std::string_view deployment = "rex.deployment";    // deployment id
inline constexpr std::string_view owner_host = "rex.owner.host";    // host name
inline constexpr std::string_view owner_boot = "rex.owner.boot";    // kernel boot id
inline constexpr std::string_view owner_pid = "rex.owner.pid";      // pid
inline constexpr std::string_view owner_start = "rex.owner.start";  // start time (clock ticks)
inline constexpr std::string_view expires = "rex.expires";
// When it was made (unix seconds), where the backend's own listing may not say (a Fargate task's
// tags in an emulator, the security groups a Fargate deployment makes).
inline constexpr std::string_view created = "rex.created";  // unix seconds; absent: never
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

/// A sandbox a backend listed by rex.managed=1, before the rules decide.
struct GcCandidate {
  std::string id;    // what the backend removes it by
  std::string name;  // for people; empty: the id
  std::map<std::string, std::string> labels;
};

/// Decides each candidate by gc_reason() (at the clock's now) and, unless a dry run, removes
/// those that go with `remove`; a removal that throws is an error of the report, naming the
/// sandbox, and the others go on.
asio::awaitable<GcReport> sweep_garbage(
    std::vector<GcCandidate> found, GcOptions options,
    std::function<asio::awaitable<void>(const GcCandidate&)> remove);

}  // namespace rex
