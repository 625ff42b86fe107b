// multipart/form-data: the boundary of a Content-Type, the streaming parser (every chunk size,
// bodies as Python clients send them, boundary look-alikes in the data, every malformed case,
// bounded memory) and the body writer, parsed back.
#include <rex/http/multipart.hpp>
#include <rex/protocol/exceptions.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "support/test_helpers.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using rex::http::multipart_boundary;
using rex::http::MultipartError;
using rex::http::MultipartParser;
using rex::http::MultipartPartHeaders;

// --- multipart_boundary --------------------------------------------------------------------------

TEST(MultipartBoundary, TokenAndQuotedForms) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(multipart_boundary("multipart/form-data;boundary=\"a b:c\""), "a b:c");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data; BOUNDARY=XyZ"), "XyZ");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=utf-8; boundary=\"q\" "), "q");
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxk"),
            "----WebKitFormBoundary7MA4YWxk");
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=" + std::string(70, 'b')),
            std::string(70, 'b'));
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"'()+_,-./:=?\""), "'()+_,-./:=?");
}

TEST(MultipartBoundary, AnythingElseIsNone) {
  EXPECT_EQ(multipart_boundary("application/json"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/mixed; boundary=abc"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary="), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"\""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'b')),
            std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"a@b\""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"ab \""), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"abc"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=a; boundary=b"), std::nullopt);
  EXPECT_EQ(multipart_boundary("multipart/form-data; =x; boundary=a"), std::nullopt);
  EXPECT_EQ(multipart_boundary(""), std::nullopt);
}

// --- Parsing helpers
// -------------------------------------------------------------------------------

struct Part {
  MultipartPartHeaders headers;
  std::string data;
  bool ended = false;
};

struct Parsed {
  std::vector<Part> parts;
  bool done = false;
  std::size_t max_buffered = 0;
  std::optional<std::string> error;  // the MultipartError's message
};

MultipartParser::Handlers collect(Parsed& out) {
  return {
      .on_part_begin =
          [&out](const MultipartPartHeaders& h) {
            out.parts.push_back({h, {}, false});
          },
      .on_part_data =
          [&out](std::string_view data) {
            EXPECT_FALSE(data.empty());
            ASSERT_FALSE(out.parts.empty());
            EXPECT_FALSE(out.parts.back().ended);
            out.parts.back().data.append(data);
          },
      .on_part_end =
          [&out] {
            ASSERT_FALSE(out.parts.empty());
            out.parts.back().ended = true;
          },
  };
}

// Parses `body` fed in chunks of `chunk` bytes, then finish().
Parsed parse(std::string_view body, const std::string& boundary, std::size_t chunk,
             std::size_t max_header_bytes = 16 * 1024) {
  Parsed out;
  try {
    MultipartParser parser(boundary, collect(out), max_header_bytes);
    for (std::size_t i = 0; i < body.size(); i += chunk) {
      parser.feed(body.substr(i, chunk));
      out.max_buffered = std::max(out.max_buffered, parser.buffered_bytes());
    }
    parser.finish();
    out.done = parser.done();
  } catch (const MultipartError& e) {
    out.error = e.what();
  }
  return out;
}

// Parses `body` with every chunk size from 1 to 64 and a few large ones; all must agree.
Parsed parse_every_way(std::string_view body, const std::string& boundary) {
  const Parsed whole = parse(body, boundary, body.size() + 1);
  std::vector<std::size_t> sizes;
  for (std::size_t n = 1; n <= 64; ++n)
    sizes.push_back(n);
  for (std::size_t n : {100, 1000, 4096, 65536})
    sizes.push_back(n);
  for (const std::size_t n : sizes) {
    const Parsed p = parse(body, boundary, n);
    EXPECT_EQ(p.error, whole.error) << "chunk size " << n;
    EXPECT_EQ(p.done, whole.done) << "chunk size " << n;
    EXPECT_LE(p.max_buffered, boundary.size() + 4 + 16 * 1024) << "chunk size " << n;
    EXPECT_EQ(p.parts.size(), whole.parts.size()) << "chunk size " << n;
    for (std::size_t i = 0; i < std::min(p.parts.size(), whole.parts.size()); ++i) {
      EXPECT_EQ(p.parts[i].headers.name, whole.parts[i].headers.name) << n;
      EXPECT_EQ(p.parts[i].headers.filename, whole.parts[i].headers.filename) << n;
      EXPECT_EQ(p.parts[i].headers.content_type, whole.parts[i].headers.content_type) << n;
      EXPECT_EQ(p.parts[i].data, whole.parts[i].data) << "chunk size " << n << ", part " << i;
      EXPECT_EQ(p.parts[i].ended, whole.parts[i].ended) << n;
    }
  }
  return whole;
}

