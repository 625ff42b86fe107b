// multipart/form-data (rex/http/multipart.hpp). The input's first line is a Content-Type value
// (multipart_boundary reads it; a fixed boundary stands in when it has none), the rest is the
// body. The body is parsed twice: whole, and in small pieces whose sizes the input decides.
//
// Properties: the parser only ever throws MultipartError; both feeds report the same parts,
// data and outcome (chunking never changes the result); handlers see parts begin, carry
// non-empty data and end in order; buffered_bytes() stays within its documented bound; a
// parser that saw the closing boundary finishes cleanly.
#include <rex/http/multipart.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;
using rex::http::MultipartError;
using rex::http::MultipartParser;
using rex::http::MultipartPartHeaders;

constexpr std::size_t kMaxHeaderBytes = 256;  // small, so the limit is reachable

// What a parse reported, as text: the parts with their headers and whole data, then the outcome.
struct Log {
  std::string events;
  bool in_part = false;
};

std::string parse(const std::string& boundary, std::string_view body, std::uint64_t seed) {
  Log log;
  MultipartParser::Handlers handlers;
  handlers.on_part_begin = [&log](const MultipartPartHeaders& h) {
    check(!log.in_part, "a part begins only after the previous one ended");
    log.in_part = true;
    log.events += "begin name=" + h.name + " filename=" + (h.filename ? *h.filename : "(none)") +
                  " type=" + h.content_type + "\ndata=";
  };
  handlers.on_part_data = [&log](std::string_view data) {
    check(log.in_part, "data arrives inside a part");
    check(!data.empty(), "data views are never empty");
    log.events.append(data);
  };
  handlers.on_part_end = [&log] {
    check(log.in_part, "a part ends only after it began");
    log.in_part = false;
    log.events += "\nend\n";
  };
  MultipartParser parser(boundary, std::move(handlers), kMaxHeaderBytes);
  const std::size_t bound = boundary.size() + 4 + kMaxHeaderBytes;
  try {
    std::size_t i = 0;
    while (i < body.size()) {
      std::size_t n = body.size() - i;
      if (seed != 0) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        n = std::min<std::size_t>(n, 1 + (seed >> 60));  // 1 to 16 bytes
      }
      parser.feed(body.substr(i, n));
      i += n;
      check(parser.buffered_bytes() <= bound, "buffered_bytes() stays within its bound");
    }
    const bool was_done = parser.done();
    parser.finish();
    check(parser.done(), "finish() returns only for a complete body");
    check(was_done, "finish() succeeds only after the closing boundary");
    log.events += "done\n";
  } catch (const MultipartError& e) {
    log.events += std::string("error: ") + e.what() + "\n";
    // A failed parser stays failed.
    bool threw = false;
    try {
      parser.feed("x");
    } catch (const MultipartError&) {
      threw = true;
    }
    check(threw, "a failed parser refuses more input");
  }
  return log.events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t eol = input.find('\n');
  const std::string_view content_type = input.substr(0, eol);
  const std::string_view body =
      eol == std::string_view::npos ? std::string_view{} : input.substr(eol + 1);

  const auto found = rex::http::multipart_boundary(content_type);
  if (found) {
    check(!found->empty() && found->size() <= 70, "a boundary is 1 to 70 characters");
    check(found->find_first_of("\r\n") == std::string::npos, "a boundary holds no CR or LF");
  }
  const std::string boundary = found ? *found : "fuzz";

  // The seed of the piece sizes comes from the input, so a crash reproduces from its file.
  std::uint64_t seed = 1469598103934665603ull;
  for (const char c : input)
    seed = (seed ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  seed |= 1;
  const std::string whole = parse(boundary, body, 0);
  const std::string pieces = parse(boundary, body, seed);
  check(whole == pieces, "feeding in pieces reports what feeding whole does");
  return 0;
}
