// The e2b backend's entry in the backend table: a sandbox of E2B or an E2B-compatible endpoint.
#include <rex/backends/e2b/e2b_config.hpp>
#include <rex/backends/e2b/e2b_deployment.hpp>
#include <rex/deployment/registry.hpp>

#include <fmt/format.h>

namespace rex::modules {

namespace {

constexpr BackendFlag flags[] = {
    {"--url", "api_url", "the API's URL"},
    {"--token", "api_key", "an API key"},
    {"--port", "server_port", "the server's port in the sandbox", FlagKind::integer},
    common_flags::startup_timeout,
    common_flags::env,
    {"--environment", "template", "the template"},
};

void check(E2BDeploymentConfig& c, settings::Reader& r) {
  if (c.template_id.empty() && !r.defaults())
    r.fail("template", "must not be empty");
  r.positive_seconds("timeout", c.timeout);
  if (!c.template_server_path.empty() && c.template_server_path.front() != '/')
    r.fail("template_server_path", "must be an absolute path in the sandbox");
}

std::string describe(const DeploymentConfig& config) {
  const auto& c = config.get<E2BDeploymentConfig>();
  return fmt::format("e2b {}{}", c.template_id, c.api_url.empty() ? "" : " at " + c.api_url);
}

}  // namespace

Backend e2b_entry() {
  Backend b = make_backend<E2BDeploymentConfig, E2BDeployment, check>(
      "a sandbox of E2B or an E2B-compatible endpoint", flags);
  b.title = "E2B";
  b.implied_by = "E2B_API_KEY";
  b.describe = describe;
  b.gc = entry::gc_by_listing<E2BDeploymentConfig, open_e2b_backend>;
  b.open = entry::open<E2BDeploymentConfig, open_e2b_backend>;
  return b;
}

}  // namespace rex::modules
