// Small helpers shared by the test suites: an environment variable for a scope, a temporary
// directory, a command's output, descriptor counting, and an exception check that compares the
// message.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

extern char** environ;

namespace rex::test {

/// Starts `args` (args[0] is the executable's path) with this process's environment and returns
/// its pid, or -1 when it cannot be started.
inline pid_t spawn_process(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = -1;
  if (::posix_spawn(&child, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    return -1;
  return child;
}

/// The same with its stdout and stderr going into the file `log` (created or truncated).
inline pid_t spawn_logged(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t child = -1;
  const int error = ::posix_spawn(&child, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? child : -1;
}

// Sets (or unsets, for nullopt) an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str()))
      old_ = old;
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// The whole content of a file, or "" when it cannot be read.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Runs a shell command line and returns its exit status (-1 when it did not exit) and what it
/// printed, stdout and stderr together.
inline std::pair<int, std::string> command_output(const std::string& command) {
  std::string text;
  FILE* out = ::popen((command + " 2>&1").c_str(), "r");
  if (out == nullptr)
    return {-1, "popen failed"};
  char buffer[4096];
  while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, out))
    text.append(buffer, n);
  const int status = ::pclose(out);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

/// A fresh directory under the system's temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rex-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = std::filesystem::canonical(pattern).string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  /// Writes `content` to `name` inside the directory with `mode`; returns its path.
  std::string file(const std::string& name, const std::string& content, mode_t mode = 0644) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << content;
    ::chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string path_;
};

/// True while `pid` runs. A killed process that is not our child may stay a zombie until its
/// parent (perhaps an init that is not ours) reaps it; it has ended all the same.
inline bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' &&
         line[close + 2] != 'X';
}

/// True when a child of `parent` named `comm` runs in the foreground of its terminal (its
/// process group is the terminal's): where a Ctrl-C typed now reaches it.
inline bool foreground_child(pid_t parent, const std::string& comm) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line))
      continue;
    const auto open = line.find('(');
    const auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open ||
        line.compare(open + 1, close - open - 1, comm) != 0)
      continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0, tty = 0, tpgid = 0;
    if ((rest >> state >> ppid >> pgrp >> session >> tty >> tpgid) && ppid == parent &&
        pgrp == tpgid && state != 'Z')
      return true;
  }
  return false;
}

/// Descriptors this process has open.
inline std::size_t open_fd_count() {
  return static_cast<std::size_t>(std::distance(
      std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator()));
}

}  // namespace rex::test

// Expects `statement` to throw `Exception` whose what() is exactly `message`.
#define EXPECT_THROW_MESSAGE(statement, Exception, message)   \
  do {                                                        \
    try {                                                     \
      statement;                                              \
      ADD_FAILURE() << "no exception from " #statement;       \
    } catch (const Exception& e) {                            \
      EXPECT_EQ(std::string(e.what()), std::string(message)); \
    } catch (const std::exception& e) {                       \
      ADD_FAILURE() << "unexpected exception: " << e.what();  \
    }                                                         \
  } while (false)

// Expects `statement` to throw `Exception` whose what() contains `fragment`.
#define EXPECT_THROW_CONTAINING(statement, Exception, fragment)            \
  do {                                                                     \
    try {                                                                  \
      statement;                                                           \
      ADD_FAILURE() << "no exception from " #statement;                    \
    } catch (const Exception& e) {                                         \
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)   \
          << "'" << e.what() << "' does not contain '" << fragment << "'"; \
    } catch (const std::exception& e) {                                    \
      ADD_FAILURE() << "unexpected exception: " << e.what();               \
    }                                                                      \
  } while (false)
