// Python's text rules, for answers and error messages worded as SWE-ReX words them: repr() of a
// str and a float, bytes.decode() with its codecs and error handlers, universal newlines.
// Pure functions, no I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rex {

/// Python's `repr(str)` of UTF-8 text: quoted, with escapes for quotes, backslashes and
/// unprintable characters; bytes that are not UTF-8 show as '\udcNN' (as file names do).
std::string python_repr(std::string_view text);

/// Python's float repr: the shortest round-trip form, "1.0" rather than "1".
std::string python_float_repr(double value);

/// Python's `bytes.decode(encoding, errors)` for the codecs utf-8, latin-1 and ascii (any of
/// Python's spellings: "UTF-8", "utf8", "latin1", "iso-8859-1", "l1", ...) and the handlers
/// strict, replace, ignore and backslashreplace. The result is UTF-8. Undecodable input under
/// strict is a ValueError, an unknown codec a LookupError, an unknown handler a ValueError,
/// each with Python's message.
std::string decode_text(std::string_view bytes, std::string_view encoding, std::string_view errors);

/// Appends one code point as UTF-8 (one to four bytes). The caller checks that it is a Unicode
/// scalar value (at most U+10FFFF, not a surrogate) when its input could hold any other.
void append_utf8(std::string& out, char32_t code_point);

/// Python's universal-newline reading: "\r\n" and lone "\r" become "\n".
std::string translate_newlines(std::string_view text);

/// Python's `bytes.decode("utf-8", "backslashreplace")`: valid UTF-8 is kept, every byte that is
/// not part of a valid sequence becomes the four characters `\xNN` (lower-case hex).
std::string utf8_backslashreplace(std::string_view bytes);

/// One step of utf8_backslashreplace, for scanners that handle ASCII bytes themselves: appends
/// the sequence at `s[i]` (a byte >= 0x80) to `out`, as it is when it is valid UTF-8, else its
/// first byte as `\xNN`; returns the bytes consumed.
std::size_t append_backslashreplaced(std::string& out, std::string_view s, std::size_t i);

}  // namespace rex
