// One-off process execution (`/execute`): real processes, pipes and process groups.
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/process_runner.hpp>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using rex::Command;
using rex::CommandResponse;

CommandResponse run(Command command, std::chrono::seconds deadline = 30s) {
  return rex::test::run_async(rex::run_command(std::move(command)), deadline);
}

Command argv(std::vector<std::string> args) {
  return Command{.command = std::move(args)};
}

Command shell(std::string script) {
  return Command{.command = std::move(script), .shell = true};
}

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.insert(line);
  return lines;
}

using rex::test::open_fd_count;

// Makes this process the reaper of orphaned descendants while it lives, so that processes of a
// killed group are reaped here (by group) instead of lingering as zombies of PID 1.
class AdoptOrphans {
 public:
  AdoptOrphans() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
  ~AdoptOrphans() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
  AdoptOrphans(const AdoptOrphans&) = delete;
  AdoptOrphans& operator=(const AdoptOrphans&) = delete;

  /// True once no process of group `pgid` exists (kill(-pgid, 0) fails with ESRCH), waiting at
  /// most `within` for SIGKILLed processes to finish dying.
  static bool group_gone(pid_t pgid, std::chrono::milliseconds within = 5000ms) {
    const auto until = std::chrono::steady_clock::now() + within;
    while (true) {
      while (::waitpid(-pgid, nullptr, WNOHANG) > 0) {
      }
      if (::kill(-pgid, 0) != 0 && errno == ESRCH)
        return true;
      if (std::chrono::steady_clock::now() > until)
        return false;
      std::this_thread::sleep_for(2ms);
    }
  }
};

using rex::test::TempDir;

// --- Command shapes ---------------------------------------------------------------------------

TEST(RunCommand, ArgvList) {
  const auto r = run(argv({"echo", "hello", "big world"}));
  EXPECT_EQ(r.stdout_, "hello big world\n");
  EXPECT_EQ(r.stderr_, "");
  EXPECT_EQ(r.exit_code, 0);
}

TEST(RunCommand, ShellString) {
  const auto r = run(shell("echo $((1 + 2)); echo oops >&2"));
  EXPECT_EQ(r.stdout_, "3\n");
  EXPECT_EQ(r.stderr_, "oops\n");
  EXPECT_EQ(r.exit_code, 0);
}

TEST(RunCommand, ShellListPassesTheRestAsPositionalArguments) {
  const auto r =
      run(Command{.command = std::vector<std::string>{"echo $0-$1", "a", "b"}, .shell = true});
  EXPECT_EQ(r.stdout_, "a-b\n");
}

TEST(RunCommand, StringWithoutShellIsTheProgramName) {
  EXPECT_EQ(run(Command{.command = "true"}).exit_code, 0);
  EXPECT_THROW_MESSAGE(run(Command{.command = "echo hi"}), rex::FileNotFoundError,
                       "[Errno 2] No such file or directory: 'echo hi'");
}

TEST(RunCommand, EmptyListIsAValueError) {
  EXPECT_THROW(run(argv({})), rex::ValueError);
}

// --- Environment, directory, stdin ------------------------------------------------------------

TEST(RunCommand, EnvReplacesTheWholeEnvironment) {
  ::setenv("REX_TEST_INHERITED", "1", 1);
  auto command = argv({"env"});
  command.env = std::map<std::string, std::string>{{"FOO", "bar baz"}, {"PATH", "/usr/bin:/bin"}};
  EXPECT_EQ(lines_of(run(command).stdout_),
            (std::set<std::string>{"FOO=bar baz", "PATH=/usr/bin:/bin"}));

  auto empty = argv({"/usr/bin/env"});
  empty.env = std::map<std::string, std::string>{};
  EXPECT_EQ(run(empty).stdout_, "");

  // Without env the environment is inherited.
  EXPECT_TRUE(lines_of(run(argv({"env"})).stdout_).count("REX_TEST_INHERITED=1"));
  ::unsetenv("REX_TEST_INHERITED");
}

TEST(RunCommand, ProgramIsLookedUpInTheNewPath) {
  auto command = argv({"env"});
  command.env = std::map<std::string, std::string>{{"PATH", "/nonexistent-rex"}};
  EXPECT_THROW_MESSAGE(run(command), rex::FileNotFoundError,
                       "[Errno 2] No such file or directory: 'env'");
}

TEST(RunCommand, Cwd) {
  TempDir dir;
  auto command = argv({"pwd"});
  command.cwd = dir.path();
  EXPECT_EQ(run(command).stdout_, dir.path() + "\n");

  // A relative program path is relative to the new working directory, as in Python.
  dir.file("hello.sh", "#!/bin/sh\necho from script\n", 0755);
  auto script = argv({"./hello.sh"});
  script.cwd = dir.path();
  EXPECT_EQ(run(script).stdout_, "from script\n");
}

TEST(RunCommand, StdinIsDevNull) {
  const auto started = std::chrono::steady_clock::now();
  const auto r = run(argv({"cat"}), 10s);
  EXPECT_EQ(r.stdout_, "");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_EQ(run(shell("readlink /proc/self/fd/0")).stdout_, "/dev/null\n");
}

