// The local backend's entry in the backend table.
#include <rex/backends/local/local_config.hpp>
#include <rex/backends/local/local_deployment.hpp>
#include <rex/deployment/registry.hpp>

namespace rex::modules {

namespace {
constexpr BackendFlag flags[] = {common_flags::workdir, common_flags::env};
}  // namespace

Backend local_entry() {
  return make_backend<LocalDeploymentConfig, LocalDeployment>("bash sessions on this machine",
                                                              flags);
}

}  // namespace rex::modules
