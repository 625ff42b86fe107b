#include <rex/gateway/daytona_provider.hpp>

#include <rex/deployment/daytona_deployment.hpp>
#include <rex/kubernetes/object_fields.hpp>

#include "core/clock.hpp"
#include "gateway/handed_over.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>

namespace rex::gateway {

namespace json = boost::json;

namespace {

using detail::kGatewayKey;
using detail::kSessionKey;

using rex::detail::unix_seconds;

}  // namespace

struct DaytonaProvider::Impl {
  asio::any_io_executor executor;
  DaytonaProviderConfig config;

  DaytonaDeploymentConfig deployment_config() const {
    DaytonaDeploymentConfig d;
    d.api_key = config.api_key;
    d.api_url = config.api_url;
    d.target = config.target;
    d.server_path = config.server_path;
    d.startup_timeout = config.startup_timeout;
    return d;
  }
};

DaytonaProvider::DaytonaProvider(asio::any_io_executor executor, DaytonaProviderConfig config)
    : impl_(std::make_unique<Impl>(Impl{std::move(executor), std::move(config)})) {
  // The key and URL as the deployment resolves them: a missing key fails the gateway's start.
  const DaytonaDeployment probe(impl_->executor, impl_->deployment_config());
  impl_->config.api_key = probe.config().api_key;
  impl_->config.api_url = probe.config().api_url;
  impl_->config.target = probe.config().target;
}

DaytonaProvider::~DaytonaProvider() = default;

asio::awaitable<SandboxAddress> DaytonaProvider::create(SandboxSpec spec) {
  DaytonaDeploymentConfig d = impl_->deployment_config();
  if (!spec.environment.image.empty())
    d.image = spec.environment.image;
  d.env = spec.env;
  d.labels = {{std::string(kGatewayKey), impl_->config.gateway_id},
              {std::string(kSessionKey), spec.session_id}};
  // Daytona counts whole minutes, from one.
  d.container_timeout = std::max(60.0, spec.max_lifetime > 0 ? spec.max_lifetime : 3600.0);
  d.runtime_timeout = std::min(60.0, impl_->config.startup_timeout);
  auto handing = detail::start_and_hand_over<DaytonaDeployment>(impl_->executor, std::move(d),
                                                                spec.environment.working_dir);
  co_return co_await std::move(handing);
}

asio::awaitable<void> DaytonaProvider::destroy(std::string sandbox_id) {
  std::string failure;
  try {
    auto deleting = delete_daytona_sandbox(impl_->executor, impl_->deployment_config(), sandbox_id);
    co_await std::move(deleting);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(fmt::format("daytona: cannot delete sandbox {}: {}", sandbox_id, failure));
}

asio::awaitable<std::vector<SandboxListing>> DaytonaProvider::list() {
  json::array found;
  std::string failure;
  try {
    auto listing = list_daytona_sandboxes(impl_->executor, impl_->deployment_config(),
                                          {{std::string(kGatewayKey), impl_->config.gateway_id}});
    found = co_await std::move(listing);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError("daytona: listing sandboxes: " + failure);
  std::vector<SandboxListing> out;
  for (const auto& item : found) {
    const std::string state = kubernetes::field_text(item, {"state"});
    if (state == "destroyed" || state == "destroying")
      continue;  // gone, or going: nothing to adopt or remove
    SandboxListing s;
    s.sandbox_id = kubernetes::field_text(item, {"id"});
    s.session_id = kubernetes::field_text(item, {"labels", std::string_view(kSessionKey)});
    // A sandbox still being made counts as running: its create may be in flight.
    s.running =
        state != "stopped" && state != "error" && state != "build_failed" && state != "archived";
    s.created_at = unix_seconds(kubernetes::field_text(item, {"createdAt"}));
    if (!s.sandbox_id.empty())
      out.push_back(std::move(s));
  }
  co_return out;
}

}  // namespace rex::gateway
