// The value of one hexadecimal digit, for percent-decoding (URLs, RFC 8187 parameters).
#pragma once

namespace rex::detail {

/// 0-15 for a hexadecimal digit (either case), -1 for anything else.
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

}  // namespace rex::detail
