// The fargate backend's entry in the backend table: a task of AWS Fargate.
#include <rex/aws/client.hpp>
#include <rex/backends/fargate/fargate_config.hpp>
#include <rex/backends/fargate/fargate_deployment.hpp>
#include <rex/backends/fargate/fargate_gc.hpp>
#include <rex/deployment/registry.hpp>

#include <fmt/format.h>

namespace rex::modules {

namespace {

constexpr BackendFlag flags[] = {
    common_flags::image,
    {"--port", "port", "the server's port in the task", FlagKind::integer},
    common_flags::startup_timeout,
    common_flags::env,
    {"--cluster", "cluster_name", "the ECS cluster (default: rex-cluster)"},
    {"--region", "region", "the AWS region (default: as the AWS CLI finds it)"},
    {"--profile", "profile", "the AWS profile (default: as the AWS CLI finds it)"},
};

void check(FargateDeploymentConfig& c, settings::Reader& r) {
  if (c.image.empty() && !r.defaults())
    r.fail("image", "must not be empty");
  if (c.cluster_name.empty())
    r.fail("cluster_name", "must not be empty");
  r.positive_seconds("container_timeout", c.container_timeout);
  r.positive_seconds("runtime_timeout", c.runtime_timeout);
  r.positive_seconds("startup_timeout", c.startup_timeout);
}

std::string describe(const DeploymentConfig& config) {
  const auto& c = config.get<FargateDeploymentConfig>();
  return fmt::format("fargate {} on {}", c.image, c.cluster_name);
}

// `rex gc` in the cluster the settings name.
asio::awaitable<GcReport> gc(asio::any_io_executor executor, DeploymentConfig config,
                             GcOptions options) {
  const auto& c = config.get<FargateDeploymentConfig>();
  aws::AwsClient client(executor, aws::config_from_environment(c.profile, c.region));
  FargateGcOptions fargate;
  fargate.gc = options;
  fargate.cluster = c.cluster_name;
  co_return co_await collect_fargate_garbage(client, fargate);
}

}  // namespace

Backend fargate_entry() {
  Backend b = make_backend<FargateDeploymentConfig, FargateDeployment, check>(
      "a task of AWS Fargate", flags);
  b.title = "Fargate";
  b.describe = describe;
  b.gc = gc;
  b.gc_also = "the security groups rex made that nothing uses";
  b.open = entry::open<FargateDeploymentConfig, open_fargate_backend>;
  return b;
}

}  // namespace rex::modules
