#include <rex/core/log.hpp>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <string>

namespace rex::logging {

namespace {

spdlog::level::level_enum to_spdlog(Level level) noexcept {
  switch (level) {
    case Level::trace:
      return spdlog::level::trace;
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warn:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
    case Level::off:
      break;
  }
  return spdlog::level::off;
}

}  // namespace

std::optional<Level> parse_level(std::string_view name) noexcept {
  constexpr std::array<std::pair<std::string_view, Level>, 6> names{{{"trace", Level::trace},
                                                                     {"debug", Level::debug},
                                                                     {"info", Level::info},
                                                                     {"warn", Level::warn},
                                                                     {"error", Level::error},
                                                                     {"off", Level::off}}};
  for (const auto& [n, level] : names)
    if (n == name)
      return level;
  return std::nullopt;
}

void set_level(Level level) noexcept {
  detail::threshold.store(static_cast<int>(level), std::memory_order_relaxed);
  spdlog::set_level(to_spdlog(level));
}

void use_plain_stderr(std::string_view prefix) {
  auto logger = spdlog::stderr_logger_mt(fmt::format("rex:{}", prefix));
  logger->set_level(to_spdlog(static_cast<Level>(detail::threshold.load())));
  // A literal % in the prefix would be read as a pattern flag.
  std::string pattern;
  for (const char c : prefix)
    pattern += c == '%' ? std::string("%%") : std::string(1, c);
  logger->set_pattern(pattern + "%v");
  spdlog::set_default_logger(std::move(logger));
}

void write(Level level, std::string_view message) {
  spdlog::log(to_spdlog(level), "{}", message);
}

}  // namespace rex::logging
