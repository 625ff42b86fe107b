#include <rex/pool/pool_errors.hpp>
#include <rex/pool/sandbox_pool_config.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace rex {

std::string_view to_string(ReturnPolicy policy) noexcept {
  return policy == ReturnPolicy::stop ? "stop" : "recycle";
}

namespace {
[[noreturn]] void refuse(std::string_view field, std::string_view problem) {
  throw std::invalid_argument(fmt::format("SandboxPoolConfig.{}: {}", field, problem));
}
}  // namespace

void validate(const SandboxPoolConfig& config) {
  if (config.max_sandboxes < 1)
    refuse("max_sandboxes", "must be at least 1");
  if (config.warm_spares > config.max_sandboxes)
    refuse("warm_spares", fmt::format("{} is more than max_sandboxes ({})", config.warm_spares,
                                      config.max_sandboxes));
  if (config.surplus_idle_timeout.count() < 0)
    refuse("surplus_idle_timeout", "must not be negative");
  if (config.start_attempts < 1)
    refuse("start_attempts", fmt::format("must be at least 1, got {}", config.start_attempts));
  const Backoff& backoff = config.retry_backoff;
  if (backoff.initial_delay.count() < 0)
    refuse("retry_backoff.initial_delay", "must not be negative");
  if (backoff.max_delay < backoff.initial_delay)
    refuse("retry_backoff.max_delay", "must not be less than retry_backoff.initial_delay");
  if (!(backoff.multiplier >= 1))
    refuse("retry_backoff.multiplier",
           fmt::format("must be at least 1, got {}", backoff.multiplier));
  if (!(backoff.jitter >= 0 && backoff.jitter <= 1))
    refuse("retry_backoff.jitter", fmt::format("must be between 0 and 1, got {}", backoff.jitter));
  if (config.health_check_timeout.count() <= 0)
    refuse("health_check_timeout", "must be positive");
}

std::chrono::milliseconds retry_delay(const SandboxPoolConfig& config, int failed_attempts,
                                      double random01) noexcept {
  const auto retry = static_cast<unsigned>(std::max(failed_attempts, 1));
  const auto exact = backoff_delay(config.retry_backoff, retry, random01);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(exact.count())));
}

SandboxStartError::SandboxStartError(int attempts, std::string cause)
    : std::runtime_error(fmt::format("sandbox failed to start after {} attempt{}: {}", attempts,
                                     attempts == 1 ? "" : "s", cause)),
      attempts_(attempts),
      cause_(std::move(cause)) {}

SandboxPoolConfig forks_of(const SandboxDeployment& source, Checkpoint checkpoint,
                           std::size_t max_sandboxes, std::size_t warm_spares) {
  SandboxPoolConfig config;
  config.factory = source.fork_factory(std::move(checkpoint));
  config.max_sandboxes = max_sandboxes;
  config.warm_spares = warm_spares;
  config.return_policy = ReturnPolicy::stop;
  return config;
}

}  // namespace rex
