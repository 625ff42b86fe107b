#include <rex/gateway/fargate_provider.hpp>

#include <rex/aws/client.hpp>
#include <rex/aws/credentials.hpp>
#include <rex/deployment/fargate_deployment.hpp>
#include <rex/deployment/fargate_gc.hpp>

#include "gateway/handed_over.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>

namespace rex::gateway {

namespace json = boost::json;

namespace {

using detail::kGatewayKey;
using detail::kSessionKey;

}  // namespace

struct FargateProvider::Impl {
  asio::any_io_executor executor;
  FargateProviderConfig config;
  std::unique_ptr<aws::AwsClient> aws;

  FargateDeploymentConfig deployment_config() const {
    FargateDeploymentConfig d;
    d.cluster_name = config.cluster;
    d.region = config.region;
    d.profile = config.profile;
    d.server_image = config.server_image;
    d.subnet_id = config.subnet_id;
    d.security_group_id = config.security_group_id;
    d.connect = config.connect;
    d.port = config.port;
    d.startup_timeout = config.startup_timeout;
    d.runtime_timeout = std::min(60.0, config.startup_timeout);
    return d;
  }
};

FargateProvider::FargateProvider(asio::any_io_executor executor, FargateProviderConfig config)
    : impl_(std::make_unique<Impl>()) {
  impl_->executor = std::move(executor);
  impl_->config = std::move(config);
  // The settings as the deployment checks them, and the credentials and region as the AWS CLI
  // finds them: either missing fails the gateway's start.
  const FargateDeployment probe(impl_->executor, impl_->deployment_config());
  impl_->aws = std::make_unique<aws::AwsClient>(
      impl_->executor, aws::config_from_environment(impl_->config.profile, impl_->config.region));
}

FargateProvider::~FargateProvider() = default;

asio::awaitable<SandboxAddress> FargateProvider::create(SandboxSpec spec) {
  FargateDeploymentConfig d = impl_->deployment_config();
  if (!spec.environment.image.empty())
    d.image = spec.environment.image;
  d.env = spec.env;
  d.labels = {{std::string(kGatewayKey), impl_->config.gateway_id},
              {std::string(kSessionKey), spec.session_id}};
  d.container_timeout = spec.max_lifetime > 0 ? spec.max_lifetime : 3600.0;
  auto handing = detail::start_and_hand_over<FargateDeployment>(impl_->executor, std::move(d),
                                                                spec.environment.working_dir);
  co_return co_await std::move(handing);
}

asio::awaitable<void> FargateProvider::destroy(std::string sandbox_id) {
  std::string failure;
  try {
    auto stopping = impl_->aws->json_call(aws::kEcs, "StopTask",
                                          json::object{{"cluster", impl_->config.cluster},
                                                       {"task", sandbox_id},
                                                       {"reason", "rex gateway: session ended"}});
    co_await std::move(stopping);
  } catch (const aws::AwsError& e) {
    // A task ECS no longer knows is stopped.
    if (e.code() != "InvalidParameterException" && e.code() != "ClientException")
      failure = e.what();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(fmt::format("fargate: cannot stop task {}: {}", sandbox_id, failure));
}

asio::awaitable<std::vector<SandboxListing>> FargateProvider::list() {
  std::vector<FargateTask> tasks;
  std::string failure;
  try {
    auto listing = list_fargate_tasks(*impl_->aws, impl_->config.cluster);
    tasks = co_await std::move(listing);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError("fargate: listing tasks: " + failure);
  std::vector<SandboxListing> out;
  for (auto& t : tasks) {
    const auto gateway = t.tags.find(std::string(kGatewayKey));
    if (gateway == t.tags.end() || gateway->second != impl_->config.gateway_id)
      continue;  // another gateway's, or `rex run`'s
    SandboxListing s;
    s.sandbox_id = std::move(t.arn);
    if (const auto session = t.tags.find(std::string(kSessionKey)); session != t.tags.end())
      s.session_id = session->second;
    // Desired RUNNING: still starting counts as running (its create may be in flight).
    s.running = t.last_status != "STOPPED" && t.last_status != "DEPROVISIONING";
    s.created_at = t.created_at;
    out.push_back(std::move(s));
  }
  co_return out;
}

}  // namespace rex::gateway
