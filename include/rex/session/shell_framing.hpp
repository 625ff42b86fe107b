// How rex talks to an interactive bash: the prompt that carries a per-session random marker with
// the command number and the exit status, and the two ways a command reaches bash. Pure logic,
// no I/O: BashSession moves the bytes.
//
// The prompt (PS1) is `REXPS1<nonce>:\#:$?:\j;`: bash prints the number of the next command (it
// grows only when a parsed command runs), the exit status and the number of jobs. The
// continuation prompt (PS2) is `REXPS1<nonce>:\#;`: bash waits for the rest of an incomplete
// command. The variables hold the escapes, not their values, so printing them (`set`, `echo
// "$PS1"`) never shows something that looks like a prompt.
//
// Direct delivery (the common case): a plain one-line command is written as it is. Bash prints
// the prompt right after it, with no helper code around it, so a command costs bash what it
// costs at a terminal. It ran if the command number grew; a syntax error leaves it unchanged. If
// bash shows the continuation prompt instead, the text was incomplete and nothing ran: Ctrl-C
// discards it and the text goes the other way.
//
// Eval delivery (everything else: several lines, control characters, long text, text that
// touches the prompt or runs code rex cannot see, and text that changes what PROMPT_COMMAND
// must hold):
//   __rex_ran=;eval $'<text, escaped>';__rex_e
// The text travels as one ANSI-C quoted word, split over continuation lines below the terminal's
// line limit, so control characters, quotes and heredocs never meet the terminal's line
// discipline. `__rex_e` returns the text's status, prints `REXPS1<nonce>!` before the prompt when
// bash rejected the text's syntax (nothing ran), collects finished background jobs (bash would
// announce them inside a later observation) and restores the prompt variables if the text
// changed them (a virtualenv's activate does).
//
// Once a session has run text that may define code which changes the prompt later (functions,
// aliases, sourced files), a guard in PROMPT_COMMAND[1] restores the prompt variables before
// every prompt. While background jobs exist, PROMPT_COMMAND[2] runs `jobs`, which collects the
// ones that ended before bash would announce them with the next prompt, so commands can still
// be written directly. Assigning PROMPT_COMMAND a plain string only replaces element 0, so these
// survive the usual `PROMPT_COMMAND="...;$PROMPT_COMMAND"`.
//
// After an `eval` whose text ends inside a quote, bash prints a prompt it decoded before the
// line ran. So a prompt whose command number did not grow is confirmed with an empty line,
// which runs nothing, keeps $? and brings a current prompt (BashSession does this).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rex {

/// A prompt found in the output.
struct PromptMatch {
  std::size_t begin = 0;             // offset of the prompt (or of the rejection flag before it)
  std::size_t end = 0;               // one past its last byte
  bool continuation = false;         // PS2: bash waits for the rest of an incomplete command
  bool rejected = false;             // eval delivery: bash's parser rejected the text
  std::uint64_t command_number = 0;  // \#: the number the next command will get
  int status = 0;                    // exit status ($?); primary prompts only
  int jobs = 0;                      // \j: jobs bash still tracks; primary prompts only
};

class ShellFraming {
 public:
  /// A framing with a fresh random nonce.
  ShellFraming();
  explicit ShellFraming(std::string nonce);

  /// What every prompt of this session starts with (also the `expect_string` reported when the
  /// prompt ended an interactive action).
  const std::string& marker() const noexcept { return marker_; }

  /// Bash code that installs the prompts and the helper functions; run once at start.
  /// `guarded`: install the PROMPT_COMMAND guard from the start (rc files or exported functions
  /// may already have defined code that changes the prompt). The first prompt's status is 0
  /// when bash runs the elements of a PROMPT_COMMAND array (bash 5.1 and later); older bash
  /// runs only element 0, so the guard and the jobs flush do nothing there.
  std::string setup_code(bool guarded = false) const;
  /// The PS1 and PS2 values themselves.
  std::string prompt_text() const;
  std::string continuation_prompt_text() const;

  /// The eval line to write to the terminal for `text` (ends with a newline); `previous_status`
  /// is the $? the text should see (the last prompt's status). `guard` and `flush_jobs` say
  /// which elements PROMPT_COMMAND holds from then on: the prompt guard, and `jobs`, which
  /// collects jobs that ended so that bash does not announce them in a later observation.
  /// Throws std::invalid_argument if the text holds a NUL byte, which bash cannot represent.
  std::string command_line(std::string_view text, int previous_status = 0, bool guard = false,
                           bool flush_jobs = false) const;

  /// What a command text allows, found in one pass over it.
  struct TextTraits {
    /// The text may be written to the terminal as it is (direct delivery): one line of at most
    /// 1024 bytes without control characters, that neither touches the prompt variables nor
    /// runs code rex cannot see (source, `.`, eval).
    bool direct = false;
    /// The text may start a background job (a lone `&`, coproc).
    bool may_start_jobs = false;
    /// The text may change the prompt now or define code that changes it later: it names a
    /// prompt variable, runs code rex cannot see, or defines a function or an alias.
    bool may_change_prompt_later = false;
  };
  static TextTraits inspect(std::string_view text);

  /// Scans buf[from..] for a complete prompt (primary or continuation). On no match, `resume`
  /// is set to the offset where the next scan must start (a prompt may be split across reads).
  std::optional<PromptMatch> find_prompt(std::string_view buf, std::size_t from,
                                         std::size_t& resume) const;

  /// Bash's syntax error message for a rejected eval-delivered command, with rex's framing
  /// removed: "bash: eval: line 1: `__rex_ran=1;echo )'" becomes "bash: line 1: `echo )'".
  std::string clean_syntax_error(std::string_view message) const;

  /// True for text that bash would treat as nothing: blank lines and comments only.
  static bool is_blank(std::string_view text);
  /// True when the text spans several lines (it then gets a syntax check before it runs).
  static bool is_multiline(std::string_view text) {
    return text.find('\n') != std::string_view::npos;
  }

 private:
  std::string nonce_;
  std::string marker_;  // "REXPS1" + nonce
};

}  // namespace rex
