// Process creation for sessions and one-off commands: posix_spawn (vfork speed, reports exec
// failures to the caller) plus a pidfd for asynchronous exit waits. Internal to the library.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
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
  // Start a new session and open this terminal (a pty slave path) as its controlling terminal
  // and as fds 0, 1 and 2 (the std*_fd fields are then ignored).
  std::optional<std::string> controlling_tty;
};

struct SpawnedChild {
  pid_t pid = -1;
  int pidfd = -1;  // readable once the child has exited; owned by the caller
};

/// Starts a child. Every fd of ours above 2 is closed in the child, signal dispositions and
/// mask are reset. Throws std::system_error naming the program when it cannot be started.
SpawnedChild spawn_process(const SpawnOptions& options);

/// Resolves a program name through PATH (from `env` when given, else ours), as execvp would.
std::string find_program(const std::string& name,
                         const std::optional<std::vector<std::string>>& env = std::nullopt);

}  // namespace rex::detail
