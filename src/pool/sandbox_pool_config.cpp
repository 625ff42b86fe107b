#include <rex/pool/pool_errors.hpp>
#include <rex/pool/sandbox_pool_config.hpp>

#include <fmt/format.h>

#include <algorithm>
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
  if (config.retry_backoff_initial.count() < 0)
    refuse("retry_backoff_initial", "must not be negative");
  if (config.retry_backoff_max < config.retry_backoff_initial)
    refuse("retry_backoff_max", "must not be less than retry_backoff_initial");
  if (!(config.retry_jitter >= 0 && config.retry_jitter <= 1))
    refuse("retry_jitter", fmt::format("must be between 0 and 1, got {}", config.retry_jitter));
  if (config.health_check_timeout.count() <= 0)
    refuse("health_check_timeout", "must be positive");
}

std::chrono::milliseconds retry_delay(const SandboxPoolConfig& config, int failed_attempts,
                                      double random01) noexcept {
  using std::chrono::milliseconds;
  const auto cap = config.retry_backoff_max.count();
  auto delay = config.retry_backoff_initial.count();
  for (int i = 1; i < failed_attempts && delay < cap; ++i)
    delay *= 2;
  delay = std::min(delay, cap);
  const double r = std::clamp(random01, 0.0, 1.0);
  const auto jitter =
      static_cast<milliseconds::rep>(static_cast<double>(delay) * config.retry_jitter * r);
  return milliseconds(delay - jitter);
}

SandboxStartError::SandboxStartError(int attempts, std::string cause)
    : std::runtime_error(fmt::format("sandbox failed to start after {} attempt{}: {}", attempts,
                                     attempts == 1 ? "" : "s", cause)),
      attempts_(attempts),
      cause_(std::move(cause)) {}

}  // namespace rex
