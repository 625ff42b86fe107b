// The start() that the deployments of a cloud's sandbox (fargate, daytona, modal) share around
// their own calls. Internal to the library.
#pragma once

#include <rex/deployment/deployment.hpp>

#include <fmt/format.h>
#include <boost/asio/awaitable.hpp>

#include <exception>
#include <functional>
#include <string>
#include <string_view>

namespace rex::detail {

/// Awaits `starting`; when it fails, awaits `clean_up` (which removes what the start made) and
/// throws DeploymentStartupError: the start's message (`kind: ` before one that is not a
/// DeploymentStartupError already), and "(and <undoing()> failed: ...)" when the clean-up failed
/// too.
inline asio::awaitable<void> start_or_clean_up(std::string_view kind,
                                               asio::awaitable<void> starting,
                                               std::function<asio::awaitable<void>()> clean_up,
                                               std::function<std::string()> undoing) {
  std::string failure;
  try {
    co_await std::move(starting);
  } catch (const DeploymentStartupError& e) {
    failure = e.what();
  } catch (const std::exception& e) {
    failure = fmt::format("{}: {}", kind, e.what());
  }
  if (failure.empty())
    co_return;
  try {
    auto cleaning = clean_up();
    co_await std::move(cleaning);
  } catch (const std::exception& e) {
    failure += fmt::format(" (and {} failed: {})", undoing(), e.what());
  }
  throw DeploymentStartupError(failure);
}

}  // namespace rex::detail