// Expects a MultipartError whose message contains `words`, for every chunk size.
void expect_malformed(std::string_view body, const std::string& boundary, std::string_view words,
                      std::size_t max_header_bytes = 16 * 1024) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{7}, body.size() + 1}) {
    const Parsed p = parse(body, boundary, n, max_header_bytes);
    ASSERT_TRUE(p.error.has_value()) << "accepted with chunk size " << n << ": " << body;
    EXPECT_NE(p.error->find(words), std::string::npos) << *p.error;
    EXPECT_EQ(p.error->rfind("malformed multipart body: ", 0), 0u) << *p.error;
  }
}

std::string binary_data(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string data(size, '\0');
  // Dense in CR, LF, '-' and NUL so that boundary look-alikes abound.
  const char alphabet[] = {'\r', '\n', '-', '\0', 'x', 'B', '\xff'};
  for (auto& c : data)
    c = alphabet[rng() % sizeof alphabet];
  return data;
}

// --- Bodies as Python's clients send them -------------------------------------------------------

TEST(MultipartParser, BodyAsAiohttpFormDataSendsIt) {
  // aiohttp: uuid4 hex boundary, Content-Type before Content-Disposition, filename* too.
  const std::string b = "5d2a0c3f9e8b4a1d8c7b6a5f4e3d2c1b";
  const std::string body = "--" + b +
                           "\r\n"
                           "Content-Type: application/zip\r\n"
                           "Content-Disposition: form-data; name=\"file\"; filename=\"repo.zip\"; "
                           "filename*=utf-8''repo.zip\r\n"
                           "\r\n"
                           "PK\x03\x04\x00\r\n--zip--\r\n"s
                           "\r\n--" +
                           b +
                           "\r\n"
                           "Content-Type: text/plain; charset=utf-8\r\n"
                           "Content-Disposition: form-data; name=\"target_path\"\r\n"
                           "\r\n"
                           "/root/repo\r\n--" +
                           b +
                           "\r\n"
                           "Content-Type: text/plain; charset=utf-8\r\n"
                           "Content-Disposition: form-data; name=\"unzip\"\r\n"
                           "\r\n"
                           "true\r\n--" +
                           b + "--\r\n";
  const Parsed p = parse_every_way(body, b);
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_TRUE(p.done);
  ASSERT_EQ(p.parts.size(), 3u);
  EXPECT_EQ(p.parts[0].headers.name, "file");
  EXPECT_EQ(p.parts[0].headers.filename, "repo.zip");
  EXPECT_EQ(p.parts[0].headers.content_type, "application/zip");
  EXPECT_EQ(p.parts[0].data, "PK\x03\x04\x00\r\n--zip--\r\n"s);
  EXPECT_EQ(p.parts[1].headers.name, "target_path");
  EXPECT_EQ(p.parts[1].headers.filename, std::nullopt);
  EXPECT_EQ(p.parts[1].headers.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(p.parts[1].data, "/root/repo");
  EXPECT_EQ(p.parts[2].data, "true");
  for (const auto& part : p.parts)
    EXPECT_TRUE(part.ended);
}

TEST(MultipartParser, BodyAsRequestsSendsIt) {
  const std::string b = "b7c1a6e0f3d24c9a8e5f1a2b3c4d5e6f";
  const std::string body =
      "--" + b +
      "\r\nContent-Disposition: form-data; name=\"target_path\"\r\n\r\n"
      "/tmp/x\r\n--" +
      b +
      "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n"
      "\x00\x01\r\r\n\n\r\n--"s +
      b + "--\r\n";
  const Parsed p = parse_every_way(body, b);
  ASSERT_FALSE(p.error) << *p.error;
  ASSERT_EQ(p.parts.size(), 2u);
  EXPECT_EQ(p.parts[0].headers.content_type, "text/plain");  // the default
  EXPECT_EQ(p.parts[0].data, "/tmp/x");
  EXPECT_EQ(p.parts[1].headers.filename, "a.bin");
  EXPECT_EQ(p.parts[1].data, std::string("\x00\x01\r\r\n\n", 6));
}

TEST(MultipartParser, PreambleAndEpilogueAreIgnored) {
  const std::string body =
      "This is the preamble.\r\n--xx in it is not a boundary\r\n--XX\r\n"
      "Content-Disposition: form-data; name=a\r\n\r\nvalue\r\n--XX--\r\nepilogue\r\n--XX\r\njunk";
  const Parsed p = parse_every_way(body, "XX");
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_TRUE(p.done);
  ASSERT_EQ(p.parts.size(), 1u);
  EXPECT_EQ(p.parts[0].data, "value");
  // A body opening with a CRLF before its first boundary.
  const Parsed q = parse_every_way(
      "\r\n--XX\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XX--", "XX");
  ASSERT_FALSE(q.error) << *q.error;
  ASSERT_EQ(q.parts.size(), 1u);
  EXPECT_EQ(q.parts[0].data, "v");
}

TEST(MultipartParser, EmptyPartsInBothForms) {
  // With the blank line and an empty body, and with the delimiter right after the headers.
  const std::string body =
      "--X\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n\r\n--X\r\n"
      "Content-Disposition: form-data; name=\"b\"\r\n\r\n--X\r\n"
      "Content-Disposition: form-data; name=\"c\"\r\n\r\n-X-c\r\n--X--";
  const Parsed p = parse_every_way(body, "X");
  ASSERT_FALSE(p.error) << *p.error;
  ASSERT_EQ(p.parts.size(), 3u);
  EXPECT_EQ(p.parts[0].data, "");
  EXPECT_EQ(p.parts[1].data, "");
  EXPECT_TRUE(p.parts[1].ended);
  EXPECT_EQ(p.parts[2].data, "-X-c");
}

TEST(MultipartParser, BoundaryLookAlikesInTheDataAreData) {
  const std::string b = "boundary-0123456789";
  const std::vector<std::string> lookalikes = {
      "\r\n--" + b.substr(0, b.size() - 1),  // the delimiter less its last character
      "--" + b,                              // the boundary without its CRLF
      "\n--" + b,                            // LF only
      "\r--" + b,                            // CR only
      "\r\n-" + b,                           // one dash
      "\r\n--" + b.substr(1),                // the boundary less its first character
      "\r\r\n--" + b.substr(0, 5),           // CRs that restart the match
      "\r\n",
      "\r",
      "\r\n--",
      std::string("\0\r\n\0--", 6) + b.substr(0, 3),
  };
  std::string data;
  for (const auto& s : lookalikes)
    data += "<" + s + ">" + s;
  data += "\r\n--" + b.substr(0, 10);  // a look-alike right before the real delimiter
  const std::string body = "--" + b + "\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" +
                           data + "\r\n--" + b + "--\r\n";
  const Parsed p = parse_every_way(body, b);
  ASSERT_FALSE(p.error) << *p.error;
  ASSERT_EQ(p.parts.size(), 1u);
  EXPECT_EQ(p.parts[0].data, data);
}

TEST(MultipartParser, BinaryDataWithNulsAndCrsComesThroughExactly) {
  const std::string b = "Zq9";  // short, so that look-alikes of it are frequent
  std::string data = binary_data(20000, 7);
  // Drop real delimiters the generator made by chance (they cannot be data).
  for (auto pos = data.find("\r\n--" + b); pos != std::string::npos;
       pos = data.find("\r\n--" + b)) {
    data.erase(pos, 2);
  }
  const std::string body = "--" + b +
                           "\r\nContent-Disposition: form-data; name=\"bin\"; filename=\"x\"\r\n"
                           "Content-Type: application/octet-stream\r\n\r\n" +
                           data + "\r\n--" + b + "--";
  const Parsed p = parse_every_way(body, b);
  ASSERT_FALSE(p.error) << *p.error;
  ASSERT_EQ(p.parts.size(), 1u);
  EXPECT_EQ(p.parts[0].data, data);
}

// --- Headers
// ---------------------------------------------------------------------------------------

MultipartPartHeaders headers_of(const std::string& header_lines) {
  const std::string body = "--B\r\n" + header_lines + "\r\n\r\nx\r\n--B--";
  const Parsed p = parse_every_way(body, "B");
  EXPECT_FALSE(p.error) << *p.error;
  EXPECT_EQ(p.parts.size(), 1u);
  return p.parts.empty() ? MultipartPartHeaders{} : p.parts[0].headers;
}

TEST(MultipartHeaders, NamesAreCaseInsensitiveAndValuesMayBeTokens) {
  auto h = headers_of("content-disposition: FORM-DATA; NAME=field\r\nCONTENT-TYPE: image/png");
  EXPECT_EQ(h.name, "field");
  EXPECT_EQ(h.filename, std::nullopt);
  EXPECT_EQ(h.content_type, "image/png");
  h = headers_of("Content-Disposition:form-data;name = \"a\" ;filename= b.txt ;");
  EXPECT_EQ(h.name, "a");
  EXPECT_EQ(h.filename, "b.txt");
}

TEST(MultipartHeaders, QuotedStringsUnescapeBackslashes) {
  const auto h =
      headers_of(R"(Content-Disposition: form-data; name="a\"b"; filename="C:\\dir\\f \"q\".txt")");
  EXPECT_EQ(h.name, "a\"b");
  EXPECT_EQ(h.filename, R"(C:\dir\f "q".txt)");
  EXPECT_EQ(headers_of(R"(Content-Disposition: form-data; name="x; y=z"; filename="")").filename,
            "");
}

TEST(MultipartHeaders, ExtendedFilenameWinsWhenItsCharsetIsKnown) {
  EXPECT_EQ(headers_of("Content-Disposition: form-data; name=f; filename=\"a%20b\"; "
                       "filename*=UTF-8''caf%C3%A9%20b.txt")
                .filename,
            "caf\xC3\xA9 b.txt");
  EXPECT_EQ(
      headers_of("Content-Disposition: form-data; name=f; filename*=iso-8859-1'en'%E9").filename,
      "\xC3\xA9");
  EXPECT_EQ(headers_of("Content-Disposition: form-data; name=f; filename=\"plain\"; "
                       "filename*=koi8-r''%C1")
                .filename,
            "plain");
}

TEST(MultipartHeaders, FoldedLinesAndOtherHeaders) {
  const auto h = headers_of(
      "Content-Disposition: form-data;\r\n name=\"folded\"\r\nContent-Length: 1\r\nX-Other: y");
  EXPECT_EQ(h.name, "folded");
  EXPECT_EQ(h.content_type, "text/plain");
}

TEST(MultipartHeaders, NonAsciiFileNamesAsBrowsersSendThem) {
  EXPECT_EQ(headers_of("Content-Disposition: form-data; name=f; filename=\"\xC3\xA9t\xC3\xA9.zip\"")
                .filename,
            "\xC3\xA9t\xC3\xA9.zip");
}

// --- Malformed bodies
// ------------------------------------------------------------------------------

const std::string kPart = "Content-Disposition: form-data; name=\"a\"\r\n\r\ndata";

TEST(MultipartMalformed, NoBoundaryLine) {
  expect_malformed("just some bytes\r\nand more", "B", "the body has no boundary line '--B'");
  expect_malformed("", "B", "no boundary line");
  expect_malformed("--C\r\n" + kPart + "\r\n--C--", "B", "no boundary line");
}

TEST(MultipartMalformed, BoundaryLineFollowedByJunk) {
  expect_malformed("--Bx\r\n" + kPart, "B", "the boundary line is followed by 'x'");
  expect_malformed("--B\r\n" + kPart + "\r\n--B-x", "B", "followed by 'x' where '--'");
  expect_malformed("--B \t x\r\n" + kPart, "B", "followed by 'x' where CRLF");
  expect_malformed("--B\rx" + kPart, "B", "followed by 'x' where CRLF");
  // Transport padding before the CRLF is allowed.
  const Parsed p = parse_every_way("--B  \t\r\n" + kPart + "\r\n--B--", "B");
  EXPECT_FALSE(p.error);
}

TEST(MultipartMalformed, BadHeaders) {
  expect_malformed("--B\r\nContent-Disposition form-data; name=a\r\n\r\nx\r\n--B--", "B",
                   "malformed header line in part 1: 'Content-Disposition form-data; name=a'");
  expect_malformed("--B\r\nContent Disposition: form-data; name=a\r\n\r\nx\r\n--B--", "B",
                   "malformed header line");
  expect_malformed("--B\r\n: x\r\n\r\nx\r\n--B--", "B", "malformed header line");
  expect_malformed("--B\r\n folded: first\r\n\r\nx\r\n--B--", "B", "continuation line");
  expect_malformed("--B\r\nContent-Disposition: form-data; name=a\rb\r\n\r\nx\r\n--B--", "B",
                   "stray CR, LF or NUL");
  expect_malformed("--B\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--B--", "B",
                   "is not closed");
  expect_malformed("--B\r\nContent-Disposition: form-data; name=a; name=b\r\n\r\nx\r\n--B--", "B",
                   "parameter 'name' is given twice");
  expect_malformed(
      "--B\r\nContent-Disposition: form-data; name=a\r\nContent-Disposition: form-data; name=b"
      "\r\n\r\nx\r\n--B--",
      "B", "more than one content-disposition header");
  expect_malformed(
      "--B\r\nContent-Disposition: form-data; name=f; filename*=utf-8%41\r\n\r\nx"
      "\r\n--B--",
      "B", "filename* of part 1 is not charset'language'value");
  expect_malformed(
      "--B\r\nContent-Disposition: form-data; name=f; filename*=utf-8''%4\r\n\r\nx"
      "\r\n--B--",
      "B", "bad escape");
}

TEST(MultipartMalformed, NoContentDispositionOrNoName) {
  expect_malformed("--B\r\nContent-Type: text/plain\r\n\r\nx\r\n--B--", "B",
                   "part 1 has no Content-Disposition header");
  expect_malformed("--B\r\n\r\nx\r\n--B--", "B", "part 1 has no Content-Disposition header");
  expect_malformed(
      "--B\r\n" + kPart + "\r\n--B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--B--", "B",
      "the Content-Disposition of part 2 has no name");
  expect_malformed("--B\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--B--", "B",
                   "the Content-Disposition of part 1 is 'attachment', not form-data");
}

TEST(MultipartMalformed, HeadersTooLong) {
  const std::string big =
      "--B\r\nContent-Disposition: form-data; name=a\r\nX-Big: " + std::string(20000, 'y') +
      "\r\n\r\nx\r\n--B--";
  expect_malformed(big, "B", "the headers of part 1 are longer than 16384 bytes");
  // The limit is configurable and counts the block with its blank line.
  const std::string block = "Content-Disposition: form-data; name=a\r\n\r\n";
  const std::string body = "--B\r\n" + block + "x\r\n--B--";
  EXPECT_FALSE(parse(body, "B", 1, block.size()).error);
  EXPECT_FALSE(parse(body, "B", 1000, block.size()).error);
  expect_malformed(body, "B", "longer than " + std::to_string(block.size() - 1) + " bytes",
                   block.size() - 1);
  // Without any end the parser stops at the limit instead of buffering on.
  Parsed out;
  MultipartParser parser("B", collect(out), 1000);
  parser.feed("--B\r\nContent-Disposition: form-data; name=a\r\nX: ");
  EXPECT_THROW(
      for (int i = 0; i < 100; ++i) {
        parser.feed(std::string(100, 'z'));
        ASSERT_LE(parser.buffered_bytes(), 1002u);
      },
      MultipartError);
}

TEST(MultipartMalformed, BodyEndsBeforeTheClosingBoundary) {
  expect_malformed("--B\r\n" + kPart, "B", "the body ends inside part 1, before the closing");
  expect_malformed("--B\r\n" + kPart + "\r\n--B\r\n" + kPart + "\r\n--B", "B",
                   "the body ends inside a boundary line");
  expect_malformed("--B\r\n" + kPart + "\r\n--B\r\n" + kPart + "\r\n--B-", "B",
                   "inside a boundary line");
  expect_malformed("--B\r\n" + kPart + "\r\n--B\r\nContent-Disp", "B",
                   "the body ends inside the headers of part 2");
  expect_malformed("--B\r\n" + kPart + "\r\n--B\r\n" + kPart + "\r\n--", "B",
                   "the body ends inside part 2");
}

TEST(MultipartParser, ParserStaysFailedAfterAnError) {
  Parsed out;
  MultipartParser parser("B", collect(out));
  EXPECT_THROW(parser.feed("--B\r\nbad header\r\n\r\n"), MultipartError);
  EXPECT_THROW(parser.feed("--B--"), MultipartError);
  EXPECT_THROW(parser.finish(), MultipartError);
  EXPECT_FALSE(parser.done());
  EXPECT_EQ(parser.buffered_bytes(), 0u);
}

TEST(MultipartParser, AHandlerExceptionPropagatesAndFailsTheParser) {
  MultipartParser parser(
      "B", {.on_part_begin = nullptr,
            .on_part_data = [](std::string_view) { throw std::runtime_error("disk full"); },
            .on_part_end = nullptr});
  EXPECT_THROW(parser.feed("--B\r\n" + kPart + "\r\n--B--"), std::runtime_error);
  EXPECT_THROW(parser.feed("more"), MultipartError);
}

TEST(MultipartParser, DoneAfterTheClosingBoundaryAndMissingHandlersAreFine) {
  MultipartParser parser("B", {});
  EXPECT_FALSE(parser.done());
  parser.feed("--B\r\n" + kPart + "\r\n--B--");
  EXPECT_TRUE(parser.done());
  parser.feed("anything after is epilogue");
  parser.finish();
}

TEST(MultipartParser, InvalidBoundaryIsRefused) {
  EXPECT_THROW(MultipartParser("", {}), MultipartError);
  EXPECT_THROW(MultipartParser(std::string(71, 'a'), {}), MultipartError);
  EXPECT_THROW(MultipartParser("a\r\nb", {}), MultipartError);
}

// --- Bounded memory
// --------------------------------------------------------------------------------

TEST(MultipartParser, MemoryStaysBoundedWhateverThePartSize) {
  const std::string b = "----rex-boundary-for-a-big-part-0123456789";
  // A 64 KiB chunk full of near-delimiters, one of them split across the chunk's end.
  std::string chunk;
  const std::string near = "\r\n--" + b.substr(0, b.size() - 1);
  while (chunk.size() + near.size() + 100 < 65536)
    chunk += near + std::string(97, 'd') + "\r\r";
  chunk += std::string(65536 - chunk.size() - 10, 'e');
  chunk += near.substr(0, 10);
  ASSERT_EQ(chunk.size(), 65536u);

  std::size_t received = 0;
  std::size_t max_buffered = 0;
  bool ended = false;
  MultipartParser parser(b, {.on_part_begin = nullptr,
                             .on_part_data = [&](std::string_view d) { received += d.size(); },
                             .on_part_end = [&] { ended = true; }});
  parser.feed("--" + b +
              "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big\"\r\n\r\n");
  const std::size_t total = 50u << 20;
  for (std::size_t fed = 0; fed < total; fed += chunk.size()) {
    parser.feed(chunk);
    max_buffered = std::max(max_buffered, parser.buffered_bytes());
  }
  parser.feed("\r\n--" + b + "--\r\n");
  parser.finish();
  EXPECT_TRUE(ended);
  EXPECT_EQ(received, total);
  EXPECT_LE(max_buffered, b.size() + 4);
  EXPECT_GT(max_buffered, 0u);  // the split near-delimiter was held back
}

// --- write_multipart_body
// --------------------------------------------------------------------------

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& p, std::string_view data) {
  std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(WriteMultipartBody, ParsesBackForEveryChunkSize) {
  rex::test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "payload.bin";
  std::string data = binary_data(150000, 11);
  write_file(file, data);
  const fs::path body_path = fs::path(dir.path()) / "body";
  const std::string content_type = rex::http::write_multipart_body(
      body_path,
      {{.name = "target_path", .value = "/tmp/t a\r\nrget"}, {.name = "unzip", .value = "false"}},
      {.name = "file",
       .filename = "pay \"load\".bin",
       .path = file,
       .content_type = "application/zip"});
  const auto boundary = multipart_boundary(content_type);
  ASSERT_TRUE(boundary) << content_type;
  EXPECT_GE(boundary->size(), 40u);
  const std::string body = read_file(body_path);
  std::size_t occurrences = 0;
  for (auto pos = body.find(*boundary); pos != std::string::npos;
       pos = body.find(*boundary, pos + 1)) {
    ++occurrences;
  }
  EXPECT_EQ(occurrences, 4u) << "the boundary occurs only in the delimiters";

  const Parsed p = parse_every_way(body, *boundary);
  ASSERT_FALSE(p.error) << *p.error;
  EXPECT_TRUE(p.done);
  ASSERT_EQ(p.parts.size(), 3u);
  EXPECT_EQ(p.parts[0].headers.name, "target_path");
  EXPECT_EQ(p.parts[0].data, "/tmp/t a\r\nrget");
  EXPECT_EQ(p.parts[0].headers.content_type, "text/plain");
  EXPECT_EQ(p.parts[1].headers.name, "unzip");
  EXPECT_EQ(p.parts[1].data, "false");
  EXPECT_EQ(p.parts[2].headers.name, "file");
  EXPECT_EQ(p.parts[2].headers.filename, "pay \"load\".bin");
  EXPECT_EQ(p.parts[2].headers.content_type, "application/zip");
  EXPECT_EQ(p.parts[2].data, data);
}

TEST(WriteMultipartBody, EmptyFileAndNoFields) {
  rex::test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "empty";
  write_file(file, "");
  const fs::path body_path = fs::path(dir.path()) / "body";
  const std::string content_type = rex::http::write_multipart_body(
      body_path, {}, {.name = "file", .filename = "e", .path = file});
  const Parsed p = parse_every_way(read_file(body_path), *multipart_boundary(content_type));
  ASSERT_FALSE(p.error) << *p.error;
  ASSERT_EQ(p.parts.size(), 1u);
  EXPECT_EQ(p.parts[0].data, "");
  EXPECT_EQ(p.parts[0].headers.content_type, "application/octet-stream");
}

TEST(WriteMultipartBody, BoundariesDifferBetweenBodies) {
  rex::test::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "f";
  write_file(file, "x");
  const auto a = rex::http::write_multipart_body(fs::path(dir.path()) / "a", {},
                                                 {.name = "file", .filename = "f", .path = file});
  const auto b = rex::http::write_multipart_body(fs::path(dir.path()) / "b", {},
                                                 {.name = "file", .filename = "f", .path = file});
  EXPECT_NE(a, b);
}

TEST(WriteMultipartBody, Errors) {
  rex::test::TempDir dir;
  const fs::path body_path = fs::path(dir.path()) / "body";
  EXPECT_THROW(rex::http::write_multipart_body(
                   body_path, {}, {.name = "file", .filename = "f", .path = dir.path() + "/nope"}),
               rex::FileNotFoundError);
  EXPECT_THROW(rex::http::write_multipart_body(
                   body_path, {}, {.name = "file", .filename = "f", .path = dir.path()}),
               rex::IsADirectoryError);
  const fs::path file = fs::path(dir.path()) / "f";
  write_file(file, "x");
  EXPECT_THROW_MESSAGE(
      rex::http::write_multipart_body(body_path, {{.name = "a\nb", .value = "v"}},
                                      {.name = "file", .filename = "f", .path = file}),
      rex::ValueError,
      "multipart field name 'a\\nb' holds CR, LF or NUL, which a header cannot carry");
  EXPECT_THROW(rex::http::write_multipart_body(body_path, {},
                                               {.name = "file", .filename = "f\r", .path = file}),
               rex::ValueError);
  EXPECT_THROW(
      rex::http::write_multipart_body(
          body_path, {}, {.name = "file", .filename = "f", .path = file, .content_type = "a\r\nb"}),
      rex::ValueError);
  EXPECT_FALSE(fs::exists(body_path)) << "no body left after a failure";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1)
      << "no temporary file left";
}

}  // namespace
