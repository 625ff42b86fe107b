#include <rex/http/retry_policy.hpp>

#include <boost/asio/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>

namespace rex::http {

std::chrono::milliseconds retry_delay(const RetryPolicy& policy, unsigned retry, double random01) {
  const double initial = static_cast<double>(policy.initial_delay.count());
  const double cap = static_cast<double>(policy.max_delay.count());
  const double growth = std::pow(std::max(policy.multiplier, 1.0), retry > 0 ? retry - 1 : 0);
  const double base = std::min(cap, initial * growth);
  const double jitter = std::clamp(policy.jitter, 0.0, 1.0);
  const double scaled = base * (1.0 - jitter * std::clamp(random01, 0.0, 1.0));
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(std::max(scaled, 0.0))));
}

bool is_connection_failure(const boost::system::error_code& error) {
  namespace error_ns = boost::asio::error;
  if (error == error_ns::connection_refused || error == error_ns::connection_reset ||
      error == error_ns::connection_aborted || error == error_ns::broken_pipe ||
      error == error_ns::eof || error == error_ns::host_unreachable ||
      error == error_ns::network_unreachable || error == error_ns::network_down ||
      error == error_ns::network_reset || error == error_ns::host_not_found_try_again ||
      error == error_ns::not_connected) {
    return true;
  }
  // A unix socket whose file the server has not created yet.
  return error == boost::system::error_code(ENOENT, boost::system::system_category());
}

}  // namespace rex::http
