// How rex talks to an interactive bash: the prompt that carries a per-session random marker
// with the exit status, and the line that delivers a command so that any text runs as one unit.
// Pure logic, no I/O: BashSession moves the bytes.
//
// Protocol with bash (one round trip per command):
//   rex writes:  __rex_ran= __rex_s=;eval $'__rex_ran=1;<text, escaped>';__rex_s=$?;...
//   bash prints: <command output> REXPS1<nonce>:<ran>:<status>;
// The command text travels as one ANSI-C quoted word (split over continuation lines below the
// terminal's line limit), so it never meets the terminal's line discipline: control characters,
// quotes, heredocs and long text are safe. `ran` is empty when bash rejected the syntax before
// running anything; `status` is the exit status of the command.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace rex {

/// A prompt marker found in the output.
struct PromptMatch {
  std::size_t begin = 0;  // offset of the marker in the scanned buffer
  std::size_t end = 0;    // one past its last byte
  bool ran = false;       // false: the command was rejected by bash's parser
  int status = 0;         // exit status ($?)
};

class ShellFraming {
 public:
  /// A framing with a fresh random nonce.
  ShellFraming();
  explicit ShellFraming(std::string nonce);

  /// What every prompt of this session starts with (also the `expect_string` reported when the
  /// prompt ended an interactive action).
  const std::string& marker() const noexcept { return marker_; }

  /// Bash code that installs the prompt and the helper functions; run once at start.
  std::string setup_code() const;
  /// Bash code that re-installs the prompt (after startup files that may change it).
  std::string prompt_code() const;
  /// The PS1 value itself.
  std::string prompt_text() const;

  /// The line to write to the terminal for `text` (ends with a newline); `previous_status` is
  /// the $? the text should see (the last prompt's status). Throws std::invalid_argument if the
  /// text holds a NUL byte, which bash cannot represent.
  std::string command_line(std::string_view text, int previous_status = 0) const;

  /// Scans buf[from..] for a complete prompt marker. On no match, `resume` is set to the offset
  /// where the next scan must start (a marker may be split across reads).
  std::optional<PromptMatch> find_prompt(std::string_view buf, std::size_t from,
                                         std::size_t& resume) const;

  /// Bash's syntax error message for a rejected one-line command, with rex's framing removed:
  /// "bash: eval: line 1: `__rex_ran=1;echo )'" becomes "bash: line 1: `echo )'".
  std::string clean_syntax_error(std::string_view message) const;

  /// True for text that bash would treat as nothing: blank lines and comments only.
  static bool is_blank(std::string_view text);
  /// True when the text spans several lines (it then gets a syntax check before it runs).
  static bool is_multiline(std::string_view text) {
    return text.find('\n') != std::string_view::npos;
  }

 private:
  std::string nonce_;
  std::string marker_;  // "REXPS1" + nonce + ":"
};

}  // namespace rex
