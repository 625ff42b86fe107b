#include <rex/core/log.hpp>
#include <rex/session/teardown.hpp>

#include "session/session_processes.hpp"

#include <fmt/format.h>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace rex {
namespace {

using Clock = std::chrono::steady_clock;
// A session's processes die within microseconds of SIGKILL; this bounds a kernel that is stuck
// (a process in uninterruptible sleep on a dead file system).
constexpr auto kEndDeadline = std::chrono::seconds(10);
constexpr std::string_view kTagName = "REX_SESSION=";

std::string errno_text(int err) {
  return fmt::format("[Errno {}] {}", err, std::strerror(err));
}

bool write_text(int fd, std::string_view text) {
  if (fd < 0)
    return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::string read_text(int fd) {
  std::string out;
  char buffer[4096];
  off_t at = 0;
  ssize_t n;
  while ((n = ::pread(fd, buffer, sizeof buffer, at)) > 0) {
    out.append(buffer, static_cast<std::size_t>(n));
    at += n;
  }
  return out;
}

// Removes a cgroup and the cgroups below it (a session may have made some), deepest first.
bool remove_cgroup_tree(const std::string& dir) {
  if (::rmdir(dir.c_str()) == 0 || errno == ENOENT)
    return true;
  if (errno != EBUSY && errno != ENOTEMPTY)
    return false;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 &&
          std::strcmp(e->d_name, "..") != 0)
        remove_cgroup_tree(dir + "/" + e->d_name);
    }
    ::closedir(d);
  }
  return ::rmdir(dir.c_str()) == 0 || errno == ENOENT;
}

// The cgroup2 directory of this process, or why there is none.
struct OwnCgroup {
  std::string dir;
  std::string why_not;
};

OwnCgroup find_own_cgroup() {
  std::string path;
  {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
      if (line.starts_with("0::")) {
        path = line.substr(3);
        break;
      }
    }
  }
  if (path.empty())
    return {{}, "this process is in no cgroup2 hierarchy (a cgroup v1-only host)"};
  // mountinfo: ID PARENT MAJ:MIN ROOT MOUNT OPTIONS... - FSTYPE SOURCE SUPER
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0)
      continue;
    std::vector<std::string> fields;
    std::size_t at = 0;
    while (at < dash && fields.size() < 5) {
      const auto end = std::min(line.find(' ', at), dash);
      fields.push_back(line.substr(at, end - at));
      at = end + 1;
    }
    if (fields.size() < 5)
      continue;
    const std::string& root = fields[3];
    const std::string& mount = fields[4];
    if (root != "/" && !(path == root || path.starts_with(root + "/")))
      continue;  // a mount of another part of the hierarchy
    std::string rel = root == "/" ? path : path.substr(root.size());
    return {mount + (rel == "/" ? "" : rel), {}};
  }
  return {{}, "no cgroup2 file system is mounted"};
}

// Ends sessions: one thread per process, shared by every session of every event loop.
class Reaper {
 public:
  struct Job {
    std::string cgroup;          // the session's cgroup; empty: scan
    int cgroup_fd = -1;          // the same, open (-1: by its path)
    pid_t sid = -1;              // bash's pid, the id of its session (scan)
    std::string tag;             // "REX_SESSION=..." (scan)
    pid_t leader = -1;           // bash, not collected yet: its process group is killed first
    std::vector<int> fds;        // closed once the session's processes are gone
    pid_t collect = -1;          // a child of ours (bash): collected then, before `done`
    int collect_pidfd = -1;      // says when `collect` has exited
    std::function<void()> done;  // called on this thread when the job is finished
  };

  static Reaper& get() {
    static Reaper reaper;
    return reaper;
  }

  bool uses_cgroups() const { return cgroups_.load(); }

  std::string description() {
    std::lock_guard lock(mutex_);
    return description_;
  }

