// BashSession against real bash in a real pty: the framing, prompt detection and lifecycle.
// The behaviour suite that every runtime must pass is test_runtime_conformance.cpp.
#include <rex/protocol/exceptions.hpp>
#include <rex/session/bash_session.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <functional>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

using test::run_async;

BashAction cmd(std::string command) {
  BashAction a;
  a.command = std::move(command);
  return a;
}

TEST(BashSession, StartsRunsAndCloses) {
  asio::io_context io;
  BashSession session(io.get_executor());
  run_async(io, [&]() -> asio::awaitable<void> {
    CreateBashSessionRequest req;
    co_await session.start(req);
    EXPECT_TRUE(session.alive());
    auto obs = co_await session.run(cmd("echo hi"));
    EXPECT_EQ(obs.output, "hi\n");
    EXPECT_EQ(obs.exit_code, 0);
    co_await session.close();
    EXPECT_FALSE(session.alive());
  }());
}

TEST(BashSession, SingleLineSyntaxErrorRunsNothing) {
  asio::io_context io;
  BashSession session(io.get_executor());
  run_async(io, [&]() -> asio::awaitable<void> {
    CreateBashSessionRequest req;
    co_await session.start(req);
    REX_CO_EXPECT_THROW(co_await session.run(cmd("touch /tmp/rex-should-not-exist; echo )")),
                        BashIncorrectSyntaxError);
    auto obs = co_await session.run(cmd("test -e /tmp/rex-should-not-exist; echo $?"));
    EXPECT_EQ(obs.output, "1\n");
    co_await session.close();
  }());
}

// Plain one-line commands reach bash as they are, other text through eval (ShellFraming); the
// two must agree on state, $? and syntax errors.
class BashSessionFraming : public ::testing::Test {
 protected:
  void run(std::function<asio::awaitable<void>(BashSession&)> body) {
    BashSession session(io_.get_executor());
    run_async(io_,
              [](BashSession& s,
                 std::function<asio::awaitable<void>(BashSession&)> b) -> asio::awaitable<void> {
                CreateBashSessionRequest req;
                co_await s.start(req);
                co_await b(s);
                co_await s.close();
              }(session, std::move(body)));
  }
  static asio::awaitable<std::string> out(BashSession& s, std::string command) {
    BashAction a = cmd(std::move(command));
    a.check = "silent";
    co_return (co_await s.run(a)).output;
  }
  asio::io_context io_;
};

TEST_F(BashSessionFraming, BothDeliveriesShareStateAndStatus) {
  run([](BashSession& s) -> asio::awaitable<void> {
    EXPECT_EQ(co_await out(s, "x=5; (exit 3)"), "");
    EXPECT_EQ(co_await out(s, "echo $? $x"), "3 5\n");
    co_await out(s, "false");
    EXPECT_EQ(co_await out(s, "echo $?\necho $x"), "1\n5\n");  // several lines: eval
    co_await out(s, "(exit 4)");
    EXPECT_EQ(co_await out(s, "echo $? &>/dev/null; echo $?"), "0\n");
    EXPECT_EQ(co_await out(s, "echo a # a comment; echo b"), "a\n");
    EXPECT_EQ(co_await out(s, "echo $_"), "a\n");
  });
}

TEST_F(BashSessionFraming, IncompleteOneLineTextRunsNothing) {
  const std::string marker = "/tmp/rex-incomplete-" + std::to_string(::getpid());
  run([&](BashSession& s) -> asio::awaitable<void> {
    co_await out(s, "true");
    const std::vector<std::string> incomplete = {
        "touch " + marker + "; echo 'abc",
        "touch " + marker + "; if true; then",
        "touch " + marker + " |",
        "touch " + marker + "; echo $(date",
    };
    for (const auto& text : incomplete) {
      REX_CO_EXPECT_THROW(co_await s.run(cmd(text)), BashIncorrectSyntaxError);
      EXPECT_EQ(co_await out(s, "echo ok; ls " + marker + " 2>/dev/null"), "ok\n") << text;
    }
    // A heredoc that ends with the text runs, with bash's warning, as with eval.
    BashAction heredoc = cmd("echo before; cat <<EOF");
    auto obs = co_await s.run(heredoc);
    EXPECT_EQ(obs.exit_code, 0);
    EXPECT_THAT(obs.output, ::testing::HasSubstr("before\n"));
    EXPECT_EQ(co_await out(s, "echo after"), "after\n");
  });
}

TEST_F(BashSessionFraming, EvalThatCannotParseItsTextKeepsTheCount) {
  // Bash reprints an old prompt after `eval` of text that ends inside a quote.
  run([](BashSession& s) -> asio::awaitable<void> {
    auto text = co_await out(s, "eval 'echo \"x'; echo after");
    EXPECT_THAT(text, ::testing::EndsWith("after\n"));
    REX_CO_EXPECT_THROW(co_await s.run(cmd("echo )")), BashIncorrectSyntaxError);
    EXPECT_THAT(co_await out(s, "eval 'echo \"x'; (exit 6)"),
                ::testing::StartsWith("bash: unexpected EOF while looking for matching"));
    EXPECT_EQ(co_await out(s, "echo $?"), "6\n");
  });
}

