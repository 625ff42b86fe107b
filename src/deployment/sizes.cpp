// Sizes as Docker writes them ("512m", "2g"), for every backend's memory settings.
#include <rex/core/text.hpp>
#include <rex/deployment/sizes.hpp>

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>

namespace rex {

namespace {

double number_of(std::string_view text, std::string_view what) {
  double value = 0;
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || p != end || text.empty() || !std::isfinite(value))
    throw DeploymentConfigError(fmt::format("{}: '{}' is not a number", what, text));
  return value;
}

}  // namespace

std::int64_t parse_size(std::string_view text, std::string_view what) {
  std::size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  if (digits == 0)
    throw DeploymentConfigError(
        fmt::format("{}: '{}' is not a size (examples: 512m, 2g, 1048576)", what, text));
  const double number = number_of(text.substr(0, digits), what);
  const std::string unit = ascii_lower(text.substr(digits));
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    throw DeploymentConfigError(
        fmt::format("{}: '{}' has an unknown unit '{}' (use b, k, m, g or t)", what, text,
                    text.substr(digits)));
  return static_cast<std::int64_t>(std::llround(number * scale));
}

}  // namespace rex
