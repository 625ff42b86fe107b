// Pure text transformations that turn raw terminal bytes into an observation's text.
// No I/O; unit-tested with plain inputs.
#pragma once

#include <string>
#include <string_view>

namespace rex {

/// Python's `bytes.decode("utf-8", "backslashreplace")`: valid UTF-8 is kept, every byte that is
/// not part of a valid sequence becomes the four characters `\xNN` (lower-case hex).
std::string utf8_backslashreplace(std::string_view bytes);

/// The observation text of raw pty output: ANSI escape sequences (CSI, OSC, DCS and two-byte
/// ESC sequences, bracketed-paste toggles included) removed, CRLF (and CRCRLF) turned into LF, and
/// bytes that are not UTF-8 written as `\xNN`. Lone CRs (progress bars) are kept.
std::string clean_terminal_output(std::string_view raw);

}  // namespace rex
