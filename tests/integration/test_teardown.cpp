// Closing sessions ends every process they started (background jobs, daemons that left with
// setsid, double forks) however many other sessions are open, through the method this process
// uses (rex/session/teardown.hpp); the other sessions go on untouched. CTest runs this file
// twice: as the machine allows (cgroups here when root) and with REX_SESSION_TEARDOWN=scan.
#include <rex/runtime/local_runtime.hpp>
#include <rex/session/teardown.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

using test::process_running;
using test::run_async;
using namespace std::chrono_literals;

// Other sessions open while one closes (REX_TEARDOWN_OTHERS overrides, for a quick run).
int other_sessions() {
  const char* n = std::getenv("REX_TEARDOWN_OTHERS");
  return n ? std::atoi(n) : 1000;
}

void raise_fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

BashAction in(std::string session, std::string command) {
  BashAction a;
  a.session = std::move(session);
  a.command = std::move(command);
  a.timeout = 20;
  return a;
}

// Live processes whose command line contains `needle`.
std::vector<pid_t> running(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    // A process that ends while it is read fails the read (ESRCH): `<<` takes that as the end,
    // where an istreambuf_iterator would throw.
    std::ifstream in(entry.path() / "cmdline");
    std::ostringstream text;
    text << in.rdbuf();
    std::string cmdline = text.str();
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    const pid_t pid = std::stoi(name);
    if (cmdline.find(needle) != std::string::npos && pid != ::getpid() && process_running(pid))
      out.push_back(pid);
  }
  return out;
}

// Waits (bounded) until `count` processes match `needle` (a command started with `&` may not
// have reached exec when its prompt comes back); returns those that do at the end.
std::vector<pid_t> wait_count(const std::string& needle, std::size_t count,
                              std::chrono::milliseconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  auto found = running(needle);
  while (found.size() != count && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);
    found = running(needle);
  }
  return found;
}

// Waits (bounded) until nothing matches `needle`; returns what is left.
std::vector<pid_t> wait_gone(const std::string& needle, std::chrono::milliseconds bound) {
  return wait_count(needle, 0, bound);
}

std::string unique_digits() {
  std::random_device rd;
  return std::to_string(100000 + rd() % 800000);
}

class SessionTeardownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    raise_fd_limit();
    method_ = session_teardown();
    SCOPED_TRACE(describe_session_teardown());
  }
  SessionTeardown method_ = SessionTeardown::scan;
};

