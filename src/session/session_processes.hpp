// The processes of one bash session, and the means to end them all when it closes: a cgroup of
// its own, or a scan of /proc (rex/session/teardown.hpp says which runs where). The ending runs
// on a thread of its own (one per process, shared by every session); the event loop only waits.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <string>
#include <system_error>

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
  /// The same cgroup's directory, open for clone3's CLONE_INTO_CGROUP (owned here until
  /// started()), or -1.
  int cgroup_dir_fd() const noexcept { return dir_fd_; }
  /// bash could not join the cgroup: the session (and every later one) is found by scan.
  void cgroup_refused(const std::system_error& why);
  /// bash runs as `pid`, the leader of its own session, with `tag` ("NAME=value") in its
  /// environment and so in that of everything it starts.
  void started(pid_t pid, std::string tag);

  /// Kills every process of the session; completes on `executor` once they are gone (cgroup)
  /// or were all sent SIGKILL (scan). `bash_alive`: bash has not been collected yet, so its
  /// process group may be signalled. bash itself is left for its parent to collect.
  asio::awaitable<void> end(asio::any_io_executor executor, bool bash_alive);
  /// The same without waiting; `child` (bash, when nobody else will collect it) is collected.
  void end_detached(pid_t child);

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