// --- Output -----------------------------------------------------------------------------------

TEST(RunCommand, MergeOutputStreams) {
  auto command = shell("echo out; echo err >&2; echo out2");
  command.merge_output_streams = true;
  const auto r = run(command);
  EXPECT_EQ(r.stdout_, "out\nerr\nout2\n");
  EXPECT_EQ(r.stderr_, "");
}

TEST(RunCommand, MegabytesOnBothStreamsAtOnce) {
  constexpr std::size_t kSize = 8 << 20;
  const auto r = run(shell("yes a | head -c 8388608 & yes b | head -c 8388608 >&2; wait"), 60s);
  ASSERT_EQ(r.stdout_.size(), kSize);
  ASSERT_EQ(r.stderr_.size(), kSize);
  std::string expected_out;
  std::string expected_err;
  for (std::size_t i = 0; i < kSize / 2; ++i) {
    expected_out += "a\n";
    expected_err += "b\n";
  }
  EXPECT_TRUE(r.stdout_ == expected_out);
  EXPECT_TRUE(r.stderr_ == expected_err);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(RunCommand, InvalidUtf8BecomesBackslashEscapes) {
  const auto r = run(argv({"printf", "a\\377b\\300 \\303\\251"}));
  EXPECT_EQ(r.stdout_, "a\\xffb\\xc0 \xC3\xA9");
}

TEST(RunCommand, WaitsForGrandchildrenHoldingTheOutputOpen) {
  const auto r = run(shell("(sleep 0.3; echo late) & echo early"));
  EXPECT_EQ(r.stdout_, "early\nlate\n");
  EXPECT_EQ(r.exit_code, 0);
}

// --- Exit status and check --------------------------------------------------------------------

TEST(RunCommand, ExitCodeAndDeathBySignal) {
  EXPECT_EQ(run(argv({"sh", "-c", "exit 3"})).exit_code, 3);
  EXPECT_EQ(run(argv({"sh", "-c", "kill -9 $$"})).exit_code, -9);
  EXPECT_EQ(run(argv({"sh", "-c", "kill -TERM $$"})).exit_code, -15);
}

TEST(RunCommand, CheckRaisesOnNonZeroExit) {
  auto command = argv({"false"});
  command.check = true;
  try {
    run(command);
    FAIL() << "no exception";
  } catch (const rex::NonZeroExitCodeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "Command ['false'] failed with exit code 1. Stdout:\n''\nStderr:\n''");
    EXPECT_EQ(e.class_path(), "swerex.exceptions.NonZeroExitCodeError");
    EXPECT_EQ(e.extra_info().at("exit_code").as_int64(), 1);
  }

  auto with_message = shell("echo out; echo err >&2; exit 2");
  with_message.check = true;
  with_message.error_msg = "build failed";
  try {
    run(with_message);
    FAIL() << "no exception";
  } catch (const rex::NonZeroExitCodeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "build failed: Command 'echo out; echo err >&2; exit 2' failed with exit code 2. "
              "Stdout:\n'out\\n'\nStderr:\n'err\\n'");
    EXPECT_EQ(e.extra_info().at("stdout").as_string(), "out\n");
    EXPECT_EQ(e.extra_info().at("stderr").as_string(), "err\n");
  }

  auto fine = argv({"true"});
  fine.check = true;
  EXPECT_EQ(run(fine).exit_code, 0);
}

// --- Start failures ---------------------------------------------------------------------------

TEST(RunCommand, ProgramThatCannotStart) {
  EXPECT_THROW_MESSAGE(run(argv({"nosuchprog-rex"})), rex::FileNotFoundError,
                       "[Errno 2] No such file or directory: 'nosuchprog-rex'");
  TempDir dir;
  const std::string not_executable = dir.file("plain.sh", "#!/bin/sh\necho hi\n", 0644);
  EXPECT_THROW_MESSAGE(run(argv({not_executable})), rex::PermissionError,
                       "[Errno 13] Permission denied: '" + not_executable + "'");
  const std::string garbage = dir.file("garbage", "\x01\x02\x03\x04 not a program", 0755);
  EXPECT_THROW_MESSAGE(run(argv({garbage})), rex::OSError,
                       "[Errno 8] Exec format error: '" + garbage + "'");
}

TEST(RunCommand, BadWorkingDirectory) {
  auto missing = argv({"true"});
  missing.cwd = "/nonexistent-rex-cwd";
  EXPECT_THROW_MESSAGE(run(missing), rex::FileNotFoundError,
                       "[Errno 2] No such file or directory: '/nonexistent-rex-cwd'");
  TempDir dir;
  auto file = argv({"true"});
  file.cwd = dir.file("f", "x", 0644);
  EXPECT_THROW_MESSAGE(run(file), rex::NotADirectoryError,
                       "[Errno 20] Not a directory: '" + *file.cwd + "'");
}

// --- Timeouts and cancellation ----------------------------------------------------------------

