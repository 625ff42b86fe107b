#include <rex/session/shell_framing.hpp>

#include <sys/random.h>

#include <algorithm>
#include <stdexcept>

namespace rex {
namespace {

constexpr std::size_t kMaxQuotedPiece = 1024;  // well below the terminal's 4095-byte line limit
constexpr char kHex[] = "0123456789abcdef";

std::string random_nonce() {
  unsigned char bytes[12];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0)
      got += static_cast<std::size_t>(n);
  }
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
  return out;
}

// Appends `text` as one or more ANSI-C quoted pieces ($'...') joined by line continuations, so
// every physical line stays short and holds only printable ASCII.
void append_ansi_c_quoted(std::string& out, std::string_view text) {
  out += "$'";
  std::size_t piece = 0;
  for (char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if (b == 0)
      throw std::invalid_argument("the command contains a NUL byte, which bash cannot run");
    if (piece >= kMaxQuotedPiece) {
      out += "'\\\n$'";
      piece = 0;
    }
    if (b == '\\' || b == '\'') {
      out += '\\';
      out += ch;
      piece += 2;
    } else if (b < 0x20 || b >= 0x7f) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
      piece += 4;
    } else {
      out += ch;
      ++piece;
    }
  }
  out += '\'';
}

constexpr std::string_view kRanPrefix = "__rex_ran=1;";
constexpr std::size_t kMaxDirectLine = 1024;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_word_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool is_blank_char(char c) {
  return c == ' ' || c == '\t';
}

// The word at text[i..] if it stands alone (not part of a longer name).
bool word_at(std::string_view text, std::size_t i, std::string_view word) {
  const std::size_t after = i + word.size();
  return text.substr(i, word.size()) == word && (i == 0 || !is_word_char(text[i - 1])) &&
         (after >= text.size() || !is_word_char(text[after]));
}

// text[i] is `.` used as a command (`. venv/bin/activate`), not an argument (`find . -name x`).
bool dot_command_at(std::string_view text, std::size_t i) {
  if (i + 1 < text.size() && !is_blank_char(text[i + 1]))
    return false;
  std::size_t j = i;
  while (j > 0 && is_blank_char(text[j - 1]))
    --j;
  if (j == 0 || std::string_view(";&|(){}!`\n").find(text[j - 1]) != std::string_view::npos)
    return true;
  if (j == i)
    return false;  // part of a longer word ("a.", "..")
  // After a word: only keywords and command prefixes leave `.` in command position.
  std::size_t k = j;
  while (k > 0 && is_word_char(text[k - 1]))
    --k;
  const std::string_view before = text.substr(k, j - k);
  for (std::string_view keyword : {"then", "do", "else", "elif", "if", "while", "until", "time",
                                   "command", "builtin", "exec"}) {
    if (before == keyword)
      return true;
  }
  return false;
}

// text[i] is a `&` that is not part of `&&`, `>&`, `&>`, `<&` or `|&`: a background job.
bool lone_ampersand_at(std::string_view text, std::size_t i) {
  const char before = i > 0 ? text[i - 1] : ' ';
  const char after = i + 1 < text.size() ? text[i + 1] : ' ';
  return before != '&' && before != '>' && before != '<' && before != '|' && after != '&' &&
         after != '>';
}

// text[i] opens `()`, with blanks allowed inside: a function definition.
bool empty_parens_at(std::string_view text, std::size_t i) {
  std::size_t j = i + 1;
  while (j < text.size() && is_blank_char(text[j]))
    ++j;
  return j < text.size() && text[j] == ')';
}

}  // namespace

ShellFraming::ShellFraming() : ShellFraming(random_nonce()) {}

ShellFraming::ShellFraming(std::string nonce)
    : nonce_(std::move(nonce)), marker_("REXPS1" + nonce_) {}

std::string ShellFraming::prompt_text() const {
  return marker_ + ":\\#:$?:\\j;";
}

std::string ShellFraming::continuation_prompt_text() const {
  return marker_ + ":\\#;";
}

