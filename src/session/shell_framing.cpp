#include <rex/session/shell_framing.hpp>

#include <sys/random.h>

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

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

ShellFraming::ShellFraming() : ShellFraming(random_nonce()) {}

ShellFraming::ShellFraming(std::string nonce)
    : nonce_(std::move(nonce)), marker_("REXPS1" + nonce_) {}

std::string ShellFraming::prompt_text() const {
  // The status is the framed command's (__rex_s) or, when Ctrl-C cut the line short, $?.
  return marker_ + ":${__rex_ran}:${__rex_s:-$?};";
}

std::string ShellFraming::prompt_code() const {
  return "PS1='" + prompt_text() + "'; PS2=''; PS0=''; unset PROMPT_COMMAND";
}

std::string ShellFraming::setup_code() const {
  // __rex_go marks that bash accepted the command's syntax and restores a non-zero $? of the
  // previous command for it; __rex_prompt re-installs the prompt. less/more become cat:
  // nothing may wait for a key press.
  return prompt_code() +
         "; unset HISTFILE; set +o history +H; __rex_s="
         "; __rex_go() { __rex_ran=1; return \"$1\"; }"
         "; __rex_prompt() { " +
         prompt_code() +
         "; }"
         "; less() { local __rex_a=() __rex_x; for __rex_x in \"$@\"; do case $__rex_x in -*|+*) "
         ";; *) __rex_a+=(\"$__rex_x\");; esac; done; command cat -- \"${__rex_a[@]}\"; }"
         "; more() { less \"$@\"; }"
         "; __rex_ran=1";
}

std::string ShellFraming::command_line(std::string_view text, int previous_status) const {
  // Bash does every step of this line for every command, so each one is kept cheap: the
  // status helper runs only when there is a non-zero $? to restore, `jobs` (which collects
  // finished background jobs, so bash does not announce them inside a later observation) only
  // once a background job was ever started, and the prompt is re-installed only if changed.
  std::string line;
  line.reserve(text.size() + 256);
  line += "__rex_ran= __rex_s=;eval ";
  std::string body = previous_status == 0 ? std::string(kRanPrefix)
                                          : "__rex_go " + std::to_string(previous_status) + ";";
  body += text;
  append_ansi_c_quoted(line, body);
  line +=
      ";__rex_s=$?;[[ -z ${!:-} ]]||jobs >/dev/null 2>&1;[[ "
      "${PS1:-}${PS2:-}${PS0:-}${PROMPT_COMMAND:-} == '";
  line += prompt_text();
  line += "' ]]||__rex_prompt\n";
  return line;
}

std::optional<PromptMatch> ShellFraming::find_prompt(std::string_view buf, std::size_t from,
                                                     std::size_t& resume) const {
  const std::size_t plen = marker_.size() + 1;  // marker + ':'
  std::size_t pos = from;
  while (true) {
    pos = buf.find(marker_, pos);
    if (pos == std::string_view::npos) {
      resume = buf.size() >= plen ? std::max(from, buf.size() - plen + 1) : from;
      return std::nullopt;
    }
    std::size_t i = pos + marker_.size();
    auto incomplete = [&] {
      resume = pos;
      return std::nullopt;
    };
    if (i >= buf.size())
      return incomplete();
    if (buf[i] != ':') {
      ++pos;
      continue;
    }
    ++i;
    const std::size_t ran_begin = i;
    while (i < buf.size() && is_digit(buf[i]))
      ++i;
    if (i >= buf.size())
      return incomplete();
    const bool ran = i > ran_begin;
    if (buf[i] != ':' || i - ran_begin > 1) {
      ++pos;
      continue;
    }
    ++i;
    const std::size_t status_begin = i;
    int status = 0;
    while (i < buf.size() && is_digit(buf[i]) && i - status_begin < 4) {
      status = status * 10 + (buf[i] - '0');
      ++i;
    }
    if (i >= buf.size())
      return incomplete();
    if (buf[i] != ';' || i == status_begin) {
      ++pos;
      continue;
    }
    return PromptMatch{pos, i + 1, ran, status};
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
