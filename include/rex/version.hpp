// The library's version.
#pragma once

#include <string_view>

namespace rex {

inline constexpr std::string_view version() noexcept {
  return "0.1.0";
}

}  // namespace rex
