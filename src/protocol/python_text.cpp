#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>

#include <fmt/format.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace rex {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// ---------------------------------------------------------------------------------------------
// UTF-8 scanning with Python's error ranges ("maximal subparts").

struct Utf8Step {
  std::size_t length;  // bytes of the valid sequence, or of the invalid subpart
  const char* error;   // null when valid, else Python's reason
};

Utf8Step utf8_step(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80)
    return {1, nullptr};
  std::size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0)
      lo = 0xA0;  // no overlong forms
    if (b0 == 0xED)
      hi = 0x9F;  // no UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0)
      lo = 0x90;
    if (b0 == 0xF4)
      hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, "invalid start byte"};
  }
  for (std::size_t k = 1; k < need; ++k) {
    if (i + k >= s.size())
      return {k, "unexpected end of data"};
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
      return {k, "invalid continuation byte"};
    }
  }
  return {need, nullptr};
}

char32_t utf8_code_point(std::string_view s, std::size_t i, std::size_t n) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

void append_hex_escape(std::string& out, char kind, char32_t cp, int digits) {
  out += '\\';
  out += kind;
  for (int d = digits - 1; d >= 0; --d)
    out += kHex[(cp >> (4 * d)) & 0xF];
}

// ---------------------------------------------------------------------------------------------
// Codecs and error handlers.

enum class Codec { kUtf8, kLatin1, kAscii };
enum class ErrorMode { kStrict, kReplace, kIgnore, kBackslashReplace };

// Python's codec-name normalisation: lower case, every run of characters other than letters,
// digits and '.' becomes one '_' (encodings.normalize_encoding).
std::string normalize_codec_name(std::string_view name) {
  std::string out;
  bool punct = false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '.') {
      if (punct && !out.empty())
        out += '_';
      out += static_cast<char>(std::tolower(u));
      punct = false;
    } else {
      punct = true;
    }
  }
  return out;
}

Codec find_codec(std::string_view name) {
  static const std::pair<Codec, std::vector<std::string_view>> kAliases[] = {
      {Codec::kUtf8, {"utf_8", "utf8", "u8", "utf", "utf8_ucs2", "utf8_ucs4", "cp65001"}},
      {Codec::kLatin1,
       {"latin_1", "latin1", "latin", "l1", "iso_8859_1", "iso8859_1", "iso8859", "8859", "cp819",
        "ibm819", "csisolatin1", "iso_ir_100", "iso_8859_1_1987"}},
      {Codec::kAscii,
       {"ascii", "us_ascii", "us", "646", "cp367", "ibm367", "csascii", "iso646_us", "iso_ir_6",
        "ansi_x3.4_1968", "ansi_x3_4_1968", "ansi_x3.4_1986", "iso_646.irv_1991"}},
  };
  const std::string normalized = normalize_codec_name(name);
  for (const auto& [codec, aliases] : kAliases) {
    if (std::find(aliases.begin(), aliases.end(), normalized) != aliases.end())
      return codec;
  }
  throw LookupError(fmt::format("unknown encoding: {}", name),
                    {{"encoding", utf8_backslashreplace(name)}});
}

ErrorMode find_error_mode(std::string_view name) {
  if (name == "strict")
    return ErrorMode::kStrict;
  if (name == "replace")
    return ErrorMode::kReplace;
  if (name == "ignore")
    return ErrorMode::kIgnore;
  if (name == "backslashreplace")
    return ErrorMode::kBackslashReplace;
  if (name == "surrogateescape" || name == "surrogatepass" || name == "xmlcharrefreplace" ||
      name == "namereplace") {
    throw ValueError(
        fmt::format("error handler {} cannot produce text for the protocol", python_repr(name)),
        {{"errors", std::string(name)}});
  }
  throw LookupError(fmt::format("unknown error handler name {}", python_repr(name)),
                    {{"errors", utf8_backslashreplace(name)}});
}