  // A new cgroup for a session, and its cgroup.procs open for writing; {"", -1} when this
  // process does not use cgroups or cannot make one now.
  std::pair<std::string, int> make_session_cgroup() {
    if (!cgroups_)
      return {"", -1};
    const std::string dir = fmt::format("{}/s{}", root_, ++cgroup_count_);
    if (::mkdir(dir.c_str(), 0755) != 0) {
      logging::warn("session teardown: cannot make cgroup {}: {}; this session is found by scan",
                    dir, errno_text(errno));
      return {"", -1};
    }
    const std::string procs = dir + "/cgroup.procs";
    const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      logging::warn("session teardown: cannot open {}: {}; this session is found by scan", procs,
                    errno_text(errno));
      ::rmdir(dir.c_str());
      return {"", -1};
    }
    return {dir, fd};
  }

  // bash could not join a cgroup here: later sessions use the scan.
  void give_up_cgroups(const std::string& why) {
    if (!cgroups_.exchange(false))
      return;
    std::lock_guard lock(mutex_);
    description_ =
        fmt::format("scan of /proc (processes cannot join cgroups below {}: {})", root_, why);
    logging::warn("session teardown: {}", description_);
  }

  void opened(pid_t sid) {
    std::lock_guard lock(mutex_);
    open_sids_.insert(sid);
  }

  void submit(Job job) {
    bool was_empty;
    {
      std::lock_guard lock(mutex_);
      open_sids_.erase(job.sid);
      was_empty = queue_.empty();
      queue_.push_back(std::move(job));
    }
    // The thread takes the whole queue when it wakes: one wake-up serves many closes.
    if (was_empty)
      wake();
  }

  SessionTeardownStats stats() const { return {walks_.load(), kills_.load()}; }

 private:
  Reaper() {
    choose();
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    watch_fd(wake_fd_, kWake);
    // The thread takes no signals: they stay with the threads that expect them (an event loop's
    // signal_set); it inherits the mask it starts with.
    sigset_t all, old;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &old);
    thread_ = std::thread([this] { run(); });
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  ~Reaper() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake();
    thread_.join();
    if (!root_.empty())
      ::rmdir(root_.c_str());
    ::close(epoll_fd_);
    ::close(wake_fd_);
  }

  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
  }

  void choose() {
    const char* asked = std::getenv("REX_SESSION_TEARDOWN");
    const std::string_view want = asked ? asked : "auto";
    if (want == "scan") {
      description_ = "scan of /proc (REX_SESSION_TEARDOWN=scan)";
      return;
    }
    if (want != "auto" && want != "cgroup")
      logging::warn("REX_SESSION_TEARDOWN={}: expected auto, cgroup or scan; using auto", want);
    const OwnCgroup own = find_own_cgroup();
    if (own.dir.empty()) {
      description_ = "scan of /proc (" + own.why_not + ")";
    } else {
      base_ = own.dir;
      const std::string dir = fmt::format("{}/rex-{}", own.dir, ::getpid());
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        description_ = fmt::format("scan of /proc (cannot make cgroups in {}: {})", own.dir,
                                   errno_text(errno));
      } else {
        root_ = dir;
        has_kill_ = ::access((dir + "/cgroup.kill").c_str(), W_OK) == 0;
        cgroups_ = true;
        description_ = fmt::format("cgroup per session in {} ({})", dir,
                                   has_kill_ ? "cgroup.kill" : "SIGKILL to cgroup.procs");
      }
    }
    if (want == "cgroup" && !cgroups_)
      logging::warn("REX_SESSION_TEARDOWN=cgroup: {}", description_);
  }

  // ---- the thread -------------------------------------------------------------------------

  // The session's processes are gone (or as gone as they will get): its descriptors are
  // closed and bash collected, then the job's owner is told, and what the notice holds (its
  // eventfd) let go of at once.
  void finish(Job& job) {
    for (const int fd : std::exchange(job.fds, {}))
      ::close(fd);
    if (job.collect_pidfd >= 0)
      ::close(std::exchange(job.collect_pidfd, -1));
    if (job.cgroup_fd >= 0)
      ::close(std::exchange(job.cgroup_fd, -1));
    if (const pid_t child = std::exchange(job.collect, -1); child > 0) {
      const pid_t r = ::waitpid(child, nullptr, WNOHANG);
      if (r == 0)
        uncollected_.push_back(child);  // still dying (a deadline passed): collected later
    }
    if (auto done = std::exchange(job.done, nullptr))
      done();
  }

  struct Dying {
    Job job;
    int id = 0;
    std::vector<int> pidfds;  // of the members still running
    Clock::time_point killed;
    Clock::time_point look_at;  // when to try removing the cgroup again
    Clock::time_point deadline;
  };

  void run() {
    remove_stale_cgroups();
    while (true) {
      std::deque<Job> jobs;
      bool stopping;
      {
        std::lock_guard lock(mutex_);
        jobs.swap(queue_);
        stopping = stopping_;
      }
      std::vector<Job> scans;
      for (Job& job : jobs) {
        if (job.leader > 0) {
          // A dying bash still has work to do (its memory, its terminal): at the lowest
          // priority, so that it does not take the processor from the sessions that go on.
          // (Its cgroup's kill reaches it too.)
          ::setpriority(PRIO_PGRP, static_cast<id_t>(job.leader), 19);
          if (job.cgroup.empty())
            ::kill(-job.leader, SIGKILL);
        }
        if (!job.cgroup.empty())
          kill_cgroup(std::move(job));
        else
          scans.push_back(std::move(job));
      }
      if (!scans.empty())
        scan_and_kill(scans);
      collect_children();
      expire(Clock::now());
      if (stopping && jobs.empty() && dying_.empty() && uncollected_.empty()) {
        remove_ended(to_remove_.size());
        remove_stale_roots();
        return;
      }
      // Removals wait until no session is ending (they would take the processor from the
      // ends, and from everything else) unless too many wait.
      if (dying_.empty() || to_remove_.size() > kRemovalsWaitingAtMost)
        remove_ended(kRemovalsBetweenLooks);
      remove_stale_roots();
      wait_for_news(stopping);
    }
  }

  // What the thread's epoll reports: a new job, or (any other value, a pidfd + kMember) the end
  // of a process of a dying session.
  static constexpr std::uint64_t kWake = 0;
  // Empty cgroups removed before the thread looks for new work again: each takes about 0.1 ms.
  static constexpr std::size_t kRemovalsBetweenLooks = 4;
  static constexpr std::size_t kRemovalsWaitingAtMost = 4096;
  static constexpr std::uint64_t kMember = 1;

  void watch_fd(int fd, std::uint64_t key) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = key;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
  }

  // When to look again at a cgroup whose listed members have all exited but that is not empty
  // yet: the last ones are still leaving it (a moment), or it holds cgroups of its own that a
  // session made (their members are not in its cgroup.procs).
  static Clock::time_point next_look(const Dying& d, Clock::time_point now) {
    return now + (now - d.killed < std::chrono::milliseconds(20) ? std::chrono::milliseconds(1)
                                                                 : std::chrono::milliseconds(20));
  }

  void wait_for_news(bool stopping) {
    int timeout = -1;
    if (!uncollected_.empty() || stopping)
      timeout = 5;
    if (!to_remove_.empty() && (dying_.empty() || to_remove_.size() > kRemovalsWaitingAtMost))
      timeout = 0;
    if (!dying_.empty()) {
      const auto now = Clock::now();
      Clock::time_point first = Clock::time_point::max();
      for (const auto& [id, d] : dying_) {
        first = std::min(first, d.deadline);
        if (d.pidfds.empty())
          first = std::min(first, d.look_at);
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(first - now).count();
      const int until = static_cast<int>(std::clamp<long long>(ms + 1, 0, 60'000));
      timeout = timeout < 0 ? until : std::min(timeout, until);
    }
    epoll_event events[64];
    const int n = ::epoll_wait(epoll_fd_, events, 64, timeout);
    for (int i = 0; i < n; ++i) {
      const std::uint64_t key = events[i].data.u64;
      if (key == kWake) {
        std::uint64_t count;
        [[maybe_unused]] const auto r = ::read(wake_fd_, &count, sizeof count);
      } else {
        on_member_exit(static_cast<int>(key - kMember));
      }
    }
    look_again();
  }

  void look_again() {
    const auto now = Clock::now();
    finish_where([&](Dying& d) { return d.pidfds.empty() && now >= d.look_at && ended(d, now); });
  }

  // Finishes (and forgets) every dying session for which `over` says so.
  template <class Over>
  void finish_where(Over over) {
    for (auto it = dying_.begin(); it != dying_.end();) {
      if (!over(it->second)) {
        ++it;
        continue;
      }
      Dying d = std::move(it->second);
      it = dying_.erase(it);
      finish_cgroup(d);
    }
  }

  // ---- cgroups ----------------------------------------------------------------------------

  Dying dying(Job job) {
    Dying d;
    d.id = ++dying_count_;
    d.killed = Clock::now();
    d.deadline = d.killed + kEndDeadline;
    d.job = std::move(job);
    return d;
  }

  void watch_member(Dying& d, int pidfd) {
    d.pidfds.push_back(pidfd);
    member_of_[pidfd] = d.id;
    watch_fd(pidfd, kMember + static_cast<std::uint64_t>(pidfd));
  }

  void kill_cgroup(Job job) {
    ++kills_;
    if (has_kill_) {
      if (!write_text(open_file(job, "cgroup.kill", O_WRONLY), "1"))
        logging::warn("session teardown: writing {}/cgroup.kill: {}", job.cgroup,
                      errno_text(errno));
    } else {
      kill_members(job);
    }
    Dying d = dying(std::move(job));
    // A pidfd says when a process has exited, at once (cgroup.events notices come at most every
    // 10 ms, the kernel's rate limit for them). bash's own is enough to start with: the others
    // were killed in the same step, and the cgroup says whether any is left once bash is gone.
    if (d.job.collect_pidfd >= 0) {
      watch_member(d, std::exchange(d.job.collect_pidfd, -1));
    } else {
      for (const pid_t pid : members(d.job)) {
        const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
        if (fd >= 0)  // else gone already
          watch_member(d, fd);
      }
    }
    if (d.pidfds.empty() && ended(d, d.killed)) {
      finish_cgroup(d);
      return;
    }
    const int id = d.id;
    dying_.emplace(id, std::move(d));
  }

  // The session has ended once its cgroup holds no process, in it or in a cgroup of its own;
  // otherwise it is looked at again a little later. The empty cgroup is removed after the
  // session's owner has been told (removing one takes longer than all the rest of an end).
  bool ended(Dying& d, Clock::time_point now) {
    if (d.job.cgroup.empty())
      return true;
    if (!populated(d.job)) {
      to_remove_.push_back(d.job.cgroup);
      return true;
    }
    d.look_at = next_look(d, now);
    return false;
  }

  // Whether a process is left in `cgroup` or below it (cgroup.events: "populated 0|1").
  static bool populated(const Job& job) {
    const int fd = open_file(job, "cgroup.events", O_RDONLY);
    if (fd < 0)
      return false;  // gone
    const std::string text = read_text(fd);
    ::close(fd);
    return text.find("populated 1") != std::string::npos;
  }

  // Empty cgroups of ended sessions, a few at a time between the other work.
  void remove_ended(std::size_t count) {
    for (; count > 0 && !to_remove_.empty(); --count) {
      remove_cgroup_tree(to_remove_.front());
      to_remove_.pop_front();
    }
  }

  // A file of the job's cgroup, opened through the directory the session kept open (a path
  // from the root of the cgroup file system costs a lookup of each of its parts).
  static int open_file(const Job& job, const char* name, int flags) {
    if (job.cgroup_fd >= 0)
      return ::openat(job.cgroup_fd, name, flags | O_CLOEXEC);
    return ::open((job.cgroup + "/" + name).c_str(), flags | O_CLOEXEC);
  }

  static std::vector<pid_t> members(const Job& job) {
    std::vector<pid_t> out;
    const int fd = open_file(job, "cgroup.procs", O_RDONLY);
    if (fd < 0)
      return out;
    const std::string text = read_text(fd);
    ::close(fd);
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      if (const long pid = std::strtol(text.c_str() + at, nullptr, 10); pid > 0)
        out.push_back(static_cast<pid_t>(pid));
      at = end + 1;
    }
    return out;
  }

  void forget_member(Dying& d, int fd) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    member_of_.erase(fd);
    std::erase(d.pidfds, fd);
  }

  void on_member_exit(int fd) {
    const auto owner = member_of_.find(fd);
    if (owner == member_of_.end())
      return;
    auto it = dying_.find(owner->second);
    if (it == dying_.end())
      return;
    forget_member(it->second, fd);
    if (it->second.pidfds.empty() && ended(it->second, Clock::now())) {
      Dying d = std::move(it->second);
      dying_.erase(it);
      finish_cgroup(d);
    }
  }

  // Without cgroup.kill (Linux before 5.14): SIGKILL to each member until none is left. A killed
  // process cannot fork any more, so each round finds fewer.
  static void kill_members(const Job& job) {
    for (int round = 0; round < 100; ++round) {
      const std::vector<pid_t> pids = members(job);
      if (pids.empty())
        return;
      for (const pid_t pid : pids)
        ::kill(pid, SIGKILL);
    }
  }

  void expire(Clock::time_point now) {
    finish_where([&](const Dying& d) {
      if (d.deadline > now)
        return false;
      if (d.job.cgroup.empty())
        logging::warn("session teardown: bash ({}) still runs {} s after SIGKILL", d.job.collect,
                      kEndDeadline.count());
      else
        logging::warn(
            "session teardown: cgroup {} still has processes {} s after SIGKILL; it "
            "stays",
            d.job.cgroup, kEndDeadline.count());
      return true;
    });
  }

  void finish_cgroup(Dying& d) {
    while (!d.pidfds.empty())
      forget_member(d, d.pidfds.back());
    finish(d.job);
  }

  // cgroups of rex processes that are gone (a crash, SIGKILL): their sessions end now.
  void remove_stale_cgroups() {
    if (base_.empty() || !cgroups_)
      return;
    DIR* d = ::opendir(base_.c_str());
    if (!d)
      return;
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (e->d_type != DT_DIR || !name.starts_with("rex-"))
        continue;
      char* end = nullptr;
      const long pid = std::strtol(e->d_name + 4, &end, 10);
      if (pid <= 0 || *end != '\0' || pid == ::getpid())
        continue;
      if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        stale.push_back(base_ + "/" + e->d_name);
    }
    ::closedir(d);
    for (const std::string& dir : stale) {
      if (DIR* sessions = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(sessions)) {
          if (e->d_type == DT_DIR && e->d_name[0] != '.') {
            Job job;
            job.cgroup = dir + "/" + e->d_name;
            kill_cgroup(std::move(job));
          }
        }
        ::closedir(sessions);
      }
      stale_roots_.push_back(dir);
    }
  }

  // ---- scan -------------------------------------------------------------------------------

  // One walk (two passes: processes forked while the first one ran) for every session waiting.
  void scan_and_kill(std::vector<Job>& jobs) {
    std::unordered_set<pid_t> sids;
    std::set<std::string, std::less<>> tags;
    for (const Job& job : jobs) {
      if (job.sid > 0)
        sids.insert(job.sid);
      if (!job.tag.empty())
        tags.insert(job.tag);
    }
    std::unordered_set<pid_t> others;
    {
      std::lock_guard lock(mutex_);
      others = open_sids_;
    }
    for (int pass = 0; pass < 2; ++pass)
      walk(sids, tags, others);
    // Every process found was sent SIGKILL; bash, when it is to be collected, is waited for.
    for (Job& job : jobs) {
      if (job.collect <= 0 || job.collect_pidfd < 0) {
        finish(job);
        continue;
      }
      Dying d = dying(std::move(job));
      watch_member(d, std::exchange(d.job.collect_pidfd, -1));
      const int id = d.id;
      dying_.emplace(id, std::move(d));
    }
  }

  void walk(const std::unordered_set<pid_t>& sids, const std::set<std::string, std::less<>>& tags,
            const std::unordered_set<pid_t>& others) {
    ++walks_;
    DIR* dir = ::opendir("/proc");
    if (!dir)
      return;
    const long self = ::getpid();
    while (dirent* e = ::readdir(dir)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || *end != '\0' || pid == self)
        continue;
      // getsid is one system call, where /proc/N/stat takes three. Kernel threads are in
      // session 0; processes of other open sessions cannot carry a closing session's tag
      // unless they were given it on purpose.
      const pid_t sid = ::getsid(static_cast<pid_t>(pid));
      if (sid <= 0 || others.contains(sid))
        continue;
      if (sids.contains(sid) || (!tags.empty() && carries_tag(pid, tags)))
        ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
    ::closedir(dir);
  }

  // Whether `pid` was started with one of `tags` in its environment.
  static bool carries_tag(long pid, const std::set<std::string, std::less<>>& tags) {
    const std::string path = fmt::format("/proc/{}/environ", pid);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return false;
    const std::string env = read_text(fd);
    ::close(fd);
    // Entries are NUL-terminated; compare whole entries only.
    for (std::size_t at = 0; at < env.size();) {
      const std::size_t end = std::min(env.find('\0', at), env.size());
      const std::string_view entry = std::string_view(env).substr(at, end - at);
      if (entry.starts_with(kTagName) && tags.contains(entry))
        return true;
      at = end + 1;
    }
    return false;
  }

  void collect_children() {
    std::erase_if(uncollected_, [](pid_t pid) {
      const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
      return r == pid || (r < 0 && errno == ECHILD);
    });
  }

  // The directories of dead rex processes, once none of their sessions' cgroups is left.
  void remove_stale_roots() {
    std::erase_if(stale_roots_, [this](const std::string& dir) {
      for (const auto& [id, d] : dying_) {
        if (d.job.cgroup.starts_with(dir + "/"))
          return false;
      }
      return ::rmdir(dir.c_str()) == 0 || errno != EBUSY;
    });
  }

  std::mutex mutex_;
  std::string description_;
  std::deque<Job> queue_;
  std::unordered_set<pid_t> open_sids_;
  bool stopping_ = false;

  std::atomic<bool> cgroups_{false};
  bool has_kill_ = false;
  std::string base_;  // this process's own cgroup
  std::string root_;  // base_/rex-PID: the sessions' cgroups are below it
  std::atomic<std::uint64_t> cgroup_count_{0};
  std::atomic<std::uint64_t> walks_{0};
  std::atomic<std::uint64_t> kills_{0};

  int wake_fd_ = -1;
  int epoll_fd_ = -1;
  std::thread thread_;
  // The thread's own.
  std::unordered_map<int, Dying> dying_;    // by id
  std::unordered_map<int, int> member_of_;  // pidfd -> id of its session's Dying
  int dying_count_ = 0;
  std::vector<pid_t> uncollected_;
  std::vector<std::string> stale_roots_;
  std::deque<std::string> to_remove_;  // empty cgroups of ended sessions
};

}  // namespace

