// Small text helpers shared by messages, command lines and wire formats: how rex writes a
// duration in a message, how it quotes a word for a POSIX shell, lowercase, hex and base64.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace rex {

/// A duration for messages, in seconds with up to six significant digits: "2.5 s", "0.001 s".
std::string seconds_text(std::chrono::duration<double> duration);

/// `text` as one word for a POSIX shell, in single quotes: it's -> 'it'\''s'.
std::string shell_quote(std::string_view text);

/// Bytes (a digest, a random id) as lowercase hex.
std::string hex_of(const unsigned char* bytes, std::size_t n);

/// ASCII letters lowered; every other byte as it is.
std::string ascii_lower(std::string_view text);

/// Standard base64, padded.
std::string base64_encode(std::string_view bytes);

/// Standard base64 (padding optional, whitespace ignored), or why it is not: "not valid
/// base64", "data after base64 padding", "truncated base64".
struct Base64Decoded {
  std::string bytes;
  std::string error;  // empty when decoded
};
Base64Decoded base64_decode(std::string_view text);

}  // namespace rex
