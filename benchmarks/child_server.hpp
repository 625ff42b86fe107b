// A child HTTP server for benchmarks: spawned with its stdout (and, if asked, its stderr) on a
// pipe, ready once it prints its ready marker followed by HOST:PORT ("listening on
// http://HOST:PORT" for rex-server); stopped with SIGTERM. Its output is kept for failure
// messages.
#pragma once

#include "bench_common.hpp"

#include <fmt/core.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace rex::bench {

[[noreturn]] inline void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

enum class ReadOutcome { data, eof, timeout };

// Appends what `fd` has to `into`, waiting for it until `deadline` (at most one read).
inline ReadOutcome read_some_until(int fd, Clock::time_point deadline, std::string& into) {
  std::array<char, 65536> chunk;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      return ReadOutcome::timeout;
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno != EINTR)
      throw_errno("poll");
    if (rc <= 0)
      continue;
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return ReadOutcome::eof;
    into.append(chunk.data(), static_cast<std::size_t>(n));
    return ReadOutcome::data;
  }
}

struct ChildServerOptions {
  std::string ready_marker = "listening on http://";  // printed before HOST:PORT
  bool capture_stderr = false;                        // stderr into the same pipe as stdout
  std::chrono::seconds start_limit{15};               // to print the marker
  // Servers that re-raise SIGTERM after a clean shutdown (uvicorn) end "by signal 15": that
  // counts as a clean stop too.
  bool sigterm_death_is_clean = false;
};

class ChildServer {
 public:
  ChildServer(std::string name, std::vector<std::string> argv, ChildServerOptions options = {})
      : name_(std::move(name)), options_(std::move(options)) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      throw_errno("pipe2");
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (options_.capture_stderr)
      ::posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, argv[0].c_str(), &fa, nullptr, args.data(), environ);
    ::posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      throw std::system_error(rc, std::generic_category(), "cannot start " + argv[0]);
    }
    out_fd_ = out[0];
    try {
      port_ = wait_for_port(options_.start_limit);
    } catch (...) {
      kill_now();
      throw;
    }
    // The rest of its output is kept (for a failure message) by a thread that reads to EOF,
    // so the child never blocks on a full pipe.
    drain_ = std::thread([this] { drain(); });
  }
  ~ChildServer() { kill_now(); }
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;

  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }

  // SIGTERM, then wait (up to `grace`) for it to exit. Returns its exit status, or a
  // description of how it ended otherwise.
  std::optional<std::string> stop(std::chrono::seconds grace) {
    if (pid_ <= 0)
      return "already stopped";
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + grace;
    int status = 0;
    while (true) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_)
        break;
      if (r < 0)
        throw_errno("waitpid");
      if (Clock::now() > deadline) {
        kill_now();
        return fmt::format("{} did not exit within {} s of SIGTERM; killed", name_, grace.count());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    join_drain();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      return std::nullopt;
    if (options_.sigterm_death_is_clean && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)
      return std::nullopt;
    const std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                              : fmt::format("signal {}", WTERMSIG(status));
    return fmt::format("{} ended with {} after SIGTERM; its output:\n{}", name_, how, output());
  }

  // SIGKILL, as a crash would end it.
  void kill() { kill_now(); }

  std::string output() {
    const std::lock_guard lock(mutex_);
    return output_;
  }

 private:
  std::uint16_t wait_for_port(std::chrono::seconds limit) {
    const std::string_view marker = options_.ready_marker;
    const auto deadline = Clock::now() + limit;
    while (true) {
      const ReadOutcome got = read_some_until(out_fd_, deadline, output_);
      if (got == ReadOutcome::timeout)
        throw std::runtime_error(fmt::format("{} printed no `{}` line within {} s; output: {}",
                                             name_, marker, limit.count(), output_));
      if (got == ReadOutcome::eof) {
        throw std::runtime_error(
            fmt::format("{} exited before listening; output: {}", name_, output_));
      }
      const std::size_t at = output_.find(marker);
      if (at == std::string::npos)
        continue;
      const std::size_t eol = output_.find('\n', at);
      if (eol == std::string::npos)
        continue;
      std::string_view address(output_.data() + at + marker.size(), eol - at - marker.size());
      address = address.substr(0, address.find(' '));  // uvicorn adds "(Press CTRL+C to quit)"
      const std::size_t colon = address.rfind(':');
      const long port =
          colon == std::string_view::npos
              ? 0
              : std::strtol(std::string(address.substr(colon + 1)).c_str(), nullptr, 10);
      if (port <= 0 || port > 65535)
        throw std::runtime_error(fmt::format("{}: no port in `{}`", name_, address));
      return static_cast<std::uint16_t>(port);
    }
  }

  void drain() {
    std::array<char, 4096> chunk;
    while (true) {
      const ssize_t n = ::read(out_fd_, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return;
      const std::lock_guard lock(mutex_);
      output_.append(chunk.data(), static_cast<std::size_t>(n));
    }
  }

  void join_drain() {
    if (drain_.joinable())
      drain_.join();
    if (out_fd_ >= 0) {
      ::close(out_fd_);
      out_fd_ = -1;
    }
  }

  void kill_now() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    join_drain();
  }

  std::string name_;
  ChildServerOptions options_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread drain_;
  std::mutex mutex_;
  std::string output_;
};

}  // namespace rex::bench
