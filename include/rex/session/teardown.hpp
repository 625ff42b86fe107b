// How this process finds and ends every process a bash session started, daemons that left the
// session with setsid included, when the session closes.
//
// - cgroup: each session is a cgroup (v2) of its own, below a cgroup of this process, created
//   where the process may create them (root on a bare host, a delegated subtree, a container
//   with a writable cgroup2 mount). bash is started inside it, everything it starts stays inside
//   it, and a close is one write to cgroup.kill plus a wait for the cgroup to empty: the cost
//   depends on the session alone.
// - scan: elsewhere (a read-only cgroup mount, as in a default Docker or Kubernetes container,
//   a cgroup v1-only host, a kernel without cgroup2). A close looks through /proc for the
//   session's processes: those in bash's session, and those that carry the session's tag in
//   their environment. It costs time in proportion to the processes the scan can see (in a
//   container: the container's own), and it is shared: one walk serves every close that is
//   waiting for it.
// Either way the work runs on a thread of its own, never on the caller's event loop.
//
// REX_SESSION_TEARDOWN=auto (default) | cgroup | scan chooses; `cgroup` falls back to `scan`
// with a warning when cgroups cannot be made here.
#pragma once

#include <cstdint>
#include <string>

namespace rex {

enum class SessionTeardown { cgroup, scan };

/// The method this process uses; chosen once, at the first call or the first session.
SessionTeardown session_teardown();

/// One line for logs: the method, where, and why (for `scan`, why not cgroups).
std::string describe_session_teardown();

struct SessionTeardownStats {
  std::uint64_t proc_walks = 0;    // walks through /proc (scan)
  std::uint64_t cgroup_kills = 0;  // sessions ended through their cgroup
};

/// Counts since the process started.
SessionTeardownStats session_teardown_stats();

}  // namespace rex
