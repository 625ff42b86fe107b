// The modal backend's entry in the backend table: a Modal sandbox.
#include <rex/backends/modal/modal_config.hpp>
#include <rex/backends/modal/modal_deployment.hpp>
#include <rex/deployment/registry.hpp>

#include <boost/json/object.hpp>

namespace rex::modules {

namespace {

constexpr BackendFlag flags[] = {
    common_flags::image,
    {"--url", "server_url", "the API's URL"},
    {"--port", "port", "the server's port in the sandbox", FlagKind::integer},
    common_flags::startup_timeout,
    common_flags::env,
    {"--environment", "environment", "Modal's environment"},
};

void check(ModalDeploymentConfig& c, settings::Reader& r) {
  boost::json::object kwargs;
  r.object("modal_sandbox_kwargs", kwargs);
  if (!kwargs.empty())
    r.fail("modal_sandbox_kwargs",
           "holds arguments of Modal's Python SDK; give the Sandbox message's fields as "
           "sandbox_definition instead");
  if (c.image.empty() && !r.defaults())
    r.fail("image", "must not be empty");
  if (c.app_name.empty())
    r.fail("app_name", "must not be empty");
  if (!(c.deployment_timeout.count() >= 1 && c.deployment_timeout.count() <= 86400))
    r.fail("deployment_timeout", "must be from 1 to 86400 seconds (Modal's limit)");
  r.positive_seconds("startup_timeout", c.startup_timeout);
  r.positive_seconds("runtime_timeout", c.runtime_timeout);
}

std::string describe(const DeploymentConfig& config) {
  return "modal " + config.get<ModalDeploymentConfig>().image;
}

}  // namespace

Backend modal_entry() {
  Backend b = make_backend<ModalDeploymentConfig, ModalDeployment, check>("a Modal sandbox", flags);
  b.title = "Modal";
  b.implied_by = "MODAL_TOKEN_ID";
  b.describe = describe;
  b.gc = entry::gc_by_listing<ModalDeploymentConfig, open_modal_backend>;
  b.open = entry::open<ModalDeploymentConfig, open_modal_backend>;
  return b;
}

}  // namespace rex::modules
