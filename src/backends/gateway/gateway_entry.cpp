// The gateway backend's entry in the backend table: a session of a rex gateway.
#include <rex/backends/gateway/gateway_config.hpp>
#include <rex/backends/gateway/gateway_deployment.hpp>
#include <rex/deployment/registry.hpp>

#include <fmt/format.h>

namespace rex::modules {

namespace {

constexpr BackendFlag flags[] = {
    {"--url", "url", "the gateway's base URL"},
    {"--token", "token", "an API key"},
    common_flags::startup_timeout,
    common_flags::env,
    {"--environment", "environment", "the environment of the session"},
};

void check(GatewayDeploymentConfig& c, settings::Reader& r) {
  if (c.environment.empty() && !r.defaults())
    r.fail("environment", "must not be empty");
}

std::string describe(const DeploymentConfig& config) {
  const auto& c = config.get<GatewayDeploymentConfig>();
  return fmt::format("gateway {} ({})", c.url, c.environment);
}

}  // namespace

Backend gateway_entry() {
  Backend b = make_backend<GatewayDeploymentConfig, GatewayDeployment, check>(
      "a session of a rex gateway", flags);
  b.describe = describe;
  return b;
}

}  // namespace rex::modules
