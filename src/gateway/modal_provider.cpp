#include <rex/gateway/modal_provider.hpp>

#include <rex/deployment/modal_deployment.hpp>

#include "gateway/handed_over.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace rex::gateway {

namespace {

using detail::kGatewayKey;
using detail::kSessionKey;

}  // namespace

struct ModalProvider::Impl {
  asio::any_io_executor executor;
  ModalProviderConfig config;

  ModalDeploymentConfig deployment_config() const {
    ModalDeploymentConfig d;
    d.token_id = config.token_id;
    d.token_secret = config.token_secret;
    d.server_url = config.server_url;
    d.environment = config.environment;
    d.app_name = config.app_name;
    d.ca_file = config.ca_file;
    d.server_path = config.server_path;
    d.startup_timeout = config.startup_timeout;
    return d;
  }
};

ModalProvider::ModalProvider(asio::any_io_executor executor, ModalProviderConfig config)
    : impl_(std::make_unique<Impl>(Impl{std::move(executor), std::move(config)})) {
  // The token and URL as the deployment resolves them: a missing token fails the gateway's start.
  const ModalDeployment probe(impl_->executor, impl_->deployment_config());
  impl_->config.token_id = probe.config().token_id;
  impl_->config.token_secret = probe.config().token_secret;
  impl_->config.server_url = probe.config().server_url;
  impl_->config.environment = probe.config().environment;
}

ModalProvider::~ModalProvider() = default;

asio::awaitable<SandboxAddress> ModalProvider::create(SandboxSpec spec) {
  ModalDeploymentConfig d = impl_->deployment_config();
  if (!spec.environment.image.empty())
    d.image = spec.environment.image;
  d.env = spec.env;
  d.labels = {{std::string(kGatewayKey), impl_->config.gateway_id},
              {std::string(kSessionKey), spec.session_id}};
  d.deployment_timeout =
      std::clamp(spec.max_lifetime > 0 ? spec.max_lifetime : 3600.0, 1.0, 86400.0);
  auto handing = detail::start_and_hand_over<ModalDeployment>(impl_->executor, std::move(d),
                                                              spec.environment.working_dir);
  co_return co_await std::move(handing);
}

asio::awaitable<void> ModalProvider::destroy(std::string sandbox_id) {
  std::string failure;
  try {
    auto ending = terminate_modal_sandbox(impl_->executor, impl_->deployment_config(), sandbox_id);
    co_await std::move(ending);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(fmt::format("modal: cannot end sandbox {}: {}", sandbox_id, failure));
}

asio::awaitable<std::vector<SandboxListing>> ModalProvider::list() {
  std::vector<ModalSandboxListing> found;
  std::string failure;
  try {
    auto listing = list_modal_sandboxes(impl_->executor, impl_->deployment_config(),
                                        {{std::string(kGatewayKey), impl_->config.gateway_id}});
    found = co_await std::move(listing);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError("modal: listing sandboxes: " + failure);
  std::vector<SandboxListing> out;
  for (auto& f : found) {
    SandboxListing s;
    s.sandbox_id = std::move(f.sandbox_id);
    if (const auto it = f.tags.find(std::string(kSessionKey)); it != f.tags.end())
      s.session_id = it->second;
    s.running = f.running;
    s.created_at = f.created_at;
    out.push_back(std::move(s));
  }
  co_return out;
}

void ModalProvider::configure_client(const std::string& url, http::ClientConfig& client) const {
  (void)url;
  client.ca_file = impl_->config.ca_file;  // the tunnels' certificates (a test's own CA)
}

}  // namespace rex::gateway