std::string ShellFraming::setup_code(bool guarded) const {
  // __rex_go marks that bash accepted the text's syntax and restores a non-zero $? of the
  // previous command for it. __rex_e ends every eval line (see the header); its arguments say
  // whether the guard and the jobs flush belong in PROMPT_COMMAND from now on. __rex_prompt
  // re-installs the prompt variables with the PROMPT_COMMAND elements that __rex_g and __rex_j
  // hold. less/more become cat: nothing may wait for a key press.
  std::string code =
      "PS1='" + prompt_text() + "'; PS2='" + continuation_prompt_text() +
      "'; PS0=''; unset PROMPT_COMMAND HISTFILE; set +o history +H"
      "; __rex_p=$PS1; __rex_q=$PS2; __rex_m='" +
      marker_ +
      "'; __rex_gt='PS1=$__rex_p PS0= PS2=$__rex_q PROMPT_COMMAND='; __rex_g="
      "; __rex_jt='jobs >/dev/null 2>&1'; __rex_j="
      "; __rex_go() { __rex_ran=1; return \"$1\"; }"
      "; __rex_prompt() { PS1=$__rex_p; PS2=$__rex_q; PS0=; if [[ -n $__rex_g$__rex_j ]]; then "
      "PROMPT_COMMAND=([1]=$__rex_g [2]=$__rex_j); else unset PROMPT_COMMAND; fi; }"
      "; __rex_e() { local __rex_x=$?; [[ -n ${__rex_ran-} ]] || printf '%s!' \"$__rex_m\" >&2; "
      "__rex_ran=; __rex_g=${1:+$__rex_gt}; __rex_j=${2:+$__rex_jt}; jobs >/dev/null 2>&1; "
      "[[ ${PS1-}/${PS2-}/${PS0-}/${PROMPT_COMMAND[0]-}/${PROMPT_COMMAND[1]-}/"
      "${PROMPT_COMMAND[2]-} == \"$__rex_p/$__rex_q///$__rex_g/$__rex_j\" ]] || __rex_prompt; "
      "return \"$__rex_x\"; }"
      "; less() { local __rex_a=() __rex_x; for __rex_x in \"$@\"; do case $__rex_x in -*|+*) "
      ";; *) __rex_a+=(\"$__rex_x\");; esac; done; command cat -- \"${__rex_a[@]}\"; }"
      "; more() { less \"$@\"; }";
  if (guarded)
    code += "; __rex_g=$__rex_gt; __rex_prompt";
  // Last, so that it sets the first prompt's status: PROMPT_COMMAND arrays need bash 5.1.
  code += "; (( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501 ))";
  return code;
}

std::string ShellFraming::command_line(std::string_view text, int previous_status, bool guard,
                                       bool flush_jobs) const {
  std::string line;
  line.reserve(text.size() + 64);
  line += "__rex_ran=;eval ";
  std::string body = previous_status == 0 ? std::string(kRanPrefix)
                                          : "__rex_go " + std::to_string(previous_status) + ";";
  body += text;
  append_ansi_c_quoted(line, body);
  line += ";__rex_e";
  if (guard || flush_jobs)
    line += guard ? " 1" : " ''";
  if (flush_jobs)
    line += " 1";
  line += '\n';
  return line;
}

ShellFraming::TextTraits ShellFraming::inspect(std::string_view text) {
  // One pass: this runs for every command.
  bool one_plain_line = !text.empty() && text.size() <= kMaxDirectLine && text.back() != '\\';
  bool prompt_variable = false;  // PS0, PS1, PS2, PROMPT_COMMAND
  bool unseen_code = false;      // source, `.`, eval
  bool jobs = false;             // a lone `&`, coproc
  bool defines = false;          // a function or an alias
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if ((b < 0x20 && b != '\t') || b == 0x7f) {
      one_plain_line = false;
      continue;
    }
    switch (text[i]) {
      case '&':
        jobs = jobs || lone_ampersand_at(text, i);
        break;
      case '.':
        unseen_code = unseen_code || dot_command_at(text, i);
        break;
      case '(':
        defines = defines || empty_parens_at(text, i);
        break;
      case 'P':
        prompt_variable = prompt_variable || text.substr(i, 3) == "PS0" ||
                          text.substr(i, 3) == "PS1" || text.substr(i, 3) == "PS2" ||
                          text.substr(i, 14) == "PROMPT_COMMAND";
        break;
      case 's':
        unseen_code = unseen_code || word_at(text, i, "source");
        break;
      case 'e':
        unseen_code = unseen_code || word_at(text, i, "eval");
        break;
      case 'c':
        jobs = jobs || word_at(text, i, "coproc");
        break;
      case 'f':
        defines = defines || word_at(text, i, "function");
        break;
      case 'a':
        defines = defines || word_at(text, i, "alias");
        break;
      default:
        break;
    }
  }
  TextTraits traits;
  traits.direct = one_plain_line && !prompt_variable && !unseen_code;
  traits.may_start_jobs = jobs;
  traits.may_change_prompt_later = prompt_variable || unseen_code || defines;
  return traits;
}

