#include <rex/http/retry_policy.hpp>

#include <boost/asio/error.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>

namespace rex::http {

std::chrono::milliseconds retry_delay(const RetryPolicy& policy, unsigned retry, double random01) {
  const auto exact = backoff_delay(policy.backoff, retry, random01);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(exact.count())));
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