TEST_F(SessionTeardownTest, ClosingOneOfManyEndsAllItStartedAndNothingElse) {
  asio::io_context io;
  LocalRuntime runtime(io.get_executor());
  const int others = other_sessions();
  const std::string digits = unique_digits();
  // `sleep` takes digits only: each process is found by its own number.
  struct Start {
    std::string what, needle, command;
  };
  std::vector<Start> starts;
  auto add = [&](std::string what, int n, std::string_view form) {
    std::string needle = fmt::format("sleep 7{}{}", n, digits);
    std::string command = fmt::format(fmt::runtime(form), needle);
    starts.push_back({std::move(what), std::move(needle), std::move(command)});
  };
  add("background job", 1, "{} &");
  add("setsid", 2, "setsid {} &");
  add("nohup setsid", 3, "nohup setsid {} >/dev/null 2>&1 &");
  add("double fork", 4, "(setsid bash -c '{}' &)");
  add("daemon without the environment", 5, "env -i setsid /bin/{} >/dev/null 2>&1 &");
  const std::string other_needle = fmt::format("sleep 76{}", digits);
  std::vector<pid_t> other_shells;
  run_async(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < others; ++i) {
          CreateBashSessionRequest req;
          req.session = fmt::format("other{}", i);
          co_await runtime.create_session(req);
        }
        // A few of the others run something of their own that must survive.
        for (int i = 0; i < std::min(others, 3); ++i) {
          const auto name = fmt::format("other{}", i);
          co_await runtime.run_in_session(in(name, fmt::format("setsid sleep 76{} &", digits)));
          auto pid = co_await runtime.run_in_session(in(name, "echo $$"));
          other_shells.push_back(std::stoi(pid.output));
        }
        CreateBashSessionRequest req;
        req.session = "closing";
        co_await runtime.create_session(req);
        for (const auto& start : starts)
          co_await runtime.run_in_session(in("closing", start.command));
        for (const auto& start : starts)
          EXPECT_EQ(wait_count(start.needle, 1, 5s).size(), 1u) << start.what << " did not start";
        CloseBashSessionRequest close;
        close.session = "closing";
        const auto before = session_teardown_stats();
        co_await runtime.close_session(close);
        const auto after = session_teardown_stats();
        if (method_ == SessionTeardown::cgroup) {
          // The close waited for the cgroup to empty: nothing is left at this moment, and /proc
          // was not walked.
          EXPECT_EQ(after.proc_walks, before.proc_walks);
          EXPECT_EQ(after.cgroup_kills, before.cgroup_kills + 1);
          for (const auto& start : starts)
            EXPECT_TRUE(running(start.needle).empty()) << start.what;
        }
        // The others and what they run are untouched.
        for (int i = 0; i < std::min(others, 3); ++i) {
          auto echo = co_await runtime.run_in_session(in(fmt::format("other{}", i), "echo ok"));
          EXPECT_EQ(echo.output, "ok\n");
        }
        if (others > 0) {
          auto echo =
              co_await runtime.run_in_session(in(fmt::format("other{}", others - 1), "echo last"));
          EXPECT_EQ(echo.output, "last\n");
        }
      }(),
      100s);
  for (const auto& start : starts) {
    if (start.what == "daemon without the environment" && method_ == SessionTeardown::scan)
      continue;  // the scan knows a daemon by the session's tag in its environment
    EXPECT_EQ(wait_gone(start.needle, 5s), std::vector<pid_t>{})
        << start.what << " outlived its session";
  }
  EXPECT_EQ(wait_count(other_needle, std::min<std::size_t>(others, 3), 5s).size(),
            std::min<std::size_t>(others, 3))
      << "a daemon of another session was killed";
  for (pid_t shell : other_shells)
    EXPECT_TRUE(process_running(shell));

  // Closing the runtime ends all the others, side by side.
  run_async(io, runtime.close(), 100s);
  EXPECT_EQ(wait_gone(other_needle, 5s), std::vector<pid_t>{});
  for (pid_t shell : other_shells)
    EXPECT_FALSE(process_running(shell));
  // What the scan could not see (documented) is ended here.
  for (pid_t pid : running(fmt::format("sleep 75{}", digits)))
    ::kill(pid, SIGKILL);
}

TEST_F(SessionTeardownTest, ConcurrentClosesShareTheWork) {
  asio::io_context io;
  LocalRuntime runtime(io.get_executor());
  constexpr int kSessions = 50;
  const std::string needle = fmt::format("sleep 77{}", unique_digits());
  run_async(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < kSessions; ++i) {
          CreateBashSessionRequest req;
          req.session = fmt::format("s{}", i);
          co_await runtime.create_session(req);
          co_await runtime.run_in_session(in(req.session, "setsid " + needle + " &"));
        }
      }(),
      120s);
  EXPECT_EQ(wait_count(needle, kSessions, 5s).size(), static_cast<std::size_t>(kSessions));
  const auto before = session_teardown_stats();
  run_async(io, runtime.close(), 120s);
  const auto after = session_teardown_stats();
  if (method_ == SessionTeardown::cgroup) {
    EXPECT_EQ(after.proc_walks, before.proc_walks);
    EXPECT_EQ(after.cgroup_kills, before.cgroup_kills + kSessions);
    EXPECT_TRUE(running(needle).empty());
  } else {
    // One walk serves every close waiting for it: far fewer than two per session.
    EXPECT_GT(after.proc_walks, before.proc_walks);
    EXPECT_LE(after.proc_walks - before.proc_walks, 20u);
  }
  EXPECT_EQ(wait_gone(needle, 5s), std::vector<pid_t>{});
}

