// What the fargate module's backend (fargate_backend.cpp) calls of its ECS code
// (fargate_deployment.cpp). Internal to the module.
#pragma once

#include <rex/aws/client.hpp>
#include <rex/backends/fargate/fargate_config.hpp>
#include <rex/deployment/backend.hpp>
#include <rex/deployment/deployment.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace rex {

/// DeploymentConfigError for settings that cannot work (a port, connect and assign_public_ip).
void check_fargate_config(const FargateDeploymentConfig& config);

/// The backend of `settings`; `credentials_now`: the AWS credentials are looked for here, else at
/// the first call.
std::unique_ptr<SandboxBackend> make_fargate_backend(asio::any_io_executor executor,
                                                     FargateDeploymentConfig settings,
                                                     bool credentials_now);

/// A task of `config` running rex-server, answering (fargate_deployment.hpp), told of each stage
/// through `progress`; DeploymentStartupError naming the step, the task stopped. Sessions work in
/// `working_dir`, else where the task's sandbox container starts processes. `deployment_id` goes
/// into its tags (rex.deployment) and startedBy (empty: a random one).
asio::awaitable<StartedSandbox> create_fargate_task(asio::any_io_executor executor,
                                                    FargateDeploymentConfig config,
                                                    std::string working_dir,
                                                    std::string deployment_id,
                                                    SandboxProgress progress);

/// Why ECS no longer runs the task (its status and ECS's reasons), or nothing while it is
/// RUNNING. DeploymentStartupError when ECS does not know it.
asio::awaitable<std::optional<std::string>> fargate_task_lost(aws::AwsClient& aws,
                                                              std::string cluster,
                                                              std::string task_arn);

/// Stops the task (StopTask with `reason`); one ECS no longer knows is stopped.
asio::awaitable<void> stop_fargate_task(aws::AwsClient& aws, std::string cluster,
                                        std::string task_arn, std::string reason);

}  // namespace rex