SessionTeardown session_teardown() {
  return Reaper::get().uses_cgroups() ? SessionTeardown::cgroup : SessionTeardown::scan;
}

std::string describe_session_teardown() {
  return Reaper::get().description();
}

SessionTeardownStats session_teardown_stats() {
  return Reaper::get().stats();
}

namespace detail {
namespace {
// The job that ends the session whose processes these are.
Reaper::Job ending(const std::string& cgroup, pid_t sid, const std::string& tag) {
  Reaper::Job job;
  job.cgroup = cgroup;
  job.sid = sid;
  job.tag = tag;
  return job;
}
}  // namespace

SessionProcesses::~SessionProcesses() {
  close_join_fds();
  if (!ended_ && !cgroup_.empty())
    remove_cgroup_tree(cgroup_);
}

int SessionProcesses::prepare() {
  auto [dir, fd] = Reaper::get().make_session_cgroup();
  cgroup_ = std::move(dir);
  procs_fd_ = fd;
  if (fd >= 0)
    dir_fd_ = ::open(cgroup_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // -1: join by write
  return fd;
}

void SessionProcesses::close_join_fds() {
  if (procs_fd_ >= 0)
    ::close(std::exchange(procs_fd_, -1));
  if (dir_fd_ >= 0)
    ::close(std::exchange(dir_fd_, -1));
}

void SessionProcesses::cgroup_refused(const std::system_error& why) {
  Reaper::get().give_up_cgroups(why.code().message());
  close_join_fds();
  if (!cgroup_.empty())
    remove_cgroup_tree(std::exchange(cgroup_, {}));
}

void SessionProcesses::started(pid_t pid, std::string tag) {
  // The directory stays open: the session's end opens its files through it.
  if (procs_fd_ >= 0)
    ::close(std::exchange(procs_fd_, -1));
  sid_ = pid;
  tag_ = std::move(tag);
  Reaper::get().opened(pid);
}

namespace {
// What a waiting close and the reaper's thread share: the close's eventfd, for as long as the
// close waits. The close owns the descriptor; the thread writes to it only while `waiting`,
// under the lock, so it never writes to a number that was closed (and perhaps reused). Nothing
// of the event loop itself is touched from that thread: the loop may be gone by then.
struct Handoff {
  std::mutex mutex;
  int fd = -1;
  bool waiting = true;
};

// Ends the wait, whichever way the close ends (woken, or destroyed with its event loop), before
// the descriptor is closed.
struct StopWaiting {
  std::shared_ptr<Handoff> handoff;
  ~StopWaiting() {
    std::lock_guard lock(handoff->mutex);
    handoff->waiting = false;
  }
};
}  // namespace

namespace {
// Remains that no job takes (a session that never started): finished here.
void finish_here(SessionProcesses::Remains& remains) {
  for (const int fd : std::exchange(remains.fds, {}))
    ::close(fd);
  if (remains.child_pidfd >= 0)
    ::close(std::exchange(remains.child_pidfd, -1));
  if (remains.child > 0)
    ::waitpid(remains.child, nullptr, WNOHANG);
}
}  // namespace

asio::awaitable<void> SessionProcesses::end(asio::any_io_executor executor, Remains remains) {
  if (ended_ || sid_ <= 0) {
    finish_here(remains);
    co_return;
  }
  ended_ = true;
  auto handoff = std::make_shared<Handoff>();
  handoff->fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (handoff->fd < 0)
    throw std::system_error(errno, std::generic_category(), "eventfd");
  asio::posix::stream_descriptor woken(executor, handoff->fd);
  StopWaiting stop{handoff};  // destroyed before `woken` closes the descriptor
  Reaper::Job job = ending(cgroup_, sid_, tag_);
  job.leader = remains.child > 0 ? sid_ : -1;
  job.collect = remains.child;
  job.collect_pidfd = std::exchange(remains.child_pidfd, -1);
  job.cgroup_fd = std::exchange(dir_fd_, -1);
  job.fds = std::move(remains.fds);
  job.done = [handoff] {
    std::lock_guard lock(handoff->mutex);
    if (!handoff->waiting)
      return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(handoff->fd, &one, sizeof one);
  };
  Reaper::get().submit(std::move(job));
  co_await woken.async_wait(asio::posix::descriptor_base::wait_read, asio::use_awaitable);
}

void SessionProcesses::end_detached(Remains remains) {
  if (ended_ || sid_ <= 0) {
    finish_here(remains);
    return;
  }
  ended_ = true;
  Reaper::Job job = ending(cgroup_, sid_, tag_);
  job.leader = remains.child > 0 ? sid_ : -1;
  job.collect = remains.child;
  job.collect_pidfd = std::exchange(remains.child_pidfd, -1);
  job.cgroup_fd = std::exchange(dir_fd_, -1);
  job.fds = std::move(remains.fds);
  Reaper::get().submit(std::move(job));
}

}  // namespace detail
}  // namespace rex
