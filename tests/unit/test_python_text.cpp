// Python-compatible text rules: repr quoting and UTF-8 with backslash escapes, as Python writes
// them.
#include <rex/protocol/python_text.hpp>

#include <gtest/gtest.h>

namespace rex {
namespace {

TEST(Utf8BackslashReplace, KeepsValidAndEscapesInvalidBytes) {
  EXPECT_EQ(utf8_backslashreplace("plain"), "plain");
  EXPECT_EQ(utf8_backslashreplace("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(utf8_backslashreplace("a\xff"
                                  "b"),
            "a\\xffb");
  EXPECT_EQ(utf8_backslashreplace("\xe2\x82"), "\\xe2\\x82");           // truncated sequence
  EXPECT_EQ(utf8_backslashreplace("\xc0\xaf"), "\\xc0\\xaf");           // overlong
  EXPECT_EQ(utf8_backslashreplace("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
  EXPECT_EQ(utf8_backslashreplace("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
}

TEST(PythonRepr, QuotesLikePython) {
  EXPECT_EQ(python_repr("abc"), "'abc'");
  EXPECT_EQ(python_repr("it's"), "\"it's\"");
  EXPECT_EQ(python_repr("'\""), "'\\'\"'");
  EXPECT_EQ(python_repr("a\nb\t\\"), "'a\\nb\\t\\\\'");
  EXPECT_EQ(python_repr("\x01"), "'\\x01'");
}

}  // namespace
}  // namespace rex
