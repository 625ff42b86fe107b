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

TEST(Text, HexAndLowercase) {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(hex_of(bytes, 4), "000fa5ff");
  EXPECT_EQ(hex_of(bytes, 0), "");
  EXPECT_EQ(ascii_lower("SIGTerm .YAML"), "sigterm .yaml");
  EXPECT_EQ(ascii_lower("\xc3\x89t\xc3\xa9"), "\xc3\x89t\xc3\xa9");  // only ASCII letters change
}

TEST(Text, Base64RoundTripsEveryLengthAndByte) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode(std::string_view("\xff\xfe\x00", 3)), "//4A");
  std::string bytes;
  for (int i = 0; i < 256; ++i)
    bytes.push_back(static_cast<char>(i));
  for (std::size_t n = 0; n <= bytes.size(); n += 37) {
    const auto decoded = base64_decode(base64_encode(bytes.substr(0, n)));
    EXPECT_EQ(decoded.error, "");
    EXPECT_EQ(decoded.bytes, bytes.substr(0, n));
  }
}

TEST(Text, Base64DecodingSaysWhatIsWrong) {
  EXPECT_EQ(base64_decode("Zm9v\nYmFy").bytes, "foobar");  // whitespace is skipped
  EXPECT_EQ(base64_decode("Zm8").bytes, "fo");             // padding is optional
  EXPECT_EQ(base64_decode("Zm9v!").error, "not valid base64");
  EXPECT_EQ(base64_decode("Zg==Zg").error, "data after base64 padding");
  EXPECT_EQ(base64_decode("Z").error, "truncated base64");
}

}  // namespace
}  // namespace rex