std::optional<PromptMatch> ShellFraming::find_prompt(std::string_view buf, std::size_t from,
                                                     std::size_t& resume) const {
  // Reads up to `max` digits at i; false when the buffer ends first (the prompt may be split).
  auto digits = [&](std::size_t& i, std::size_t max, std::uint64_t& value, bool& valid) {
    const std::size_t begin = i;
    value = 0;
    while (i < buf.size() && is_digit(buf[i]) && i - begin < max) {
      value = value * 10 + static_cast<std::uint64_t>(buf[i] - '0');
      ++i;
    }
    if (i >= buf.size())
      return false;
    valid = i > begin && !is_digit(buf[i]);
    return true;
  };
  std::size_t pos = from;
  while (true) {
    pos = buf.find(marker_, pos);
    if (pos == std::string_view::npos) {
      const std::size_t keep = marker_.size() - 1;  // a marker may start in the last bytes
      resume = buf.size() > keep ? std::max(from, buf.size() - keep) : from;
      return std::nullopt;
    }
    auto incomplete = [&] {
      resume = pos;
      return std::nullopt;
    };
    std::size_t i = pos + marker_.size();
    if (i >= buf.size())
      return incomplete();
    if (buf[i] != ':') {
      ++pos;
      continue;
    }
    ++i;
    PromptMatch m;
    std::uint64_t value = 0;
    bool valid = false;
    if (!digits(i, 19, value, valid))
      return incomplete();
    m.command_number = value;
    if (valid && buf[i] == ';') {
      m.continuation = true;
    } else {
      if (!valid || buf[i] != ':') {
        ++pos;
        continue;
      }
      ++i;
      if (!digits(i, 3, value, valid))
        return incomplete();
      if (!valid || buf[i] != ':') {
        ++pos;
        continue;
      }
      m.status = static_cast<int>(value);
      ++i;
      if (!digits(i, 9, value, valid))
        return incomplete();
      if (!valid || buf[i] != ';') {
        ++pos;
        continue;
      }
      m.jobs = static_cast<int>(value);
    }
    m.begin = pos;
    m.end = i + 1;
    // __rex_e's rejection flag, right before the prompt.
    const std::size_t flag = marker_.size() + 1;
    if (!m.continuation && pos >= flag && buf[pos - 1] == '!' &&
        buf.substr(pos - flag, marker_.size()) == marker_) {
      m.rejected = true;
      m.begin = pos - flag;
    }
    return m;
  }
}

std::string ShellFraming::clean_syntax_error(std::string_view message) const {
  std::string out;
  out.reserve(message.size());
  constexpr std::string_view kEval = "bash: eval: line ";
  constexpr std::string_view kGo = "__rex_go ";
  std::size_t i = 0;
  while (i < message.size()) {
    if (message.substr(i).starts_with(kEval)) {
      out += "bash: line ";
      i += kEval.size();
      continue;
    }
    if (message.substr(i).starts_with(kRanPrefix)) {
      i += kRanPrefix.size();
      continue;
    }
    if (message.substr(i).starts_with(kGo)) {
      std::size_t j = i + kGo.size();
      while (j < message.size() && is_digit(message[j]))
        ++j;
      if (j < message.size() && message[j] == ';' && j > i + kGo.size()) {
        i = j + 1;
        continue;
      }
    }
    out += message[i++];
  }
  return out;
}

bool ShellFraming::is_blank(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t eol = text.find('\n', i);
    if (eol == std::string_view::npos)
      eol = text.size();
    std::string_view line = text.substr(i, eol - i);
    const std::size_t first = line.find_first_not_of(" \t\r\f\v");
    if (first != std::string_view::npos && line[first] != '#')
      return false;
    i = eol + 1;
  }
  return true;
}

}  // namespace rex
