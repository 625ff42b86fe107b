#include "gateway/metrics.hpp"

#include <fmt/format.h>

#include <utility>

#include "gateway/session_table.hpp"

namespace rex::gateway {

void Metrics::count_create(double seconds) {
  ++creates_;
  create_seconds_sum_ += seconds;
  for (std::size_t i = 0; i < std::size(kCreateBuckets); ++i)
    create_bucket_counts_[i] += seconds <= kCreateBuckets[i] ? 1 : 0;
}

std::string Metrics::text(const SessionTable& sessions) const {
  std::map<std::pair<std::string, std::string>, std::size_t> by;
  for (const auto& [id, e] : sessions)
    by[{e.rec.state, e.rec.provider}]++;
  std::string out;
  out += "# HELP rex_gateway_sessions Sessions by state and provider.\n";
  out += "# TYPE rex_gateway_sessions gauge\n";
  for (const auto& [key, n] : by)
    out += fmt::format("rex_gateway_sessions{{state=\"{}\",provider=\"{}\"}} {}\n", key.first,
                       key.second, n);
  out += "# HELP rex_gateway_create_seconds Time from create to a ready sandbox.\n";
  out += "# TYPE rex_gateway_create_seconds histogram\n";
  for (std::size_t i = 0; i < std::size(kCreateBuckets); ++i)
    out += fmt::format("rex_gateway_create_seconds_bucket{{le=\"{}\"}} {}\n", kCreateBuckets[i],
                       create_bucket_counts_[i]);
  out += fmt::format("rex_gateway_create_seconds_bucket{{le=\"+Inf\"}} {}\n", creates_);
  out += fmt::format("rex_gateway_create_seconds_sum {}\n", create_seconds_sum_);
  out += fmt::format("rex_gateway_create_seconds_count {}\n", creates_);
  out += "# HELP rex_gateway_requests_total Requests by route.\n";
  out += "# TYPE rex_gateway_requests_total counter\n";
  for (const auto& [route, n] : requests_)
    out += fmt::format("rex_gateway_requests_total{{route=\"{}\"}} {}\n", route, n);
  out += "# HELP rex_gateway_errors_total Error answers by code.\n";
  out += "# TYPE rex_gateway_errors_total counter\n";
  for (const auto& [code, n] : errors_)
    out += fmt::format("rex_gateway_errors_total{{code=\"{}\"}} {}\n", code, n);
  return out;
}

}  // namespace rex::gateway
