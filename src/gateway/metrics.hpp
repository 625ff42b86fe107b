// The gateway's counters, as GET /metrics shows them (Prometheus' text format): requests by
// route, error answers by code, the time creates took, and the sessions by state and provider.
// Counted on the gateway's io_context; nothing here does I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rex::gateway {

class SessionTable;

class Metrics {
 public:
  /// The counter of a route's requests, made on first use; it stays where it is (a route keeps
  /// the pointer and counts without a lookup).
  std::uint64_t* requests_of(const std::string& route) { return &requests_[route]; }
  void count_request(const std::string& route) { ++requests_[route]; }
  void count_error(const std::string& code) { ++errors_[code]; }
  /// A create that ended with a ready sandbox after `seconds`.
  void count_create(double seconds);

  /// The text of GET /metrics, the sessions counted from `sessions`.
  std::string text(const SessionTable& sessions) const;

 private:
  static constexpr double kCreateBuckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  std::map<std::string, std::uint64_t, std::less<>> requests_;  // by route pattern
  std::map<std::string, std::uint64_t, std::less<>> errors_;    // by code
  std::uint64_t creates_ = 0;
  double create_seconds_sum_ = 0;
  std::uint64_t create_bucket_counts_[std::size(kCreateBuckets)] = {};
};

}  // namespace rex::gateway
