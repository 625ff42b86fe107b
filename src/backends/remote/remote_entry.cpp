// The remote backend's entry in the backend table.
#include <rex/backends/remote/remote_config.hpp>
#include <rex/backends/remote/remote_deployment.hpp>
#include <rex/deployment/registry.hpp>

#include <fmt/format.h>

namespace rex::modules {

namespace {

constexpr BackendFlag flags[] = {
    {"--url", "host", "the server's base URL (or host)"},
    {"--token", "auth_token", "the server's auth token"},
    {"--port", "port", "the server's port", FlagKind::integer},
    common_flags::startup_timeout,
};

std::string describe(const DeploymentConfig& config) {
  const auto& c = config.get<RemoteDeploymentConfig>();
  return c.port ? fmt::format("remote {}:{}", c.host, *c.port) : "remote " + c.host;
}

}  // namespace

Backend remote_entry() {
  Backend b = make_backend<RemoteDeploymentConfig, RemoteDeployment>(
      "a running rex-server or swerex-remote", flags);
  b.describe = describe;
  return b;
}

}  // namespace rex::modules
