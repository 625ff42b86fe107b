// The providers of a gateway (providers.cpp), made from its configuration.
#pragma once

#include <rex/gateway/gateway_config.hpp>
#include <rex/gateway/provider.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace rex::gateway {

/// A gateway's providers by name.
using Providers = std::map<std::string, std::unique_ptr<Provider>, std::less<>>;

/// local (its sandboxes under `storage`/sandboxes, served by the static rex-server beside this
/// executable, else by `server_executable server`), docker and podman (unless their engine
/// cannot be addressed: logged), and each cloud the configuration enables or whose own
/// variable is set (E2B_API_KEY, DAYTONA_API_KEY, MODAL_TOKEN_ID); a provider that cannot be
/// made is logged and left out.
Providers make_providers(asio::any_io_executor ex, const GatewayConfig& cfg,
                         const std::filesystem::path& storage, const std::string& gateway_id,
                         std::string server_executable);

}  // namespace rex::gateway
