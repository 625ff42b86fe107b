// The pure logic between bash and an observation (rex/session/output.hpp,
// rex/session/shell_framing.hpp): output cleaning, prompt detection, command framing. The
// first byte picks how big the pieces are in which the output "arrives"; the rest is terminal
// output (for the prompt scan, with the marker of a framing whose nonce is "f") or command text.
//
// Properties:
// - utf8_backslashreplace and clean_terminal_output give valid UTF-8; valid UTF-8 without
//   control sequences passes the former unchanged; cleaning leaves no ESC and no CRLF and is
//   idempotent;
// - find_prompt reports the same first prompt whether the output is scanned whole or as it
//   arrives piece by piece (resuming where it said), and the match lies inside the buffer;
// - command_line either refuses a NUL or gives one line per piece, all printable ASCII, whose
//   ANSI-C quoting decodes back to the text; inspect's "direct" only allows one short line.
#include <rex/session/output.hpp>
#include <rex/session/shell_framing.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      n = 2;
      cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 3;
      cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size())
      return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const std::uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

void check_cleaning(std::string_view raw) {
  const std::string replaced = rex::utf8_backslashreplace(raw);
  check(valid_utf8(replaced), "utf8_backslashreplace gives valid UTF-8");
  if (valid_utf8(raw))
    check(replaced == raw, "utf8_backslashreplace keeps valid UTF-8 as it is");

  const std::string clean = rex::clean_terminal_output(raw);
  check(valid_utf8(clean), "clean_terminal_output gives valid UTF-8");
  check(clean.find('\x1b') == std::string::npos, "cleaned output holds no ESC");
  check(clean.find("\r\n") == std::string::npos, "cleaned output holds no CRLF");
  check(rex::clean_terminal_output(clean) == clean, "cleaning is idempotent");
}

bool same(const std::optional<rex::PromptMatch>& a, const std::optional<rex::PromptMatch>& b) {
  if (a.has_value() != b.has_value())
    return false;
  if (!a)
    return true;
  return a->begin == b->begin && a->end == b->end && a->continuation == b->continuation &&
         a->rejected == b->rejected && a->command_number == b->command_number &&
         a->status == b->status && a->jobs == b->jobs;
}

void check_prompt_scan(std::string_view buf, std::size_t piece) {
  static const rex::ShellFraming framing("f");
  std::size_t resume = 0;
  const auto whole = framing.find_prompt(buf, 0, resume);
  if (whole) {
    check(whole->begin < whole->end && whole->end <= buf.size(), "a match lies inside the buffer");
    check(buf.substr(whole->begin).starts_with(framing.marker()), "a match starts with the marker");
  } else {
    check(resume <= buf.size(), "resume lies inside the buffer");
  }
  // As BashSession reads: the buffer grows, each scan starts where the previous one said.
  std::optional<rex::PromptMatch> streamed;
  std::size_t from = 0;
  for (std::size_t have = std::min(piece, buf.size());; have = std::min(have + piece, buf.size())) {
    std::size_t next = 0;
    streamed = framing.find_prompt(buf.substr(0, have), from, next);
    if (streamed)
      break;
    check(next >= from && next <= have, "resume moves forward, inside what was scanned");
    from = next;
    if (have == buf.size())
      break;
  }
  check(same(whole, streamed), "scanning as the output arrives finds the same prompt");
}

// Decodes the eval line's quoted word: $'...' pieces joined by backslash-newline.
std::string unquote_command_line(std::string_view line) {
  constexpr std::string_view kHead = "__rex_ran=;eval $'";
  check(line.starts_with(kHead), "the eval line starts as documented");
  std::string out;
  std::size_t i = kHead.size();
  while (true) {
    check(i < line.size(), "the quoted word is closed");
    const char c = line[i];
    if (c == '\'') {
      if (line.substr(i, 5) == "'\\\n$'") {
        i += 5;
        continue;
      }
      break;
    }
    if (c == '\\') {
      check(i + 1 < line.size(), "an escape is complete");
      const char e = line[i + 1];
      if (e == 'x') {
        const std::string hex(line.substr(i + 2, 2));
        out += static_cast<char>(std::stoi(hex, nullptr, 16));
        i += 4;
      } else {
        out += e;
        i += 2;
      }
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

void check_framing(std::string_view text, int previous_status) {
  const auto traits = rex::ShellFraming::inspect(text);
  if (traits.direct) {
    check(text.size() <= 1024 && text.find('\n') == std::string_view::npos,
          "direct delivery only for one short line");
  }
  (void)rex::ShellFraming::is_blank(text);
  static const rex::ShellFraming framing("f");
  check(framing.clean_syntax_error(text).size() <= text.size(),
        "cleaning a syntax error only removes text");

  std::string line;
  try {
    line = framing.command_line(text, previous_status, previous_status % 2 == 0,
                                previous_status % 3 == 0);
  } catch (const std::invalid_argument&) {
    check(text.find('\0') != std::string_view::npos, "only a NUL byte is refused");
    return;
  }
  check(text.find('\0') == std::string_view::npos, "a NUL byte is refused");
  check(line.ends_with('\n'), "the eval line ends with a newline");
  std::size_t start = 0;
  while (start < line.size()) {
    const std::size_t eol = line.find('\n', start);
    check(eol - start < 2048, "each physical line stays far below the terminal's limit");
    for (std::size_t k = start; k < eol; ++k) {
      const auto b = static_cast<unsigned char>(line[k]);
      check(b >= 0x20 && b < 0x7f, "the eval line is printable ASCII");
    }
    start = eol + 1;
  }
  const std::string expected =
      (previous_status == 0 ? std::string("__rex_ran=1;")
                            : "__rex_go " + std::to_string(previous_status) + ";") +
      std::string(text);
  check(unquote_command_line(line) == expected, "the quoted word decodes back to the text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t piece = 1 + data[0] % 32;
  check_cleaning(rest);
  check_prompt_scan(rest, piece);
  check_framing(rest, data[0] % 4 == 0 ? 0 : data[0]);
  return 0;
}
