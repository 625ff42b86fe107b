#include "core/process_end.hpp"

#include <rex/core/text.hpp>

#include <sys/wait.h>

#include <fmt/format.h>

#include <cstring>
#include <string>

namespace rex::detail {

std::optional<int> end_code(int wait_status) noexcept {
  if (WIFEXITED(wait_status))
    return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status))
    return -WTERMSIG(wait_status);
  return std::nullopt;
}

ProcessEnd process_end(const std::optional<int>& code) {
  ProcessEnd end;
  if (!code) {
    end.status = "unknown";
  } else if (*code >= 0) {
    end.exit_code = *code;
    end.status = fmt::format("exit status {}", *code);
  } else {
    end.signal = -*code;
    const char* name = ::strsignal(-*code);
    end.status = "signal: " + ascii_lower(name != nullptr ? name : std::to_string(-*code));
  }
  return end;
}

}  // namespace rex::detail
