// Connect envelopes (rex/http/connect_envelope.hpp), as E2BDeployment reads a process stream.
// The input's first byte decides the pieces' sizes; the rest is the stream, fed whole and in
// pieces.
//
// Properties: the reader throws only std::runtime_error, and only for an envelope over its
// limit; both feeds yield the same envelopes and the same outcome (chunking never changes the
// result); each envelope encoded again gives back exactly the bytes it was read from, so the
// envelopes and what is pending add up to the input.
#include <rex/http/connect_envelope.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;

constexpr std::size_t kMax = 512;  // small, so the limit is reachable

struct Outcome {
  std::string envelopes;  // each one encoded again, one after the other
  std::size_t pending = 0;
  bool over_limit = false;
};

Outcome read(std::string_view stream, std::size_t piece) {
  rex::http::ConnectEnvelopeReader reader(kMax);
  Outcome out;
  try {
    for (std::size_t i = 0; i < stream.size(); i += piece) {
      reader.feed(stream.substr(i, piece));
      while (auto e = reader.next()) {
        check(e->payload.size() <= kMax, "an envelope is never over the limit");
        out.envelopes += rex::http::connect_envelope(e->flags, e->payload);
      }
    }
    out.pending = reader.pending();
  } catch (const std::runtime_error&) {
    out.over_limit = true;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::size_t piece = 1 + data[0] % 17;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = read(stream, stream.empty() ? 1 : stream.size());
  const Outcome pieces = read(stream, piece);
  check(whole.over_limit == pieces.over_limit, "chunking never changes the outcome");
  if (whole.over_limit) {
    check(pieces.envelopes.size() <= stream.size(), "envelopes come from the input");
    return 0;
  }
  check(whole.envelopes == pieces.envelopes, "chunking never changes the envelopes");
  check(whole.pending == pieces.pending, "chunking never changes what is pending");
  check(whole.envelopes.size() + whole.pending == stream.size(),
        "the envelopes and what is pending add up to the input");
  check(stream.substr(0, whole.envelopes.size()) == whole.envelopes,
        "an envelope encoded again is the bytes it was read from");
  return 0;
}
