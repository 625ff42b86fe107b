// Connect protocol envelopes (connectrpc.com's streaming framing): a flags byte, the payload's
// length as 4 bytes big-endian, the payload. A server stream is a sequence of messages (flags 0)
// ending with one end-of-stream envelope (flags 0x02) whose JSON may carry an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rex::http {

inline constexpr std::uint8_t kConnectEndStream = 0x02;
inline constexpr std::uint8_t kConnectCompressed = 0x01;

/// One envelope holding `payload`.
std::string connect_envelope(std::uint8_t flags, std::string_view payload);

struct ConnectEnvelope {
  std::uint8_t flags = 0;
  std::string payload;
};

/// Splits a byte stream, fed in pieces as they arrive, into envelopes. An envelope longer than
/// `max_payload` is an error (the stream cannot be trusted after it).
class ConnectEnvelopeReader {
 public:
  explicit ConnectEnvelopeReader(std::size_t max_payload = std::size_t{64} << 20)
      : max_payload_(max_payload) {}

  void feed(std::string_view bytes) { buffer_.append(bytes); }
  /// The next complete envelope, or none until more bytes come. Throws std::runtime_error for
  /// an envelope over the limit.
  std::optional<ConnectEnvelope> next();
  /// Bytes received that do not make a whole envelope yet.
  std::size_t pending() const noexcept { return buffer_.size() - at_; }

 private:
  std::size_t max_payload_;
  std::string buffer_;
  std::size_t at_ = 0;
};

}  // namespace rex::http
