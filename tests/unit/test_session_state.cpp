// The texts of a session's state capture and restore, and the moving of a state's paths to a
// sandbox that works elsewhere. (The capture and restore themselves run in real shells: the
// runtime conformance suite's SessionStateCarriesToANewSession.)
#include <rex/session/session_state.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rex {
namespace {

using ::testing::HasSubstr;

TEST(SessionState, CommandsNameTheirFileQuoted) {
  EXPECT_THAT(capture_state_command("/tmp/rex-state-a b"), HasSubstr("> '/tmp/rex-state-a b'"));
  EXPECT_THAT(capture_state_command("/tmp/x"), HasSubstr("builtin unset -f __rex_capture"));
  EXPECT_EQ(restore_state_command("/tmp/it's"), "builtin source '/tmp/it'\\''s'");
}

TEST(SessionState, TheCwdIsTheFirstLine) {
  EXPECT_EQ(captured_cwd("#rex-cwd /srv/repo\ndeclare -- X=\"1\"\n"), "/srv/repo");
  EXPECT_EQ(captured_cwd("#rex-cwd /a b/c"), "/a b/c");
  EXPECT_EQ(captured_cwd("declare -- X=\"1\"\n"), "");
}

TEST(SessionState, PathsMoveWhereTheDirectoryStandsWhole) {
  const std::string state =
      "#rex-cwd /s/w1/repo\n"
      "declare -x VIRTUAL_ENV=\"/s/w1/repo/venv\"\n"
      "declare -x PATH=\"/s/w1/repo/venv/bin:/usr/bin\"\n"
      "declare -- OTHER=\"/s/w10/x /s/w1\"\n"
      "builtin cd -- /s/w1/repo || builtin echo x\n";
  EXPECT_EQ(moved_paths(state, "/s/w1", "/s/w2"),
            "#rex-cwd /s/w2/repo\n"
            "declare -x VIRTUAL_ENV=\"/s/w2/repo/venv\"\n"
            "declare -x PATH=\"/s/w2/repo/venv/bin:/usr/bin\"\n"
            "declare -- OTHER=\"/s/w10/x /s/w2\"\n"
            "builtin cd -- /s/w2/repo || builtin echo x\n");
  EXPECT_EQ(moved_paths("/s/w1", "/s/w1", "/t"), "/t");
  EXPECT_EQ(moved_paths("/s/w1", "", "/t"), "/s/w1");
  EXPECT_EQ(moved_paths("/s/w1x", "/s/w1", "/t"), "/s/w1x");
}

}  // namespace
}  // namespace rex
