#include <rex/core/text.hpp>

#include <gtest/gtest.h>

namespace rex {
namespace {

using namespace std::chrono_literals;

TEST(Text, SecondsText) {
  EXPECT_EQ(seconds_text(2500ms), "2.5 s");
  EXPECT_EQ(seconds_text(1ms), "0.001 s");
  EXPECT_EQ(seconds_text(std::chrono::seconds(30)), "30 s");
  EXPECT_EQ(seconds_text(std::chrono::steady_clock::duration(0)), "0 s");
}

TEST(Text, ShellQuote) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
}

}  // namespace
}  // namespace rex
