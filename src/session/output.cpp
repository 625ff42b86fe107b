#include <rex/protocol/python_text.hpp>
#include <rex/session/output.hpp>

#include <cstdint>

namespace rex {
namespace {

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

std::string clean_terminal_output(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  std::size_t i = 0;
  const std::size_t n = raw.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(raw[i]);
    if (b >= 0x80) {
      i += append_backslashreplaced(out, raw, i);
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