TEST_F(SessionTeardownTest, DestroyingAnUnclosedSessionEndsItsDaemons) {
  const std::string needle = fmt::format("sleep 78{}", unique_digits());
  {
    asio::io_context io;
    LocalRuntime runtime(io.get_executor());
    run_async(
        io,
        [&]() -> asio::awaitable<void> {
          CreateBashSessionRequest req;
          co_await runtime.create_session(req);
          co_await runtime.run_in_session(in("default", "setsid " + needle + " &"));
        }(),
        30s);
    EXPECT_EQ(wait_count(needle, 1, 5s).size(), 1u);
  }  // no close: the destructor's last resort
  EXPECT_EQ(wait_gone(needle, 5s), std::vector<pid_t>{});
}

// The cgroup2 directory of process `pid` (empty when there is none to be found).
std::string cgroup_dir_of(pid_t pid) {
  std::ifstream cgroup(fmt::format("/proc/{}/cgroup", pid));
  std::string line, path;
  while (std::getline(cgroup, line)) {
    if (line.starts_with("0::"))
      path = line.substr(3);
  }
  std::ifstream mountinfo("/proc/self/mountinfo");
  while (std::getline(mountinfo, line)) {
    const auto dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos)
      continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, dev, root, mount;
    fields >> id >> parent >> dev >> root >> mount;
    if (root == "/")
      return mount + path;
  }
  return {};
}

TEST_F(SessionTeardownTest, ProcessesInCgroupsASessionMadeEndWithIt) {
  if (method_ != SessionTeardown::cgroup)
    GTEST_SKIP() << "sessions are not cgroups here: " << describe_session_teardown();
  asio::io_context io;
  LocalRuntime runtime(io.get_executor());
  const std::string needle = fmt::format("sleep 79{}", unique_digits());
  std::string inner;
  run_async(
      io,
      [&]() -> asio::awaitable<void> {
        CreateBashSessionRequest req;
        co_await runtime.create_session(req);
        auto shell = co_await runtime.run_in_session(in("default", "echo $$"));
        const std::string dir = cgroup_dir_of(std::stoi(shell.output));
        EXPECT_NE(dir.find("/rex-"), std::string::npos) << dir;
        // What a nested container runtime or rex would do: a cgroup below the session's, and a
        // process moved into it (then it is not in the session cgroup's own cgroup.procs).
        inner = dir + "/inner";
        EXPECT_EQ(::mkdir(inner.c_str(), 0755), 0) << inner;
        auto job = co_await runtime.run_in_session(in("default", needle + " >/dev/null & echo $!"));
        const auto last = job.output.find_last_of('\n', job.output.size() - 2);
        const std::string pid = job.output.substr(last == std::string::npos ? 0 : last + 1);
        std::ofstream(inner + "/cgroup.procs") << std::stoi(pid) << "\n";
        EXPECT_EQ(cgroup_dir_of(std::stoi(pid)), inner);
        CloseBashSessionRequest close;
        co_await runtime.close_session(close);
        // The close waited for the whole subtree to empty.
        EXPECT_TRUE(running(needle).empty());
      }(),
      30s);
  EXPECT_EQ(wait_gone(needle, 5s), std::vector<pid_t>{});
  // The session's cgroups are removed, the inner one too, soon after the close.
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::filesystem::exists(inner) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(std::filesystem::exists(inner));
}

TEST(SessionTeardownMethod, IsDescribed) {
  const std::string text = describe_session_teardown();
  if (session_teardown() == SessionTeardown::cgroup)
    EXPECT_NE(text.find("cgroup per session in "), std::string::npos) << text;
  else
    EXPECT_NE(text.find("scan of /proc ("), std::string::npos) << text;
  const char* asked = std::getenv("REX_SESSION_TEARDOWN");
  if (asked && std::string_view(asked) == "scan") {
    EXPECT_EQ(session_teardown(), SessionTeardown::scan);
  }
}

}  // namespace
}  // namespace rex
