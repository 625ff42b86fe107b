// SandboxPoolConfig: what a SandboxPool starts, how many at once, how it retries a start that
// fails and what it does with a sandbox handed back. Plain settings with defaults; check them
// with validate() (the pool does so when made).
#pragma once

#include <rex/backends/backends.hpp>
#include <rex/core/backoff.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/sandbox_deployment.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

namespace rex {

/// What happens to a sandbox whose lease ends.
enum class ReturnPolicy {
  // The runtime's close() ends every session, a health check follows, and the sandbox goes
  // back to the spares (beyond warm_spares only for surplus_idle_timeout). Fast; files written
  // in the sandbox stay.
  recycle,
  // The sandbox is stopped; a fresh one is started when spares or waiters want one.
  stop,
};

/// "recycle" or "stop".
std::string_view to_string(ReturnPolicy policy) noexcept;

/// Makes a deployment that has not started yet (for tests, or deployments no config describes).
using DeploymentFactory = std::function<std::unique_ptr<Deployment>(asio::any_io_executor)>;

struct SandboxPoolConfig {
  DeploymentConfig deployment =
      default_deployment_config();  // what to start, unless factory is set
  DeploymentFactory factory{};      // when set, used instead of make_deployment(deployment)

  std::size_t max_sandboxes = 8;  // started or starting at once: leased + spare + in transit
  std::size_t warm_spares = 0;    // started ahead of demand, kept topped up within the maximum
  // Once more than warm_spares spares (e.g. sandboxes handed back that nobody waits for) have
  // been idle this long, the longest idle are stopped; 0: at once. The pause lets a caller that
  // hands a sandbox back and acquires again right away (a fan_out job that ends with
  // release()) reuse it.
  std::chrono::milliseconds surplus_idle_timeout{1000};

  int start_attempts = 3;  // start() calls per sandbox before acquire() gives up
  // Wait before attempt n+1 (rex::Backoff, as the HTTP client's retries): initial_delay *
  // multiplier^(n-1), at most max_delay, then up to `jitter` of it taken off at random so many
  // failing starts do not retry in step.
  Backoff retry_backoff{.initial_delay = std::chrono::milliseconds(200),
                        .max_delay = std::chrono::milliseconds(5000),
                        .multiplier = 2.0,
                        .jitter = 0.2};

  ReturnPolicy return_policy = ReturnPolicy::recycle;

  bool health_check_on_acquire = true;  // is_alive before a spare is handed out
  // is_alive (and recycling's close()) must answer within this.
  std::chrono::milliseconds health_check_timeout{5000};
};

/// std::invalid_argument naming the field for settings that cannot work:
/// "SandboxPoolConfig.max_sandboxes: must be at least 1".
void validate(const SandboxPoolConfig& config);

/// The wait before the attempt after `failed_attempts` failures (1 or more); `random01` in
/// [0, 1) picks the jitter: backoff_delay(config.retry_backoff, ...) rounded up to whole
/// milliseconds. Pure, so the schedule can be tested without waiting.
std::chrono::milliseconds retry_delay(const SandboxPoolConfig& config, int failed_attempts,
                                      double random01) noexcept;

/// Settings of a pool whose every sandbox is a fork of `checkpoint` (taken of `source`, whose
/// backend and settings they share): each acquire() gets a fork of its own, started from the
/// checkpoint with its sessions restored, and stopped when its lease ends (a fork serves one job:
/// an RL group's rollouts from one state). OperationUnsupportedError for a backend without
/// checkpoints.
SandboxPoolConfig forks_of(const SandboxDeployment& source, Checkpoint checkpoint,
                           std::size_t max_sandboxes = 8, std::size_t warm_spares = 0);

}  // namespace rex
