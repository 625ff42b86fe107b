// FargateDeployment: a task per sandbox on AWS Fargate, with rex-server put into the user's image
// by a container that runs before it, reached by a RemoteRuntime (docs/deployments.md).
//
// start(), as SWE-ReX's Fargate deployment does it, from C++ (rex/aws/client.hpp):
// - ECS CreateCluster (idempotent); the execution role: IAM GetRole, else CreateRole, then
//   AttachRolePolicy (AmazonECSTaskExecutionRolePolicy, AmazonEC2ContainerRegistryReadOnly)
//   and PutRolePolicy (logs) when missing; the task definition, named by a hash of its content
//   (DescribeTaskDefinition, else RegisterTaskDefinition: awsvpc, FARGATE, a volume the
//   `rex-server-install` container fills from server_image before the `sandbox` container
//   starts the server from it); EC2's default VPC and its first subnet, and a security group
//   opening the port (DescribeSecurityGroups, else CreateSecurityGroup and
//   AuthorizeSecurityGroupIngress), unless given.
// - RunTask (FARGATE, the subnet and group, assignPublicIp) with the server's token in the
//   sandbox container's environment, tagged with the deployment's id; DescribeTasks until
//   RUNNING (a task that stops on the way fails start() with ECS's reasons); the task's address
//   from its network interface (DescribeNetworkInterfaces: the public one, or the private one
//   with connect = private_ip); then the server, until it answers. No Python in the image, no
//   fallback: the server is there or start() says why not.
// - The server ends itself after container_timeout (--max-lifetime), whatever happens here.
// - stop() closes the runtime and stops the task (StopTask). A failed start() stops a task it
//   started. is_alive() answers false with ECS's reason once the task has stopped.
//
// Credentials and region as the AWS CLI finds them (rex/aws/credentials.hpp); endpoints from
// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> (an emulator).
#pragma once

#include <rex/backends/fargate/fargate_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/sandbox_deployment.hpp>

#include <memory>
#include <string>

namespace rex {

/// The Deployment over this backend's SandboxBackend (rex/deployment/sandbox_deployment.hpp) with
/// `config` as its settings; its sandbox id is the task's ARN.
class FargateDeployment final : public SandboxDeployment {
 public:
  /// DeploymentConfigError for settings that cannot work, before anything is called.
  FargateDeployment(asio::any_io_executor executor, FargateDeploymentConfig config);

  const FargateDeploymentConfig& config() const noexcept { return config_; }
  /// The task's ARN once started; empty before.
  const std::string& task_arn() const noexcept { return sandbox_id(); }

 private:
  FargateDeploymentConfig config_;
};

/// This backend as a SandboxBackend (rex/deployment/backend.hpp): `settings` are the defaults of
/// every sandbox it creates, and say where it lists and destroys. DeploymentConfigError (or
/// std::invalid_argument) when they cannot be used.
std::unique_ptr<SandboxBackend> open_fargate_backend(asio::any_io_executor executor,
                                                     FargateDeploymentConfig settings);

}  // namespace rex
