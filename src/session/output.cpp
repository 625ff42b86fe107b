#include <rex/session/output.hpp>

#include <cstdint>

namespace rex {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_escaped(std::string& out, unsigned char b) {
  out += '\\';
  out += 'x';
  out += kHex[b >> 4];
  out += kHex[b & 0xF];
}

bool is_cont(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// Length of the valid UTF-8 sequence starting at s[i] (s[i] >= 0x80), or 0 if none.
std::size_t valid_utf8_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const std::size_t left = s.size() - i;
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  if (b0 >= 0xC2 && b0 <= 0xDF)
    return left >= 2 && is_cont(at(1)) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left < 3)
      return 0;
    const unsigned char b1 = at(1);
    const unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = b0 == 0xED ? 0x9F : 0xBF;  // no UTF-16 surrogates
    return b1 >= lo && b1 <= hi && is_cont(at(2)) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left < 4)
      return 0;
    const unsigned char b1 = at(1);
    const unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b0 == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    return b1 >= lo && b1 <= hi && is_cont(at(2)) && is_cont(at(3)) ? 4 : 0;
  }
  return 0;
}

// Copies the non-ASCII sequence at s[i] into out (escaping it if invalid); returns bytes used.
std::size_t append_non_ascii(std::string& out, std::string_view s, std::size_t i) {
  const std::size_t n = valid_utf8_length(s, i);
  if (n == 0) {
    append_escaped(out, static_cast<unsigned char>(s[i]));
    return 1;
  }
  out.append(s.data() + i, n);
  return n;
}

// Length of the escape sequence starting with ESC at s[i]; 1 when it is not a recognised one
// (the lone ESC is then dropped).
std::size_t escape_length(std::string_view s, std::size_t i) {
  const std::size_t n = s.size();
  std::size_t j = i + 1;
  if (j >= n)
    return 1;
  const char kind = s[j];
  if (kind == '[') {  // CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E
    ++j;
    while (j < n && s[j] >= 0x30 && s[j] <= 0x3F)
      ++j;
    while (j < n && s[j] >= 0x20 && s[j] <= 0x2F)
      ++j;
    if (j < n && s[j] >= 0x40 && s[j] <= 0x7E)
      return j + 1 - i;
    return 1;
  }
  if (kind == ']' || kind == 'P' || kind == 'X' || kind == '^' || kind == '_') {
    // OSC, DCS, SOS, PM, APC: up to BEL (OSC) or ST (ESC \).
    for (std::size_t k = j + 1; k < n; ++k) {
      if (s[k] == '\a' && kind == ']')
        return k + 1 - i;
      if (s[k] == '\x1b')
        return (k + 1 < n && s[k + 1] == '\\') ? k + 2 - i : 1;
    }
    return 1;  // unterminated: keep the text, drop the ESC
  }
  // nF / Fp / Fe / Fs: intermediates 0x20-0x2F then a final 0x30-0x7E.
  while (j < n && s[j] >= 0x20 && s[j] <= 0x2F)
    ++j;
  if (j < n && s[j] >= 0x30 && s[j] <= 0x7E)
    return j + 1 - i;
  return 1;
}

}  // namespace

std::string utf8_backslashreplace(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      // Copy the whole ASCII run at once.
      std::size_t j = i + 1;
      while (j < bytes.size() && static_cast<unsigned char>(bytes[j]) < 0x80)
        ++j;
      out.append(bytes.data() + i, j - i);
      i = j;
    } else {
      i += append_non_ascii(out, bytes, i);
    }
  }
  return out;
}

std::string clean_terminal_output(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  std::size_t i = 0;
  const std::size_t n = raw.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(raw[i]);
    if (b >= 0x80) {
      i += append_non_ascii(out, raw, i);
    } else if (b == 0x1b) {
      i += escape_length(raw, i);
    } else if (b == '\n') {
      // CRLF -> LF, also when an escape sequence stood between the two, and CRCRLF (a program
      // that writes CRLF itself, through the terminal's own LF -> CRLF) as well.
      while (!out.empty() && out.back() == '\r')
        out.pop_back();
      out += '\n';
      ++i;
    } else {
      // Plain ASCII run up to the next byte that needs attention.
      std::size_t j = i + 1;
      while (j < n) {
        const auto c = static_cast<unsigned char>(raw[j]);
        if (c >= 0x80 || c == 0x1b || c == '\n')
          break;
        ++j;
      }
      out.append(raw.data() + i, j - i);
      i = j;
    }
  }
  return out;
}

}  // namespace rex
