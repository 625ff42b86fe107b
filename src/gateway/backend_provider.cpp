#include "gateway/backend_provider.hpp"

#include <rex/deployment/deployment.hpp>
#include <rex/deployment/gc.hpp>

#include <fmt/format.h>

#include "deployment/hand_over.hpp"

namespace rex::gateway {

BackendProvider::BackendProvider(std::unique_ptr<SandboxBackend> backend, std::string gateway_id)
    : backend_(std::move(backend)), gateway_id_(std::move(gateway_id)) {}

std::string_view BackendProvider::name() const noexcept {
  return backend_->name();
}

asio::awaitable<SandboxAddress> BackendProvider::create(SandboxSpec spec) {
  const Environment& env = spec.environment;
  SandboxRequest request;
  request.image = env.image;
  request.template_name = env.e2b_template;
  request.env = std::move(spec.env);
  request.labels = {{std::string(labels::gateway), gateway_id_},
                    {std::string(labels::session), spec.session_id}};
  request.lifetime = Seconds(spec.max_lifetime);
  request.working_dir = env.working_dir;
  request.memory = env.memory;
  request.cpus = env.cpus;
  request.network = env.network;
  request.mounts = env.mounts;
  request.name = fmt::format("rex-{}-{}", gateway_id_.substr(0, 12), spec.session_id);
  request.purpose = fmt::format("environment {}", env.name);
  auto creating = backend_->create(std::move(request));
  auto created = rex::detail::failing_as<ProviderError>("", std::move(creating));
  StartedSandbox started = co_await std::move(created);
  SandboxAddress address;
  address.sandbox_id = std::move(started.id);
  address.url = std::move(started.url);
  address.token = std::move(started.token);
  address.headers = std::move(started.headers);
  address.working_dir = std::move(started.working_dir);
  // A container's own file system: the gateway's files at one place; elsewhere one per session.
  if (started.own_filesystem)
    address.scratch_dir = std::string(kSandboxScratchDir);
  co_return address;
}

asio::awaitable<void> BackendProvider::destroy(std::string sandbox_id) {
  auto destroying = backend_->destroy(std::move(sandbox_id));
  auto destroyed = rex::detail::failing_as<ProviderError>("", std::move(destroying));
  co_await std::move(destroyed);
}

asio::awaitable<std::vector<SandboxListing>> BackendProvider::list() {
  std::map<std::string, std::string> mine{{std::string(labels::gateway), gateway_id_}};
  auto listing = backend_->list(std::move(mine));
  auto listed = rex::detail::failing_as<ProviderError>("", std::move(listing));
  std::vector<SandboxInfo> found = co_await std::move(listed);
  std::vector<SandboxListing> out;
  for (auto& s : found) {
    SandboxListing l;
    l.sandbox_id = std::move(s.id);
    if (const auto it = s.labels.find(std::string(labels::session)); it != s.labels.end())
      l.session_id = it->second;
    l.running = s.running;
    l.created_at = s.created_at;
    out.push_back(std::move(l));
  }
  co_return out;
}

void BackendProvider::configure_client(const std::string& url, http::ClientConfig& client) const {
  backend_->configure_client(url, client);
}

}  // namespace rex::gateway
