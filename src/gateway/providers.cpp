// The providers a gateway's configuration names: local always, Docker and Podman when their
// engines can be addressed, the clouds and a cluster when a section configures them (or when
// their own variables are set). Every provider but local is a backend of the backend table
// (rex/backends/backends.hpp) behind the one BackendProvider.
#include "gateway/providers.hpp"

#include <rex/backends/backends.hpp>
#include <rex/core/log.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/gateway/local_provider.hpp>

#include "gateway/backend_provider.hpp"

#include <fmt/format.h>
#include <boost/json/value_to.hpp>

#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace rex::gateway {

namespace json = boost::json;

namespace {
[[noreturn]] void unsupported(const Provider& p, std::string_view what) {
  throw ProviderError(fmt::format("the {} provider cannot {}", p.name(), what));
}
}  // namespace

asio::awaitable<std::string> Provider::checkpoint(std::string, std::map<std::string, std::string>) {
  unsupported(*this, "checkpoint a sandbox");
  co_return std::string();
}

asio::awaitable<void> Provider::remove_checkpoint(std::string) {
  unsupported(*this, "remove a checkpoint");
  co_return;
}

asio::awaitable<void> Provider::pause(std::string) {
  unsupported(*this, "pause a sandbox");
  co_return;
}

asio::awaitable<void> Provider::resume(std::string) {
  unsupported(*this, "resume a sandbox");
  co_return;
}

asio::awaitable<std::string> Provider::build_image(ImageBuild) {
  unsupported(*this, "build an image");
  co_return std::string();
}

asio::awaitable<SandboxMetrics> Provider::metrics(std::string) {
  unsupported(*this, "measure a sandbox");
  co_return SandboxMetrics{};
}

namespace {

// Adds the provider `name` over the backend of `settings`; one whose backend refuses to open
// with a `Refusal` is logged and left out (anything else it throws goes on).
template <class Refusal = std::exception>
void add(Providers& made, const std::string& name, asio::any_io_executor ex,
         const std::string& gateway_id, DeploymentConfig settings) {
  const Backend* backend = find_backend(settings.type());
  if (backend == nullptr || backend->open == nullptr) {
    logging::warn("gateway: no {} provider: this rex was built without the {} backend", name,
                  settings.type());
    return;
  }
  try {
    made[name] = std::make_unique<BackendProvider>(
        backend->open(std::move(ex), std::move(settings)), gateway_id);
  } catch (const Refusal& x) {
    logging::warn("gateway: no {} provider: {}", name, x.what());
  }
}

}  // namespace

Providers make_providers(asio::any_io_executor ex, const GatewayConfig& cfg,
                         const std::filesystem::path& storage, const std::string& gateway_id,
                         std::string server_executable) {
  Providers made;
  LocalProviderConfig local;
  local.root = storage / "sandboxes";
  local.gateway_id = gateway_id;
  // The static rex-server beside this executable starts in a third of the time `rex server`
  // takes (no dynamic linking); the rex executable's own `server` otherwise.
  try {
    local.server_command = {find_rex_server("")};
  } catch (const std::exception&) {
    local.server_command = {std::move(server_executable), "server"};
  }
  made["local"] = std::make_unique<LocalProvider>(ex, std::move(local));
  // Docker and Podman where their engines can be addressed.
  for (const auto& [name, engine] :
       {std::pair{"docker", &cfg.docker_engine}, std::pair{"podman", &cfg.podman_engine}}) {
    json::object fields = *backend_base_config(name);
    const Backend* backend = find_backend(json::value_to<std::string>(fields.at("type")));
    fields.erase("type");
    fields.emplace("engine", *engine);
    add<std::invalid_argument>(made, name, ex, gateway_id,
                               provider_settings(*backend, std::move(fields)));
  }
  // The sections of the configuration, and the backends their own variables imply.
  for (const auto& [name, settings] : cfg.providers)
    add(made, name, ex, gateway_id, settings);
  for (const Backend& backend : backends()) {
    if (!backend.implied_by.empty() && !made.contains(std::string(backend.name)) &&
        std::getenv(std::string(backend.implied_by).c_str()) != nullptr)
      add(made, std::string(backend.name), ex, gateway_id,
          provider_settings(backend, json::object()));
  }
  return made;
}

}  // namespace rex::gateway
