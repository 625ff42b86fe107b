#include "core/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <system_error>

extern char** environ;

namespace rex::detail {
namespace {

// RAII holders for the posix_spawn attribute objects.
struct FileActions {
  posix_spawn_file_actions_t a;
  FileActions() { posix_spawn_file_actions_init(&a); }
  ~FileActions() { posix_spawn_file_actions_destroy(&a); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};
struct Attributes {
  posix_spawnattr_t a;
  Attributes() { posix_spawnattr_init(&a); }
  ~Attributes() { posix_spawnattr_destroy(&a); }
  Attributes(const Attributes&) = delete;
  Attributes& operator=(const Attributes&) = delete;
};

void check(int rc, const char* what) {
  if (rc != 0)
    throw std::system_error(rc, std::generic_category(), what);
}

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
  FileActions fa;
  Attributes attr;

  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (options.controlling_tty) {
    flags |= POSIX_SPAWN_SETSID;
  } else if (options.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    check(posix_spawnattr_setpgroup(&attr.a, 0), "posix_spawnattr_setpgroup");
  }
  check(posix_spawnattr_setflags(&attr.a, flags), "posix_spawnattr_setflags");
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  check(posix_spawnattr_setsigdefault(&attr.a, &all), "posix_spawnattr_setsigdefault");
  check(posix_spawnattr_setsigmask(&attr.a, &none), "posix_spawnattr_setsigmask");

  if (options.controlling_tty) {
    // glibc runs setsid() before the file actions, so opening the terminal without O_NOCTTY
    // in the new session leader makes it the controlling terminal.
    check(posix_spawn_file_actions_addopen(&fa.a, 0, options.controlling_tty->c_str(), O_RDWR, 0),
          "posix_spawn_file_actions_addopen");
    check(posix_spawn_file_actions_adddup2(&fa.a, 0, 1), "posix_spawn_file_actions_adddup2");
    check(posix_spawn_file_actions_adddup2(&fa.a, 0, 2), "posix_spawn_file_actions_adddup2");
  } else {
    const int fds[3] = {options.stdin_fd, options.stdout_fd, options.stderr_fd};
    for (int target = 0; target < 3; ++target) {
      if (fds[target] < 0) {
        check(posix_spawn_file_actions_addopen(&fa.a, target, "/dev/null",
                                               target == 0 ? O_RDONLY : O_WRONLY, 0),
              "posix_spawn_file_actions_addopen");
      } else {
        check(posix_spawn_file_actions_adddup2(&fa.a, fds[target], target),
              "posix_spawn_file_actions_adddup2");
      }
    }
  }
  check(posix_spawn_file_actions_addclosefrom_np(&fa.a, 3),
        "posix_spawn_file_actions_addclosefrom_np");
  if (options.cwd) {
    check(posix_spawn_file_actions_addchdir_np(&fa.a, options.cwd->c_str()),
          "posix_spawn_file_actions_addchdir_np");
  }

  const std::string program = find_program(options.argv.front(), options.env);
  auto argv = to_c_array(options.argv);
  std::vector<char*> envp;
  if (options.env)
    envp = to_c_array(*options.env);

  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program.c_str(), &fa.a, &attr.a, argv.data(),
                         options.env ? envp.data() : environ);
  if (rc != 0) {
    std::string what = "cannot start '" + options.argv.front() + "'";
    if (options.cwd)
      what += " in '" + *options.cwd + "'";
    throw std::system_error(rc, std::generic_category(), what);
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

}  // namespace rex::detail
