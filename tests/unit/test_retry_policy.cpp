// The HTTP client's retry policy: growing, capped, jittered delays, and which failures are retried.
#include <rex/http/retry_policy.hpp>

#include <gtest/gtest.h>
#include <boost/asio/error.hpp>
#include <boost/beast/http/error.hpp>

#include <cerrno>
#include <chrono>

namespace rex::http {
namespace {

using namespace std::chrono_literals;

TEST(RetryPolicy, DelaysGrowAreCappedAndJittered) {
  const RetryPolicy p{
      .max_retries = 5,
      .backoff = {.initial_delay = 100ms, .max_delay = 1s, .multiplier = 3.0, .jitter = 0.5}};
  EXPECT_EQ(retry_delay(p, 1, 0.0), 100ms);
  EXPECT_EQ(retry_delay(p, 2, 0.0), 300ms);
  EXPECT_EQ(retry_delay(p, 3, 0.0), 900ms);
  EXPECT_EQ(retry_delay(p, 4, 0.0), 1000ms);  // capped
  EXPECT_EQ(retry_delay(p, 40, 0.0), 1000ms);
  EXPECT_EQ(retry_delay(p, 2, 0.5), 225ms);    // 300 * (1 - 0.5 * 0.5)
  EXPECT_EQ(retry_delay(p, 2, 0.999), 150ms);  // never below half with jitter 0.5
  RetryPolicy no_jitter = p;
  no_jitter.backoff.jitter = 0.0;
  EXPECT_EQ(retry_delay(no_jitter, 2, 0.9), 300ms);
}

TEST(RetryPolicy, OnlyConnectionFailuresAreRetryable) {
  namespace error = boost::asio::error;
  EXPECT_TRUE(is_connection_failure(error::connection_refused));
  EXPECT_TRUE(is_connection_failure(error::connection_reset));
  EXPECT_TRUE(is_connection_failure(error::broken_pipe));
  EXPECT_TRUE(is_connection_failure(error::eof));
  EXPECT_TRUE(is_connection_failure(error::host_unreachable));
  EXPECT_TRUE(is_connection_failure(error::network_unreachable));
  EXPECT_TRUE(
      is_connection_failure(boost::system::error_code(ENOENT, boost::system::system_category())));
  EXPECT_FALSE(is_connection_failure(error::operation_aborted));
  EXPECT_FALSE(is_connection_failure(error::timed_out));
  EXPECT_FALSE(is_connection_failure(error::host_not_found));
  EXPECT_FALSE(is_connection_failure(boost::beast::http::error::bad_version));
  EXPECT_FALSE(is_connection_failure(boost::system::error_code()));
}

}  // namespace
}  // namespace rex::http
