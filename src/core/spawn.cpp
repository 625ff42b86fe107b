#include "core/spawn.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <system_error>

extern char** environ;
extern "C" int __clone(int (*fn)(void*), void* stack, int flags, void* arg, ...);

namespace rex::detail {
namespace {

std::vector<char*> to_c_array(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// What the child does between clone and exec, in order; a failure names the step.
enum class Step : int { none, cgroup, session, terminal, stdio, cwd, exec };

// Everything the child needs, prepared by the parent. The child shares our memory (CLONE_VM)
// and runs while the calling thread is suspended (CLONE_VFORK), as posix_spawn's child does;
// it makes raw system calls only, so that no library code (and no sanitizer's interceptor)
// runs in a task that has no thread of its own. (This file is built without sanitizer
// instrumentation for the same reason: see CMakeLists.txt.)
struct ChildPlan {
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* tty = nullptr;
  const char* cwd = nullptr;
  int fds[3] = {-1, -1, -1};
  bool new_process_group = false;
  bool new_session = false;
  int cgroup_procs_fd = -1;
  // Written by the child when a step fails; read by the parent once the child has gone.
  volatile int failed = 0;
  volatile int error = 0;
};

// The kernel's struct sigaction (not glibc's): handler, flags, restorer, mask.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  std::uint64_t mask;
};

long sys(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
  return ::syscall(number, a, b, c, d);
}

[[noreturn]] void child_fail(ChildPlan& plan, Step step) {
  plan.error = errno;
  plan.failed = static_cast<int>(step);
  ::syscall(SYS_exit, 127);
  __builtin_unreachable();
}

// Makes `fd` the child's `target`, without close-on-exec.
bool child_place(int fd, int target) {
  if (fd == target)
    return sys(SYS_fcntl, fd, F_SETFD, 0) == 0;
  return sys(SYS_dup3, fd, target, 0) == target;
}

int child_main(void* arg) {
  ChildPlan& plan = *static_cast<ChildPlan*>(arg);
  // Default dispositions for every signal, then an empty mask (the parent blocked all signals
  // around clone so that none of its handlers can run here).
  KernelSigaction dfl{};
  dfl.handler = SIG_DFL;
  for (long sig = 1; sig < 65; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP)
      sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, 8);
  }
  std::uint64_t empty = 0;
  sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&empty), 0, 8);

  // First, before anything can fork: every process this child starts is in the cgroup too.
  if (plan.cgroup_procs_fd >= 0 &&
      sys(SYS_write, plan.cgroup_procs_fd, reinterpret_cast<long>("0"), 1) != 1)
    child_fail(plan, Step::cgroup);
  if (plan.tty) {
    if (sys(SYS_setsid) < 0)
      child_fail(plan, Step::session);
    // Opened without O_NOCTTY by a session leader: it becomes the controlling terminal.
    const long fd = sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(plan.tty), O_RDWR);
    if (fd < 0)
      child_fail(plan, Step::terminal);
    for (int target = 0; target < 3; ++target) {
      if (!child_place(static_cast<int>(fd), target))
        child_fail(plan, Step::terminal);
    }
    if (fd > 2)
      sys(SYS_close, fd);
  } else {
    if (plan.new_session ? sys(SYS_setsid) < 0
                         : plan.new_process_group && sys(SYS_setpgid, 0, 0) < 0)
      child_fail(plan, Step::session);
    for (int target = 0; target < 3; ++target) {
      int fd = plan.fds[target];
      if (fd < 0) {
        fd = static_cast<int>(sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"),
                                  target == 0 ? O_RDONLY : O_WRONLY));
        if (fd < 0)
          child_fail(plan, Step::stdio);
        if (fd != target) {
          const bool placed = child_place(fd, target);
          sys(SYS_close, fd);
          if (!placed)
            child_fail(plan, Step::stdio);
        }
      } else if (!child_place(fd, target)) {
        child_fail(plan, Step::stdio);
      }
    }
  }
  if (sys(SYS_close_range, 3, ~0U, 0) < 0) {
    for (long fd = 3; fd < 65536; ++fd)
      sys(SYS_close, fd);
  }
  if (plan.cwd && sys(SYS_chdir, reinterpret_cast<long>(plan.cwd)) < 0)
    child_fail(plan, Step::cwd);
  sys(SYS_execve, reinterpret_cast<long>(plan.program), reinterpret_cast<long>(plan.argv),
      reinterpret_cast<long>(plan.envp));
  child_fail(plan, Step::exec);
}

