#include "gateway/backend_provider.hpp"

#include <rex/core/random.hpp>
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
  request.own_image = env.own_image;
  request.name = fmt::format("rex-{}-{}", gateway_id_.substr(0, 12), spec.session_id);
  request.purpose = fmt::format("environment {}", env.name);
  if (!spec.image.empty()) {
    request.image = std::move(spec.image);
    request.own_image = true;
    request.purpose += " from a checkpoint";
    // A rewind's or resume's sandbox starts while the session's old one may still exist.
    request.name += "-" + random_hex(3);
  }
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

bool BackendProvider::can(SandboxOperation operation) const noexcept {
  return backend_->can(operation);
}

asio::awaitable<std::string> BackendProvider::checkpoint(
    std::string sandbox_id, std::map<std::string, std::string> labels) {
  labels[std::string(labels::gateway)] = gateway_id_;
  auto saving = backend_->checkpoint(std::move(sandbox_id), std::move(labels));
  auto saved = rex::detail::failing_as<ProviderError>("", std::move(saving));
  SandboxSnapshot snapshot = co_await std::move(saved);
  co_return std::move(snapshot.image);
}

asio::awaitable<void> BackendProvider::remove_checkpoint(std::string image) {
  auto removing = backend_->remove_checkpoint(std::move(image));
  auto removed = rex::detail::failing_as<ProviderError>("", std::move(removing));
  co_await std::move(removed);
}

asio::awaitable<std::vector<SandboxInfo>> BackendProvider::list_checkpoints() {
  std::map<std::string, std::string> mine{{std::string(labels::gateway), gateway_id_}};
  auto listing = backend_->list_checkpoints(std::move(mine));
  auto listed = rex::detail::failing_as<ProviderError>("", std::move(listing));
  co_return co_await std::move(listed);
}

asio::awaitable<void> BackendProvider::pause(std::string sandbox_id) {
  auto pausing = backend_->pause(std::move(sandbox_id));
  auto paused = rex::detail::failing_as<ProviderError>("", std::move(pausing));
  co_await std::move(paused);
}

asio::awaitable<void> BackendProvider::resume(std::string sandbox_id) {
  auto resuming = backend_->resume(std::move(sandbox_id));
  auto resumed = rex::detail::failing_as<ProviderError>("", std::move(resuming));
  co_await std::move(resumed);
}

asio::awaitable<SandboxMetrics> BackendProvider::metrics(std::string sandbox_id) {
  auto measuring = backend_->metrics(std::move(sandbox_id));
  auto measured = rex::detail::failing_as<ProviderError>("", std::move(measuring));
  co_return co_await std::move(measured);
}

asio::awaitable<std::string> BackendProvider::build_image(ImageBuild build) {
  build.labels[std::string(labels::gateway)] = gateway_id_;
  auto building = backend_->build_image(std::move(build));
  auto built = rex::detail::failing_as<ProviderError>("", std::move(building));
  co_return co_await std::move(built);
}

asio::awaitable<std::optional<std::string>> BackendProvider::image_id(std::string name) {
  auto asking = backend_->image_id(std::move(name));
  auto asked = rex::detail::failing_as<ProviderError>("", std::move(asking));
  co_return co_await std::move(asked);
}

asio::awaitable<std::vector<SandboxInfo>> BackendProvider::list_built_images() {
  std::map<std::string, std::string> mine{{std::string(labels::gateway), gateway_id_}};
  auto listing = backend_->list_built_images(std::move(mine));
  auto listed = rex::detail::failing_as<ProviderError>("", std::move(listing));
  co_return co_await std::move(listed);
}

void BackendProvider::configure_client(const std::string& url, http::ClientConfig& client) const {
  backend_->configure_client(url, client);
}

}  // namespace rex::gateway
