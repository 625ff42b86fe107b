#include <rex/session/session_state.hpp>

#include <rex/core/text.hpp>

namespace rex {
namespace {

constexpr std::string_view kCwdLine = "#rex-cwd ";

// A function, so its loop variables are local; defined, called and removed in one command.
// Everything it runs is a builtin: a sandbox's image may have no grep or sed.
constexpr std::string_view kCapture = R"(__rex_capture() {
  local __rex_v __rex_l __rex_names=' '
  builtin printf '#rex-cwd %s\n' "$PWD"
  for __rex_v in $(builtin compgen -v); do
    case $__rex_v in
      __rex_* | _ | BASH | BASHOPTS | BASHPID | BASH_ALIASES | BASH_ARGC | BASH_ARGV | \
      BASH_ARGV0 | BASH_CMDS | BASH_COMMAND | BASH_COMPAT | BASH_EXECUTION_STRING | \
      BASH_LINENO | BASH_REMATCH | BASH_SOURCE | BASH_SUBSHELL | BASH_VERSINFO | BASH_VERSION | \
      COLUMNS | LINES | COMP_WORDBREAKS | DIRSTACK | EPOCHREALTIME | EPOCHSECONDS | EUID | \
      FUNCNAME | GROUPS | HISTCMD | HISTFILE | HOSTNAME | HOSTTYPE | LINENO | MACHTYPE | OLDPWD | \
      OPTERR | OPTIND | OSTYPE | PIPESTATUS | PPID | PS0 | PS1 | PS2 | PROMPT_COMMAND | PWD | \
      RANDOM | REX_SESSION | SECONDS | SHELLOPTS | SHLVL | SRANDOM | UID) continue ;;
    esac
    __rex_names+="$__rex_v "
    builtin declare -p -- "$__rex_v" 2>/dev/null
  done
  builtin printf '__rex_k=%q\n' "$__rex_names"
  builtin printf '%s\n' 'for __rex_v in $(builtin compgen -e); do case $__rex_k in *" $__rex_v "*) ;; *) case $__rex_v in __rex_* | REX_SESSION | TERM | COLUMNS | LINES | PWD | OLDPWD | SHLVL | _) ;; *) builtin unset -v -- "$__rex_v" ;; esac ;; esac; done; builtin unset -v __rex_k __rex_v'
  for __rex_v in $(builtin compgen -A function); do
    case $__rex_v in __rex_* | less) continue ;; esac
    builtin declare -f -- "$__rex_v"
  done
  while builtin read -r __rex_l __rex_v __rex_l; do
    [[ $__rex_v == -fx ]] && builtin printf 'builtin export -f -- %q\n' "$__rex_l"
  done < <(builtin declare -F)
  builtin printf '%s\n' 'builtin unalias -a'
  builtin alias -p
  while builtin read -r __rex_l; do
    [[ $__rex_l == *' login_shell' || $__rex_l == 'shopt -u compat'* ]] ||
      builtin printf '%s\n' "$__rex_l"
  done < <(builtin shopt -p)
  builtin umask -p
  builtin trap -p
  builtin printf 'builtin cd -- %q || builtin echo %q\n' "$PWD" \
    "rex: the session worked in $PWD, which is gone"
  [[ -v OLDPWD ]] && builtin declare -p OLDPWD
  while builtin read -r __rex_l; do
    [[ $__rex_l == *' history' || $__rex_l == *' histexpand' ]] ||
      builtin printf '%s\n' "$__rex_l"
  done < <(builtin set +o)
  builtin true
}
__rex_capture > )";

}  // namespace

std::string capture_state_command(std::string_view path) {
  std::string command(kCapture);
  command += shell_quote(path);
  command += "; builtin unset -f __rex_capture";
  return command;
}

std::string restore_state_command(std::string_view path) {
  std::string command = "builtin source ";
  command += shell_quote(path);
  return command;
}

std::string moved_paths(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty() || from == to)
    return std::string(text);
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t hit = text.find(from, at);
    if (hit == std::string_view::npos)
      break;
    const std::size_t end = hit + from.size();
    const bool whole = end == text.size() ||
                       std::string_view("/\"':\n )").find(text[end]) != std::string_view::npos;
    out.append(text.substr(at, hit - at));
    out.append(whole ? to : from);
    at = end;
  }
  out.append(text.substr(at));
  return out;
}

std::string captured_cwd(std::string_view state) {
  if (!state.starts_with(kCwdLine))
    return {};
  state.remove_prefix(kCwdLine.size());
  return std::string(state.substr(0, state.find('\n')));
}

}  // namespace rex
