// Output cleaning of the session layer: terminal escapes stripped, newlines normalised, invalid
// UTF-8 escaped, with plain inputs.
#include <rex/session/output.hpp>

#include <gtest/gtest.h>

namespace rex {
namespace {

TEST(CleanTerminalOutput, StripsEscapesAndNormalisesNewlines) {
  EXPECT_EQ(clean_terminal_output("\x1b[31mred\x1b[0m\r\n"), "red\n");
  EXPECT_EQ(clean_terminal_output("\x1b[?2004hx\x1b[?2004l"), "x");
  EXPECT_EQ(clean_terminal_output("\x1b]0;title\x07text"), "text");
  EXPECT_EQ(clean_terminal_output("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), "link");
  EXPECT_EQ(clean_terminal_output("a\x1b(Bb\x1b=c"), "abc");
  EXPECT_EQ(clean_terminal_output("line\r\x1b[K\n"), "line\n");
  EXPECT_EQ(clean_terminal_output("crcrlf\r\r\n"), "crcrlf\n");
  EXPECT_EQ(clean_terminal_output("progress\rdone\n"), "progress\rdone\n");
  EXPECT_EQ(clean_terminal_output("bad\xfe"), "bad\\xfe");
  EXPECT_EQ(clean_terminal_output("unterminated \x1b]0;title"), "unterminated ]0;title");
  EXPECT_EQ(clean_terminal_output(""), "");
}

}  // namespace
}  // namespace rex