TEST_F(BashSessionFraming, FunctionsAndAliasesThatChangeThePrompt) {
  run([](BashSession& s) -> asio::awaitable<void> {
    co_await out(s, "custom() { PS1='custom> '; PS0='pre '; PS2='more> '; }");
    co_await out(s, "custom");
    EXPECT_EQ(co_await out(s, "echo clean"), "clean\n");
    EXPECT_EQ(co_await out(s, "echo 'two\nlines'"), "two\nlines\n");
    co_await out(s, "noisy() { PROMPT_COMMAND='echo noise'; }");
    co_await out(s, "noisy");  // its own output may end with one "noise"
    EXPECT_EQ(co_await out(s, "echo quiet"), "quiet\n");
    co_await out(s, "alias venv='PS1=\"(venv) $PS1\"'");
    EXPECT_EQ(co_await out(s, "venv"), "");
    EXPECT_EQ(co_await out(s, "echo after"), "after\n");
    co_await out(s, "alias hello='echo hi'");
    EXPECT_EQ(co_await out(s, "hello there"), "hi there\n");
    REX_CO_EXPECT_THROW(co_await s.run(cmd("echo )")), BashIncorrectSyntaxError);
    EXPECT_EQ(co_await out(s, "echo fine"), "fine\n");
  });
}

TEST_F(BashSessionFraming, JobsStartedByFunctionsAreNotAnnouncedLater) {
  run([](BashSession& s) -> asio::awaitable<void> {
    co_await out(s, "later() { sleep 0.05 & }");
    co_await out(s, "later");
    // The job ends while the shell is idle: bash's notice is not the next command's output.
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(300));
    co_await t.async_wait(asio::use_awaitable);
    EXPECT_EQ(co_await out(s, "echo next"), "next\n");
    EXPECT_EQ(co_await out(s, "echo again"), "again\n");
  });
}

TEST_F(BashSessionFraming, LongRunningJobsDoNotLeakNotices) {
  run([](BashSession& s) -> asio::awaitable<void> {
    auto pause = [](std::chrono::milliseconds d) -> asio::awaitable<void> {
      asio::steady_timer t(co_await asio::this_coro::executor, d);
      co_await t.async_wait(asio::use_awaitable);
    };
    co_await out(s, "sleep 30 &");
    for (int i = 0; i < 3; ++i) {
      co_await out(s, "sleep 0.05 &");
      co_await pause(std::chrono::milliseconds(200));  // it ends while the shell is idle
      EXPECT_EQ(co_await out(s, "echo next $?"), "next 0\n");
      EXPECT_EQ(co_await out(s, "(exit 2)"), "");
      EXPECT_EQ(co_await out(s, "echo $?"), "2\n");
    }
    co_await out(s, "kill %1; wait");
    EXPECT_EQ(co_await out(s, "echo no jobs"), "no jobs\n");
    EXPECT_EQ(co_await out(s, "jobs; echo none"), "none\n");
  });
}

TEST_F(BashSessionFraming, ErrexitEndsTheShellOnAFailureAsAtATerminal) {
  run([](BashSession& s) -> asio::awaitable<void> {
    co_await out(s, "set -e");
    EXPECT_EQ(co_await out(s, "echo still here"), "still here\n");
    REX_CO_EXPECT_THROW(co_await s.run(cmd("false")), SessionDiedError);
    EXPECT_FALSE(s.alive());
  });
}

// With rc files or functions inherited from the environment, code rex never saw may change the
// prompt: the guard in PROMPT_COMMAND restores it from the first command on.
TEST(BashSession, RcFilesAndInheritedFunctionsMayChangeThePrompt) {
  const test::TempDir home;
  home.file(".bashrc", "rcprompt() { PS1='rc> '; PROMPT_COMMAND='echo noise'; }\n");
  BashSessionConfig config;
  config.load_rc_files = true;
  config.environment["HOME"] = home.path();
  config.environment["BASH_FUNC_inherited%%"] = "() {  PS1='inherited> '; PS0='pre '; }";
  asio::io_context io;
  BashSession session(io.get_executor(), config);
  run_async(io, [&]() -> asio::awaitable<void> {
    CreateBashSessionRequest req;
    req.startup_timeout = 10.0;
    co_await session.start(req);
    auto out = [&](std::string c) -> asio::awaitable<std::string> {
      co_return (co_await session.run(cmd(std::move(c)))).output;
    };
    EXPECT_EQ(co_await out("inherited"), "");
    EXPECT_EQ(co_await out("echo one"), "one\n");
    co_await out("rcprompt");
    EXPECT_EQ(co_await out("echo two"), "two\n");
    co_await session.close();
  }());
}

TEST(BashSession, KilledShellIsReported) {
  asio::io_context io;
  BashSession session(io.get_executor());
  run_async(io, [&]() -> asio::awaitable<void> {
    CreateBashSessionRequest req;
    co_await session.start(req);
    ::kill(session.pid(), SIGKILL);
    REX_CO_EXPECT_THROW(co_await session.run(cmd("sleep 5")), SessionDiedError);
    EXPECT_FALSE(session.alive());
    REX_CO_EXPECT_THROW(co_await session.run(cmd("echo again")), SessionDiedError);
    co_await session.close();
  }());
}

}  // namespace
}  // namespace rex
