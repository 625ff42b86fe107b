// FargateProvider: the gateway's sandboxes as ECS tasks on AWS Fargate. create() is a
// FargateDeployment's start (the task from the environment's image, rex-server put in by the
// container that runs first) handed over to the gateway, which keeps the task's address and the
// server's token. Each task carries the gateway's id and the session's as tags (rex.gateway,
// rex.session), which list() filters the cluster's running tasks on; destroy() stops the task by
// its ARN. rex-server's --max-lifetime, set to the session's maximum lifetime, ends it if the
// gateway never comes back (and `rex gc --fargate` stops it once expired).
#pragma once

#include <rex/gateway/provider.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex::gateway {

struct FargateProviderConfig {
  std::string gateway_id;               // in every task's tags (rex.gateway)
  std::string cluster = "rex-cluster";  // the ECS cluster (made if missing)
  std::string region;                   // empty: as the AWS CLI finds it
  std::string profile;                  // empty: as the AWS CLI finds it
  std::string server_image;             // holds /rex-server; empty: FargateDeployment's default
  std::string subnet_id;                // empty: the default VPC's first subnet
  std::string security_group_id;        // empty: one opening the port, made once
  std::string connect = "public_ip";    // public_ip | private_ip
  int port = 8880;                      // rex-server's port in the task
  double startup_timeout = 300;         // RunTask to RUNNING, and the server's first answer
};

class FargateProvider final : public Provider {
 public:
  /// DeploymentConfigError for settings that cannot work; aws::AwsError for credentials or a
  /// region that cannot be found.
  FargateProvider(asio::any_io_executor executor, FargateProviderConfig config);
  ~FargateProvider() override;

  std::string_view name() const noexcept override { return "fargate"; }
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
