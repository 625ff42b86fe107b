// The daytona backend's entry in the backend table: a Daytona sandbox.
#include <rex/backends/daytona/daytona_config.hpp>
#include <rex/backends/daytona/daytona_deployment.hpp>
#include <rex/deployment/registry.hpp>

namespace rex::modules {

namespace {

constexpr BackendFlag flags[] = {
    common_flags::image,
    {"--url", "api_url", "the API's URL"},
    {"--token", "api_key", "an API key"},
    {"--port", "port", "the server's port in the sandbox", FlagKind::integer},
    common_flags::startup_timeout,
    common_flags::env,
};

void check(DaytonaDeploymentConfig& c, settings::Reader& r) {
  if (c.image.empty() && c.snapshot.empty() && !r.defaults())
    r.fail("image", "must not be empty (or give a snapshot)");
  if (!(c.container_timeout.count() >= 60))
    r.fail("container_timeout", "must be at least 60 seconds (Daytona counts minutes)");
  r.positive_seconds("runtime_timeout", c.runtime_timeout);
  r.positive_seconds("startup_timeout", c.startup_timeout);
}

std::string describe(const DeploymentConfig& config) {
  const auto& c = config.get<DaytonaDeploymentConfig>();
  return "daytona " + (c.snapshot.empty() ? c.image : c.snapshot);
}

}  // namespace

Backend daytona_entry() {
  Backend b =
      make_backend<DaytonaDeploymentConfig, DaytonaDeployment, check>("a Daytona sandbox", flags);
  b.title = "Daytona";
  b.implied_by = "DAYTONA_API_KEY";
  b.describe = describe;
  b.gc = entry::gc_by_listing<DaytonaDeploymentConfig, open_daytona_backend>;
  b.open = entry::open<DaytonaDeploymentConfig, open_daytona_backend>;
  return b;
}

}  // namespace rex::modules