TEST(RunCommand, TimeoutKillsTheWholeProcessGroup) {
  AdoptOrphans adopt;
  auto command = shell("echo $$; sleep 100 & sleep 100 & wait");
  command.timeout = 0.5;
  const auto started = std::chrono::steady_clock::now();
  try {
    run(command);
    FAIL() << "no timeout";
  } catch (const rex::CommandTimeoutError& e) {
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
    EXPECT_EQ(std::string(e.what()), "Timeout (0.5s) exceeded while running command");
    EXPECT_EQ(e.extra_info().at("timeout").as_double(), 0.5);
    EXPECT_EQ(e.extra_info().at("stderr").as_string(), "");
    const pid_t pgid = std::stoi(std::string(e.extra_info().at("stdout").as_string()));
    ASSERT_GT(pgid, 1);
    EXPECT_TRUE(AdoptOrphans::group_gone(pgid));
  }
}

TEST(RunCommand, TimeoutAlsoCoversGrandchildrenAfterTheChildExited) {
  AdoptOrphans adopt;
  auto command = shell("echo $$; sleep 100 &");
  command.timeout = 0.3;
  try {
    run(command);
    FAIL() << "no timeout";
  } catch (const rex::CommandTimeoutError& e) {
    const pid_t pgid = std::stoi(std::string(e.extra_info().at("stdout").as_string()));
    EXPECT_TRUE(AdoptOrphans::group_gone(pgid));
  }
}

TEST(RunCommand, TimeoutNotReached) {
  auto command = argv({"echo", "fast"});
  command.timeout = 10.0;
  EXPECT_EQ(run(command).stdout_, "fast\n");
}

// Completes once `file` has content, polling: the command writes it when it has started.
asio::awaitable<void> wait_for_file(std::string file) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!fs::exists(file) || fs::file_size(file) == 0) {
    timer.expires_after(5ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

// Runs `command` until `file` appears; returns run_command's exception (null if it finished).
asio::awaitable<std::exception_ptr> run_until_file_appears(Command command, std::string file) {
  const auto executor = co_await asio::this_coro::executor;
  [[maybe_unused]] auto [order, run_error, response, wait_error] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(executor, rex::run_command(std::move(command)), asio::deferred),
          asio::co_spawn(executor, wait_for_file(std::move(file)), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::deferred);
  EXPECT_EQ(order[0], 1u) << "the command finished before it was cancelled";
  EXPECT_FALSE(wait_error);
  co_return run_error;
}

TEST(RunCommand, CancellationKillsTheProcessGroup) {
  AdoptOrphans adopt;
  TempDir dir;
  const std::string pid_file = dir.path() + "/pid";
  auto command = shell("sleep 100 & sleep 100 & echo $$ > " + pid_file + "; wait");
  const auto error = rex::test::run_async(run_until_file_appears(command, pid_file), 20s);
  ASSERT_TRUE(error);
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    EXPECT_EQ(e.code(), asio::error::operation_aborted);
  }
  std::ifstream in(pid_file);
  pid_t pgid = 0;
  in >> pgid;
  ASSERT_GT(pgid, 1);
  EXPECT_TRUE(AdoptOrphans::group_gone(pgid));
}

asio::awaitable<std::pair<CommandResponse, CommandResponse>> run_two(Command a, Command b) {
  using namespace asio::experimental::awaitable_operators;
  auto [first, second] =
      co_await (rex::run_command(std::move(a)) && rex::run_command(std::move(b)));
  co_return std::pair{std::move(first), std::move(second)};
}

TEST(RunCommand, CommandsRunConcurrentlyWithoutBlockingTheExecutor) {
  const auto started = std::chrono::steady_clock::now();
  const auto [a, b] =
      rex::test::run_async(run_two(shell("sleep 0.5; echo a"), shell("sleep 0.5; echo b")), 20s);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 950ms);
  EXPECT_EQ(a.stdout_, "a\n");
  EXPECT_EQ(b.stdout_, "b\n");
}

// --- Resources --------------------------------------------------------------------------------

TEST(RunCommand, NoDescriptorLeaksAndNoUnreapedChildren) {
  const std::size_t before = open_fd_count();
  for (int i = 0; i < 50; ++i) {
    switch (i % 5) {
      case 0:
        EXPECT_EQ(run(argv({"echo", "x"})).stdout_, "x\n");
        break;
      case 1: {
        auto merged = shell("echo x; echo y >&2");
        merged.merge_output_streams = true;
        EXPECT_EQ(run(merged).stdout_, "x\ny\n");
        break;
      }
      case 2:
        EXPECT_THROW(run(argv({"nosuchprog-rex"})), rex::FileNotFoundError);
        break;
      case 3: {
        auto failing = argv({"false"});
        failing.check = true;
        EXPECT_THROW(run(failing), rex::NonZeroExitCodeError);
        break;
      }
      default: {
        auto slow = argv({"sleep", "5"});
        slow.timeout = 0.02;
        EXPECT_THROW(run(slow), rex::CommandTimeoutError);
        break;
      }
    }
  }
  EXPECT_EQ(open_fd_count(), before);
  // Every child was reaped: no zombie is waiting (peeked at without reaping it).
  siginfo_t info{};
  ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
  EXPECT_EQ(info.si_pid, 0) << "an exited child was not reaped";
}

}  // namespace
