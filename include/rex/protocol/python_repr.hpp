// Python's repr() of a str, for error messages worded as SWE-ReX words them.
#pragma once

#include <string>
#include <string_view>

namespace rex {

/// `s` as Python's repr() writes a str: single quotes unless the text holds a single quote and
/// no double quote, backslash escapes for the quote, backslash and control characters.
std::string python_repr(std::string_view s);

}  // namespace rex
