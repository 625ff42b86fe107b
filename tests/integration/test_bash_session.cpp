// BashSession against real bash in a real pty: the framing, prompt detection and lifecycle.
// The behaviour suite that every runtime must pass is test_runtime_conformance.cpp.
#include <rex/protocol/exceptions.hpp>
#include <rex/session/bash_session.hpp>

#include <gtest/gtest.h>
#include <signal.h>

#include "support/async_test.hpp"

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