// Handles the undecodable bytes s[start, end) under `mode`.
void on_decode_error(std::string& out, std::string_view s, std::size_t start, std::size_t end,
                     ErrorMode mode, std::string_view codec, const char* reason) {
  switch (mode) {
    case ErrorMode::kStrict: {
      const std::string where = end == start + 1
                                    ? fmt::format("byte 0x{:02x} in position {}",
                                                  static_cast<unsigned char>(s[start]), start)
                                    : fmt::format("bytes in position {}-{}", start, end - 1);
      throw ValueError(fmt::format("'{}' codec can't decode {}: {}", codec, where, reason),
                       {{"encoding", codec}, {"start", start}, {"end", end}, {"reason", reason}});
    }
    case ErrorMode::kReplace:
      out += "\xEF\xBF\xBD";  // one U+FFFD per error range, as Python
      return;
    case ErrorMode::kIgnore:
      return;
    case ErrorMode::kBackslashReplace:
      for (std::size_t k = start; k < end; ++k) {
        append_hex_escape(out, 'x', static_cast<unsigned char>(s[k]), 2);
      }
      return;
  }
}

// Approximates Python's str.isprintable() for non-ASCII code points: separators (other than
// ' '), controls, format characters, private use and non-characters are not printable.
bool is_printable(char32_t cp) {
  if (cp < 0xA0)
    return cp >= 0x20 && cp < 0x7F;
  if (cp == 0xA0 || cp == 0xAD || cp == 0x1680 || cp == 0x180E)
    return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F))
    return false;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF)
    return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || (cp >= 0xFFF9 && cp <= 0xFFFB))
    return false;
  if ((cp & 0xFFFE) == 0xFFFE || cp >= 0xF0000)
    return false;
  if (cp >= 0xE0000 && cp <= 0xE0FFF)
    return false;  // tags and variation selectors
  return true;
}

// ---------------------------------------------------------------------------------------------
// backslashreplace over UTF-8

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

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// ---------------------------------------------------------------------------------------------

std::string decode_text(std::string_view bytes, std::string_view encoding,
                        std::string_view errors) {
  const Codec codec = find_codec(encoding);
  const ErrorMode mode = find_error_mode(errors);
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    switch (codec) {
      case Codec::kLatin1:
        append_utf8(out, b);
        ++i;
        break;
      case Codec::kAscii:
        on_decode_error(out, bytes, i, i + 1, mode, "ascii", "ordinal not in range(128)");
        ++i;
        break;
      case Codec::kUtf8: {
        const Utf8Step step = utf8_step(bytes, i);
        if (step.error == nullptr) {
          out.append(bytes.data() + i, step.length);
        } else {
          on_decode_error(out, bytes, i, i + step.length, mode, "utf-8", step.error);
        }
        i += step.length;
        break;
      }
    }
  }
  return out;
}

std::string translate_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      out += text[i];
      continue;
    }
    out += '\n';
    if (i + 1 < text.size() && text[i + 1] == '\n')
      ++i;
  }
  return out;
}

std::string python_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(text.size() + 2);
  out += quote;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b == static_cast<unsigned char>(quote) || b == '\\') {
        out += '\\';
        out += static_cast<char>(b);
      } else if (b == '\t') {
        out += "\\t";
      } else if (b == '\n') {
        out += "\\n";
      } else if (b == '\r') {
        out += "\\r";
      } else if (b < 0x20 || b == 0x7F) {
        append_hex_escape(out, 'x', b, 2);
      } else {
        out += static_cast<char>(b);
      }
      ++i;
      continue;
    }
    const Utf8Step step = utf8_step(text, i);
    if (step.error != nullptr) {
      append_hex_escape(out, 'u', 0xDC00 + b, 4);  // surrogateescape, as for file names
      ++i;
      continue;
    }
    const char32_t cp = utf8_code_point(text, i, step.length);
    if (is_printable(cp)) {
      out.append(text.data() + i, step.length);
    } else if (cp <= 0xFF) {
      append_hex_escape(out, 'x', cp, 2);
    } else if (cp <= 0xFFFF) {
      append_hex_escape(out, 'u', cp, 4);
    } else {
      append_hex_escape(out, 'U', cp, 8);
    }
    i += step.length;
  }
  out += quote;
  return out;
}

std::string python_float_repr(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_not_of("-0123456789") == std::string::npos)
    text += ".0";
  return text;
}

std::size_t append_backslashreplaced(std::string& out, std::string_view s, std::size_t i) {
  return append_non_ascii(out, s, i);
}

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

}  // namespace rex