// The child's stack: it runs while our thread waits, so one small mapping per spawn will do.
class ChildStack {
 public:
  static constexpr std::size_t kSize = 64 * 1024;
  ChildStack()
      : base_(::mmap(nullptr, kSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0)) {
    if (base_ == MAP_FAILED)
      throw std::system_error(errno, std::generic_category(), "cannot map a stack for a child");
  }
  ~ChildStack() { ::munmap(base_, kSize); }
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  void* base() const { return base_; }
  void* top() const { return static_cast<char*>(base_) + kSize; }

 private:
  void* base_;
};

// Joining a cgroup by writing to its cgroup.procs takes the kernel's cgroup-wide lock for
// writing, which waits for an RCU grace period whenever no other migration happened just
// before: 10 to 20 ms for the first session of an idle process. clone3's CLONE_INTO_CGROUP
// (Linux 5.7) creates the child in the cgroup instead, with no migration at all. It needs
// clone3 with a stack of our own for a child sharing our memory, which takes a few
// instructions of assembly: x86-64 only; elsewhere, and where the kernel refuses it, the child
// writes to cgroup.procs as before.
#if defined(__x86_64__) && defined(SYS_clone3)
#define REX_CLONE_INTO_CGROUP 1

// The kernel's struct clone_args (Linux 5.7 and later: up to `cgroup`).
struct CloneArgs {
  std::uint64_t flags = 0;
  std::uint64_t pidfd = 0;
  std::uint64_t child_tid = 0;
  std::uint64_t parent_tid = 0;
  std::uint64_t exit_signal = 0;
  std::uint64_t stack = 0;
  std::uint64_t stack_size = 0;
  std::uint64_t tls = 0;
  std::uint64_t set_tid = 0;
  std::uint64_t set_tid_size = 0;
  std::uint64_t cgroup = 0;
};
constexpr std::uint64_t kCloneIntoCgroup = 0x200000000ULL;

// clone3 for a child that shares our memory and starts on args->stack: the child calls fn(arg)
// and exits with what it returns (fn never returns here: it execs or exits). Returns the
// child's pid, or -errno.
long clone3_running(CloneArgs* args, int (*fn)(void*), void* arg) {
  register long fn_reg asm("r12") = reinterpret_cast<long>(fn);
  register long arg_reg asm("r13") = reinterpret_cast<long>(arg);
  long result = SYS_clone3;
  // The child returns from the system call with rax 0 on its new stack (16-byte aligned: the
  // call below leaves it as a function's entry expects) and every other register as ours.
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "movl %%eax, %%edi\n\t"
      "movl $60, %%eax\n\t"  // SYS_exit
      "syscall\n\t"
      "hlt\n\t"
      "1:\n\t"
      : "+a"(result)
      : "D"(args), "S"(sizeof(CloneArgs)), "r"(fn_reg), "r"(arg_reg)
      : "rcx", "r11", "memory", "cc");
  return result;
}

// Whether CLONE_INTO_CGROUP is worth trying: false once the kernel did not know it.
std::atomic<bool> clone_into_cgroup_works{true};

#endif

std::string failure_text(const SpawnOptions& options, Step step) {
  switch (step) {
    case Step::cgroup:
      return "cannot move '" + options.argv.front() + "' into its cgroup";
    case Step::session:
      return "cannot give '" + options.argv.front() + "' a session or process group of its own";
    case Step::terminal:
      return "cannot open the terminal " + options.controlling_tty.value_or("") + " for '" +
             options.argv.front() + "'";
    case Step::stdio:
      return "cannot set up the standard streams of '" + options.argv.front() + "'";
    case Step::cwd:
      return "cannot start '" + options.argv.front() + "' in '" + options.cwd.value_or("") + "'";
    default: {
      std::string what = "cannot start '" + options.argv.front() + "'";
      if (options.cwd)
        what += " in '" + *options.cwd + "'";
      return what;
    }
  }
}

}  // namespace

