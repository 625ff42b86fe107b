// Small text helpers shared by messages and command lines: how rex writes a duration in a
// message, and how it quotes a word for a POSIX shell.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace rex {

/// A duration for messages, in seconds with up to six significant digits: "2.5 s", "0.001 s".
std::string seconds_text(std::chrono::duration<double> duration);

/// `text` as one word for a POSIX shell, in single quotes: it's -> 'it'\''s'.
std::string shell_quote(std::string_view text);

}  // namespace rex
