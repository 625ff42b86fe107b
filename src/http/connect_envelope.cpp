#include <rex/http/connect_envelope.hpp>

#include <fmt/format.h>

#include <stdexcept>

namespace rex::http {

std::string connect_envelope(std::uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  out.push_back(static_cast<char>(flags));
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(payload);
  return out;
}

std::optional<ConnectEnvelope> ConnectEnvelopeReader::next() {
  if (buffer_.size() - at_ < 5)
    return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + at_);
  const std::size_t length = (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) |
                             (std::size_t{p[3]} << 8) | std::size_t{p[4]};
  if (length > max_payload_)
    throw std::runtime_error(fmt::format("a Connect envelope of {} bytes is over the limit of {}",
                                         length, max_payload_));
  if (buffer_.size() - at_ - 5 < length)
    return std::nullopt;
  ConnectEnvelope e;
  e.flags = p[0];
  e.payload = buffer_.substr(at_ + 5, length);
  at_ += 5 + length;
  if (at_ == buffer_.size()) {
    buffer_.clear();
    at_ = 0;
  } else if (at_ > 65536 && at_ > buffer_.size() / 2) {
    buffer_.erase(0, at_);
    at_ = 0;
  }
  return e;
}

}  // namespace rex::http
