// Process creation for sessions and one-off commands: a vfork-style clone (posix_spawn's speed;
// failures of every step up to exec reported to the caller), optionally straight into a cgroup,
// plus a pidfd for asynchronous exit waits. Internal to the library.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace rex::detail {

struct SpawnOptions {
  std::vector<std::string> argv;                // argv[0] is looked up in PATH when it has no '/'
  std::optional<std::vector<std::string>> env;  // "NAME=value" entries; none = inherit ours
  std::optional<std::string> cwd;
  // File descriptors of ours that become the child's 0, 1 and 2; -1 means /dev/null.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool new_process_group = false;  // the child leads a process group of its own
  // The child leads a session (and a process group) of its own, with no controlling terminal:
  // what happens to our terminal and our process group does not reach it.
  bool new_session = false;
  // Start a new session and open this terminal (a pty slave path) as its controlling terminal
  // and as fds 0, 1 and 2 (the std*_fd fields are then ignored).
  std::optional<std::string> controlling_tty;
  // An open cgroup.procs of a cgroup (v2) the child joins before it can start anything else;
  // -1: it stays in ours.
  int cgroup_procs_fd = -1;
  // The same cgroup's directory, open: the child is created in it (clone3's CLONE_INTO_CGROUP)
  // where the kernel can, instead of joining through cgroup.procs; -1: through cgroup.procs.
  int cgroup_dir_fd = -1;
};

/// The child could not join the cgroup it was given (no permission, a read-only hierarchy):
/// the caller may start it again without one.
struct CgroupJoinError : std::system_error {
  CgroupJoinError(int error, const std::string& what)
      : std::system_error(error, std::generic_category(), what) {}
};

struct SpawnedChild {
  pid_t pid = -1;
  int pidfd = -1;  // readable once the child has exited; owned by the caller
};

/// Starts a child. Every fd of ours above 2 is closed in the child, signal dispositions and
/// mask are reset. Throws std::system_error naming the program when it cannot be started.
SpawnedChild spawn_process(const SpawnOptions& options);

/// This process's environment, name -> value.
std::map<std::string, std::string> current_environment();

/// An environment as the "NAME=value" entries a child is given (SpawnOptions::env), in name
/// order.
std::vector<std::string> environment_entries(const std::map<std::string, std::string>& env);

/// Resolves a program name through PATH (from `env` when given, else ours), as execvp would.
std::string find_program(const std::string& name,
                         const std::optional<std::vector<std::string>>& env = std::nullopt);

}  // namespace rex::detail
