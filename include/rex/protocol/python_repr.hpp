// Python's repr() of a str and of a float, for error messages worded as SWE-ReX words them.
// (Defined with the codecs in src/runtime/file_ops.cpp, which share its UTF-8 decoding.)
#pragma once

#include <string>
#include <string_view>

namespace rex {

/// Python's `repr(str)` of UTF-8 text: quoted, with escapes for quotes, backslashes and
/// unprintable characters; bytes that are not UTF-8 show as '\udcNN' (as file names do).
std::string python_repr(std::string_view text);

/// Python's float repr: the shortest round-trip form, "1.0" rather than "1".
std::string python_float_repr(double value);

}  // namespace rex
