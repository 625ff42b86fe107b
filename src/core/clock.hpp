// Time as rex's layers write it: the wall clock in whole Unix seconds (sandboxes' labels, gc
// rules), a cloud's ISO 8601 time stamps, seconds as a double for timeouts and durations.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace rex::detail {

inline std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// "2026-11-24T23:10:56.759Z" (the clouds' createdAt, startedAt) as Unix seconds, its fraction
/// and zone dropped (they write UTC); 0 when it is not that form.
inline double unix_seconds(std::string_view iso) {
  std::tm tm{};
  const std::string text(iso.substr(0, 19));
  if (::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr)
    return 0;
  return static_cast<double>(::timegm(&tm));
}

/// A duration given in seconds (settings, timeouts) as milliseconds, truncated.
inline std::chrono::milliseconds seconds_to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

inline std::chrono::milliseconds seconds_to_ms(std::chrono::duration<double> seconds) {
  return seconds_to_ms(seconds.count());
}

/// Seconds from `t0` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace rex::detail
