// Pure text transformations that turn raw terminal bytes into an observation's text.
// No I/O; unit-tested with plain inputs.
#pragma once

#include <rex/protocol/python_text.hpp>  // utf8_backslashreplace

#include <string>
#include <string_view>

namespace rex {

/// The observation text of raw pty output: ANSI escape sequences (CSI, OSC, DCS and two-byte
/// ESC sequences, bracketed-paste toggles included) removed, CRLF (and CRCRLF) turned into LF, and
/// bytes that are not UTF-8 written as `\xNN`. Lone CRs (progress bars) are kept.
std::string clean_terminal_output(std::string_view raw);

}  // namespace rex
