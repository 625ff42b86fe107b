// JSON decoding of every protocol type (rex/protocol/json.hpp) and of the exception transfer
// (rex/protocol/exceptions.hpp). The first byte picks the type, the rest is the JSON text.
//
// Properties: decoding either succeeds or throws ProtocolError (nothing else, no crash); a
// decoded value encodes to JSON that decodes again, through text too, to the same encoding
// (a fixed point after one round); an exception rebuilt from its wire form keeps its class
// path, message and extra_info.
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>

#include <boost/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

namespace json = boost::json;
using rex::fuzz::check;

// Equal, but for doubles one or two ulps apart. Boost.JSON 1.81's parser does not round every
// 17-digit number correctly (exact parsing came in a later Boost), so a double can come back a
// ulp off through text; through the value it must still be exact.
bool same_through_text(const json::value& a, const json::value& b) {
  if (a.is_double() && b.is_double()) {
    double x = a.get_double();
    for (int step = 0; step < 3 && x != b.get_double(); ++step)
      x = std::nextafter(x, b.get_double());
    return x == b.get_double();
  }
  if (a.is_object() && b.is_object()) {
    const auto& l = a.get_object();
    const auto& r = b.get_object();
    if (l.size() != r.size())
      return false;
    for (const auto& [key, value] : l) {
      const auto* other = r.if_contains(key);
      if (other == nullptr || !same_through_text(value, *other))
        return false;
    }
    return true;
  }
  if (a.is_array() && b.is_array()) {
    const auto& l = a.get_array();
    const auto& r = b.get_array();
    if (l.size() != r.size())
      return false;
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (!same_through_text(l[i], r[i]))
        return false;
    }
    return true;
  }
  return a == b;
}

template <class T>
void round_trip(std::string_view text) {
  T decoded;
  try {
    decoded = rex::parse_json<T>(text);
  } catch (const rex::ProtocolError&) {
    return;  // the documented failure
  }
  const json::value encoded = rex::to_json(decoded);
  check(encoded.is_object(), "a protocol type encodes to an object");
  // Through the value...
  const T again = rex::from_json<T>(encoded);
  check(rex::to_json(again) == encoded, "decode(encode(x)) encodes the same");
  // ... and through text, as it travels.
  const std::string wire = json::serialize(encoded);
  const T from_text = rex::parse_json<T>(wire);
  check(same_through_text(rex::to_json(from_text), encoded),
        "parse(serialize(encode(x))) encodes the same");
}

void exception_round_trip(std::string_view text) {
  boost::system::error_code ec;
  const json::value value = json::parse(text, ec);
  if (ec || !value.is_object())
    return;
  try {
    rex::throw_wire(value.get_object());
  } catch (const rex::SwerexException& first) {
    const json::object wire = rex::to_wire(first);
    const json::object& sent = value.get_object();
    const auto* message = sent.if_contains("message");
    const auto* class_path = sent.if_contains("class_path");
    const auto* extra = sent.if_contains("extra_info");
    const bool well_formed = message != nullptr && message->is_string() && class_path != nullptr &&
                             class_path->is_string() &&
                             (extra == nullptr || extra->is_object() || extra->is_null());
    if (well_formed)
      check(wire.at("message") == *message, "the message is transferred whole");
    try {
      rex::throw_wire(wire);
    } catch (const rex::SwerexException& second) {
      check(first.class_path() == second.class_path(), "the class path survives the wire");
      check(std::string_view(first.what()) == second.what(), "the message survives the wire");
      check(first.extra_info() == second.extra_info(), "extra_info survives the wire");
      check(rex::to_wire(second) == wire, "the wire form is a fixed point");
      return;
    }
  }
  check(false, "throw_wire throws a SwerexException");
}

using Decoder = void (*)(std::string_view);

constexpr Decoder kDecoders[] = {
    round_trip<rex::CreateBashSessionRequest>,
    round_trip<rex::CreateBashSessionResponse>,
    round_trip<rex::CloseBashSessionRequest>,
    round_trip<rex::CloseBashSessionResponse>,
    round_trip<rex::BashAction>,
    round_trip<rex::BashInterruptAction>,
    round_trip<rex::Action>,
    round_trip<rex::BashObservation>,
    round_trip<rex::Command>,
    round_trip<rex::CommandResponse>,
    round_trip<rex::ReadFileRequest>,
    round_trip<rex::ReadFileResponse>,
    round_trip<rex::WriteFileRequest>,
    round_trip<rex::WriteFileResponse>,
    round_trip<rex::UploadRequest>,
    round_trip<rex::UploadResponse>,
    round_trip<rex::DownloadRequest>,
    round_trip<rex::DownloadResponse>,
    round_trip<rex::IsAliveResponse>,
    round_trip<rex::CloseResponse>,
    exception_round_trip,
    round_trip<rex::ProcessConfig>,
    round_trip<rex::ProcessInfo>,
    round_trip<rex::ProcessListResponse>,
    round_trip<rex::ProcessSelector>,
    round_trip<rex::ProcessInput>,
    round_trip<rex::ProcessSignal>,
    round_trip<rex::ProcessEnd>,
    round_trip<rex::ProcessResize>,
    round_trip<rex::ProcessConfig>,  // again: its seed has a terminal
    round_trip<rex::SessionAttach>,
    round_trip<rex::SessionResize>,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  constexpr std::size_t kCount = sizeof kDecoders / sizeof kDecoders[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  kDecoders[data[0] % kCount](text);
  return 0;
}
