// Server-Sent Events: the encoder's bytes, the parser over every split of a stream, line ends
// (LF, CRLF, CR, a CRLF cut between pieces), multi-line data, comments, ids and events that
// never end.
#include <rex/http/sse.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace {

using rex::http::encode_sse_event;
using rex::http::SseEvent;
using rex::http::SseParser;

std::vector<SseEvent> parse_whole(std::string_view stream) {
  SseParser parser;
  std::vector<SseEvent> out;
  parser.feed(stream, out);
  return out;
}

// The stream fed one byte at a time, and cut in two at every position: each reading gives the
// same events as the whole.
void expect_every_split_reads(std::string_view stream, const std::vector<SseEvent>& expected) {
  EXPECT_EQ(parse_whole(stream), expected);
  {
    SseParser parser;
    std::vector<SseEvent> out;
    for (const char c : stream)
      parser.feed(std::string_view(&c, 1), out);
    EXPECT_EQ(out, expected) << "byte by byte";
  }
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser parser;
    std::vector<SseEvent> out;
    parser.feed(stream.substr(0, cut), out);
    parser.feed(stream.substr(cut), out);
    EXPECT_EQ(out, expected) << "cut at " << cut;
  }
}

SseEvent event(std::string name, std::string data, std::string id = "") {
  return SseEvent{.event = std::move(name), .data = std::move(data), .id = std::move(id)};
}

TEST(EncodeSseEvent, WritesNameDataAndTheBlankLine) {
  EXPECT_EQ(encode_sse_event("output", R"({"output":"hi\n"})"),
            "event: output\ndata: {\"output\":\"hi\\n\"}\n\n");
}

TEST(EncodeSseEvent, GivesEachLineOfTheDataItsOwnDataField) {
  EXPECT_EQ(encode_sse_event("x", "a\nb\r\nc\rd"),
            "event: x\ndata: a\ndata: b\ndata: c\ndata: d\n\n");
  EXPECT_EQ(encode_sse_event("x", ""), "event: x\ndata: \n\n");
  EXPECT_EQ(encode_sse_event("x", "a\n"), "event: x\ndata: a\ndata: \n\n");
}

TEST(EncodeSseEvent, RoundTripsThroughTheParser) {
  for (const std::string data : {"", "one", "two\nlines", "crlf\r\nlines", "trailing\n",
                                 "\n\nblank lines\n\n", " leading space", ":colon"}) {
    EXPECT_EQ(parse_whole(encode_sse_event("name", data)),
              std::vector<SseEvent>{event("name", data == "crlf\r\nlines" ? "crlf\nlines" : data)})
        << data;
  }
}

TEST(SseParser, ReadsEventsSplitAnywhere) {
  const std::string stream = encode_sse_event("output", R"({"output":"a"})") +
                             encode_sse_event("output", R"({"output":"b"})") +
                             encode_sse_event("observation", R"({"exit_code":0})");
  expect_every_split_reads(
      stream, {event("output", R"({"output":"a"})"), event("output", R"({"output":"b"})"),
               event("observation", R"({"exit_code":0})")});
}

TEST(SseParser, AcceptsCrlfLfAndCrLineEnds) {
  const std::vector<SseEvent> expected{event("a", "1"), event("b", "2"), event("c", "3")};
  expect_every_split_reads("event: a\r\ndata: 1\r\n\r\nevent: b\ndata: 2\n\nevent: c\rdata: 3\r\r",
                           expected);
}

TEST(SseParser, JoinsDataLinesWithNewlines) {
  expect_every_split_reads("data: first\ndata:second\ndata\ndata:  two spaces\n\n",
                           {event("message", "first\nsecond\n\n two spaces")});
}

TEST(SseParser, SkipsCommentsAndUnknownFields) {
  expect_every_split_reads(": keep-alive\n\nretry: 100\nfoo: bar\n:c\ndata: x\n\n",
                           {event("message", "x")});
}

TEST(SseParser, DeliversNoEventWithoutData) {
  expect_every_split_reads("event: lonely\n\nevent: named\ndata: d\n\n", {event("named", "d")});
}

TEST(SseParser, DefaultsTheNameToMessage) {
  expect_every_split_reads("event:\ndata: d\n\ndata: e\n\n",
                           {event("message", "d"), event("message", "e")});
}

TEST(SseParser, KeepsTheLastIdAcrossEvents) {
  expect_every_split_reads(
      "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
      {event("message", "a", "7"), event("message", "b", "7"), event("message", "c", "")});
}

TEST(SseParser, HoldsAnUnfinishedEventUntilItsBlankLine) {
  SseParser parser;
  std::vector<SseEvent> out;
  parser.feed("event: output\ndata: {}\n", out);
  EXPECT_TRUE(out.empty());
  parser.feed("\n", out);
  EXPECT_EQ(out, std::vector<SseEvent>{event("output", "{}")});
}

TEST(SseParser, KeepsLongLinesWhole) {
  const std::string data(100000, 'x');
  SseParser parser;
  std::vector<SseEvent> out;
  const std::string stream = encode_sse_event("big", data);
  for (std::size_t i = 0; i < stream.size(); i += 4096)
    parser.feed(std::string_view(stream).substr(i, 4096), out);
  EXPECT_EQ(out, std::vector<SseEvent>{event("big", data)});
}

}  // namespace