std::string find_program(const std::string& name,
                         const std::optional<std::vector<std::string>>& env) {
  if (name.empty() || name.find('/') != std::string::npos)
    return name;
  std::string_view path = "/usr/local/bin:/usr/bin:/bin";
  if (env) {
    for (const auto& e : *env)
      if (e.starts_with("PATH="))
        path = std::string_view(e).substr(5);
  } else if (const char* p = ::getenv("PATH")) {
    path = p;
  }
  while (true) {
    auto colon = path.find(':');
    std::string dir(path.substr(0, colon));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate))
      return candidate;
    if (colon == std::string_view::npos)
      break;
    path.remove_prefix(colon + 1);
  }
  return name;  // not found: exec reports ENOENT with the name
}

SpawnedChild spawn_process(const SpawnOptions& options) {
  if (options.argv.empty())
    throw std::invalid_argument("spawn_process: empty argv");
  const std::string program = find_program(options.argv.front(), options.env);
  auto argv = to_c_array(options.argv);
  std::vector<char*> envp;
  if (options.env)
    envp = to_c_array(*options.env);

  ChildPlan plan;
  plan.program = program.c_str();
  plan.argv = argv.data();
  plan.envp = options.env ? envp.data() : environ;
  plan.tty = options.controlling_tty ? options.controlling_tty->c_str() : nullptr;
  plan.cwd = options.cwd ? options.cwd->c_str() : nullptr;
  plan.fds[0] = options.stdin_fd;
  plan.fds[1] = options.stdout_fd;
  plan.fds[2] = options.stderr_fd;
  plan.new_process_group = options.new_process_group;
  plan.new_session = options.new_session;
  plan.cgroup_procs_fd = options.cgroup_procs_fd;
  ChildStack stack;

  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  pid_t pid = -1;
  int clone_error = 0;
  bool cloned = false;
#ifdef REX_CLONE_INTO_CGROUP
  if (options.cgroup_procs_fd >= 0 && clone_into_cgroup_works.load(std::memory_order_relaxed)) {
    const int dir = options.cgroup_dir_fd;
    if (dir >= 0) {
      CloneArgs args;
      args.flags = CLONE_VM | CLONE_VFORK | kCloneIntoCgroup;
      args.exit_signal = SIGCHLD;
      args.stack = reinterpret_cast<std::uint64_t>(stack.base());
      args.stack_size = ChildStack::kSize;
      args.cgroup = static_cast<std::uint64_t>(dir);
      plan.cgroup_procs_fd = -1;  // the child starts in the cgroup
      const long r = clone3_running(&args, child_main, &plan);
      if (r >= 0) {
        pid = static_cast<pid_t>(r);
        cloned = true;
      } else {
        // The kernel lacks clone3 or CLONE_INTO_CGROUP (ENOSYS, E2BIG, EINVAL): never again.
        // Any other refusal (the cgroup's permissions, its type): the child writes to
        // cgroup.procs below, which reports the join's failure as CgroupJoinError.
        if (r == -ENOSYS || r == -E2BIG || r == -EINVAL)
          clone_into_cgroup_works.store(false, std::memory_order_relaxed);
        plan.cgroup_procs_fd = options.cgroup_procs_fd;
      }
    }
  }
#endif
  if (!cloned) {
    // glibc's own name for clone: the thread sanitizer intercepts `clone` and would run its
    // fork bookkeeping in a child that shares our memory, resetting the state of our other
    // threads.
    pid = ::__clone(child_main, stack.top(), CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
    clone_error = errno;
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0)
    throw std::system_error(clone_error, std::generic_category(),
                            failure_text(options, Step::exec));
  if (plan.failed != 0) {
    // The child has exited (it got as far as the failed step): collect it.
    ::waitpid(pid, nullptr, 0);
    const auto step = static_cast<Step>(plan.failed);
    if (step == Step::cgroup)
      throw CgroupJoinError(plan.error, failure_text(options, step));
    throw std::system_error(plan.error, std::generic_category(), failure_text(options, step));
  }
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int err = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw std::system_error(err, std::generic_category(), "pidfd_open");
  }
  ::fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  return {pid, pidfd};
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string_view::npos)
      env[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> environment_entries(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env)
    out.push_back(name + "=" + value);
  return out;
}

}  // namespace rex::detail
