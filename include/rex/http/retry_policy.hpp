// RetryPolicy: when and how soon an HTTP client tries again after a connection failure.
//
// Only failures that happened before any byte of an answer arrived are retried (refused, reset,
// unreachable, a unix socket that does not exist yet): the server gave no answer that a retry
// could contradict. An HTTP answer, whatever its status, is never retried, and neither is a
// timeout. Delays grow exponentially, are capped, and are scaled down by a random factor so that
// many clients started together do not retry in lock-step.
#pragma once

#include <rex/core/backoff.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>

namespace rex::http {

struct RetryPolicy {
  unsigned max_retries = 3;  // attempts after the first
  Backoff backoff{};         // the delays between them
};

/// The delay before retry number `retry` (1 for the first), given `random01` drawn uniformly
/// from [0, 1): backoff_delay(policy.backoff, ...) rounded to whole milliseconds.
std::chrono::milliseconds retry_delay(const RetryPolicy& policy, unsigned retry, double random01);

/// True for errors that mean the connection could not be made or was lost before the server
/// answered anything: refused, reset, aborted, broken pipe, end of stream, unreachable host or
/// network, a missing unix socket file (the server has not created it yet), a temporary name
/// resolution failure.
bool is_connection_failure(const boost::system::error_code& error);

}  // namespace rex::http
