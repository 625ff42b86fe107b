// The head of an answer as a proxy's forward link reads it (runtime/forward_link.hpp), against
// Beast's parser of the same bytes.
//
// Properties: the link's parser never fails on any input; a head Beast accepts, the link
// accepts too, with the same status, and either the same Content-Length or the answer left to
// Beast's parser (chunked, up to the connection's end, folded header lines).
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "runtime/forward_link.hpp"

namespace bhttp = boost::beast::http;
using rex::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t end = input.find("\r\n\r\n");
  if (end == std::string_view::npos)
    return 0;
  const std::string_view head = input.substr(0, end + 4);
  rex::detail::AnswerHead ours;
  const bool accepted = rex::detail::parse_answer_head(head, ours);
  if (accepted)
    check(ours.size == head.size(), "the head's size is what it was given");

  bhttp::response_parser<bhttp::string_body> beast;
  beast.header_limit(64 * 1024);
  boost::system::error_code ec;
  std::size_t used = beast.put(boost::asio::buffer(head.data(), head.size()), ec);
  if (ec || !beast.is_header_done() || used != head.size())
    return 0;
  check(accepted, "a head Beast reads is read");
  check(ours.status == beast.get().result_int(), "the same status");
  // An answer the link does not frame itself goes to Beast's parser whole.
  if (!ours.other_framing) {
    check(!beast.chunked(), "a chunked answer is left to Beast's parser");
    check(beast.content_length().has_value() == ours.content_length.has_value() &&
              ours.content_length.value_or(0) == beast.content_length().value_or(0),
          "the same Content-Length");
  }
  return 0;
}
