#include <rex/core/text.hpp>

#include <fmt/format.h>

namespace rex {

std::string seconds_text(std::chrono::duration<double> duration) {
  return fmt::format("{:g} s", duration.count());
}

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  out += '\'';
  return out;
}

}  // namespace rex
