// Checkpoints of a sandbox: its file system saved by its backend (an image) and the state of its
// bash sessions (SessionState), from which new sandboxes start (fork) or the same sandbox starts
// again (rewind, resume). Checkpoints form a tree: each names the checkpoint its sandbox came
// from (or its previous one) and the sandbox it was taken of.
#pragma once

#include <rex/protocol/session.hpp>

#include <boost/describe/class.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rex {

struct Checkpoint {
  std::string id{};           // "ckpt-" and 16 hex digits
  std::string parent{};       // the checkpoint the sandbox had last come from or taken; empty: none
  std::string sandbox{};      // the deployment id of the sandbox it was taken of
  std::string backend{};      // the backend that holds its image: "docker", "podman"
  std::string image{};        // the backend's image of the file system
  std::string working_dir{};  // where the sandbox's sessions worked when it was taken
  std::vector<SessionState> sessions{};
  std::vector<SessionNotCarried> not_carried{};  // sessions whose state is not in it, and why
  double created_at = 0;                         // unix seconds
};
BOOST_DESCRIBE_STRUCT(Checkpoint, (),
                      (id, parent, sandbox, backend, image, working_dir, sessions, not_carried,
                       created_at))

/// The deployment (or its backend) cannot do what was asked of a sandbox; the message names
/// both: "the kubernetes backend cannot checkpoint a sandbox".
class OperationUnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a sandbox uses now.
struct SandboxMetrics {
  double cpu_percent = 0;  // of its CPUs together, 0-100
  int cpu_count = 0;
  std::uint64_t memory_used = 0;  // bytes
  std::uint64_t memory_limit = 0;
  std::uint64_t disk_used = 0;   // bytes it wrote (its own layer)
  std::uint64_t disk_total = 0;  // bytes of its whole file system
  double timestamp = 0;          // unix seconds
};
BOOST_DESCRIBE_STRUCT(SandboxMetrics, (),
                      (cpu_percent, cpu_count, memory_used, memory_limit, disk_used, disk_total,
                       timestamp))

}  // namespace rex
