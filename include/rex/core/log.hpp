// Logging for every layer of rex: messages are formatted with fmt where they are written and
// handed to one sink (spdlog, behind src/core/log.cpp, so that only that file compiles it).
//
// A message below the threshold costs one relaxed atomic load: its arguments are not formatted.
// Threading: every function may be called from any thread.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <optional>
#include <string_view>
#include <utility>

namespace rex::logging {

enum class Level : int { trace, debug, info, warn, error, off };

/// "trace", "debug", "info", "warn", "error" or "off"; nullopt for anything else.
std::optional<Level> parse_level(std::string_view name) noexcept;

/// Messages below `level` are dropped from now on (the default is info).
void set_level(Level level) noexcept;

/// From now on messages go to stderr as "<prefix><message>", nothing else on the line.
void use_plain_stderr(std::string_view prefix);

/// Writes one message at `level`, whatever the threshold.
void write(Level level, std::string_view message);

namespace detail {
inline std::atomic<int> threshold{static_cast<int>(Level::info)};
}  // namespace detail

inline bool enabled(Level level) noexcept {
  return static_cast<int>(level) >= detail::threshold.load(std::memory_order_relaxed);
}

template <class... Args>
void log(Level level, fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(level))
    write(level, fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::debug, format, std::forward<Args>(args)...);
}
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::info, format, std::forward<Args>(args)...);
}
template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::warn, format, std::forward<Args>(args)...);
}
template <class... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  log(Level::error, format, std::forward<Args>(args)...);
}

}  // namespace rex::logging
