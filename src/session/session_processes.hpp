// The processes of one bash session, and the means to end them all when it closes: a cgroup of
// its own, or a scan of /proc (rex/session/teardown.hpp says which runs where). The ending runs
// on a thread of its own (one per process, shared by every session); the event loop only waits.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <string>
#include <system_error>
#include <vector>

namespace rex::detail {

namespace asio = boost::asio;

class SessionProcesses {
 public:
  SessionProcesses() = default;
  SessionProcesses(const SessionProcesses&) = delete;
  SessionProcesses& operator=(const SessionProcesses&) = delete;
  /// A session that was never ended (a failed start) gives its cgroup back.
  ~SessionProcesses();

  /// Before bash starts: makes the session's cgroup when this process uses them. Returns the
  /// cgroup.procs descriptor bash joins through (owned here until started()), or -1.
  int prepare();
  /// The same cgroup's directory, open for clone3's CLONE_INTO_CGROUP and for the session's
  /// end (owned here until then), or -1.
  int cgroup_dir_fd() const noexcept { return dir_fd_; }
  /// bash could not join the cgroup: the session (and every later one) is found by scan.
  void cgroup_refused(const std::system_error& why);
  /// bash runs as `pid`, the leader of its own session, with `tag` ("NAME=value") in its
  /// environment and so in that of everything it starts.
  void started(pid_t pid, std::string tag);

  /// What a session leaves to be finished off its event loop once its processes are gone: its
  /// descriptors (closing a terminal can take milliseconds) and bash, when it has not been
  /// collected yet (it is the leader of the session; its process group is killed first).
  struct Remains {
    std::vector<int> fds;
    pid_t child = -1;
    int child_pidfd = -1;  // says when `child` has exited (owned by the remains)
  };

  /// Kills every process of the session, closes `remains.fds` and collects `remains.child`, all
  /// on the teardown thread; completes on `executor` once that is done. With the scan, the
  /// other processes were sent SIGKILL by then; with a cgroup, they are gone too.
  asio::awaitable<void> end(asio::any_io_executor executor, Remains remains);
  /// The same without waiting.
  void end_detached(Remains remains);

 private:
  void close_join_fds();

  std::string cgroup_;  // the session's cgroup directory; empty: found by scan
  int procs_fd_ = -1;
  int dir_fd_ = -1;
  pid_t sid_ = -1;
  std::string tag_;
  bool ended_ = false;
};

}  // namespace rex::detail
