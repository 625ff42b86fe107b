// FargateDeploymentConfig: a task of AWS Fargate (fargate_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

// AWS Fargate (docs/deployments.md): SWE-ReX's field names where it has them, rex's own after.
struct FargateDeploymentConfig {
  static constexpr std::string_view backend = "fargate";
  static constexpr settings::Rule rules[] = {
      {.member = "port", .min = 1, .max = 65535},
      {.member = "log_group", .null_clears = true},
      {.member = "connect", .choices = "public_ip|private_ip"},
      {.member = "cluster_name", .alias = "cluster"}};

  std::string image = "python:3.11";  // the sandbox's image; it needs nothing at all
  int port = 8880;                    // rex-server's port in the task
  std::string cluster_name = "rex-cluster";
  std::string execution_role_prefix = "rex-execution-role";
  std::string task_definition_prefix = "rex-task";
  std::string log_group = "/ecs/rex-deployment";  // CloudWatch Logs; empty: no logs
  std::string security_group_prefix = "rex-deployment-sg";
  boost::json::object fargate_args{};  // merged into RunTask's overrides (cpu, memory, ...)
  Seconds container_timeout{900.0};    // the task's lifetime: rex-server ends itself then
  Seconds runtime_timeout{60.0};       // from RUNNING to the server's first answer
  // rex's own:
  std::string server_image{};  // holds /rex-server, pullable by Fargate (ECR); empty: the default
  std::string region{};        // empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's
  std::string profile{};       // empty: AWS_PROFILE or default (the environment's keys first)
  std::string subnet_id{};     // empty: the first subnet of the default VPC
  std::string security_group_id{};  // empty: one opening `port` to ingress_cidr, made once
  std::string ingress_cidr = "0.0.0.0/0";
  bool assign_public_ip = true;
  std::string connect = "public_ip";            // public_ip | private_ip: which address of the task
  std::string cpu = "1024";                     // the task's CPU units
  std::string memory = "2048";                  // the task's memory (MiB)
  Seconds startup_timeout{300.0};               // RunTask to RUNNING
  std::map<std::string, std::string> env{};     // the sandbox container's environment
  std::map<std::string, std::string> labels{};  // the task's tags, besides rex's own
};
BOOST_DESCRIBE_STRUCT(FargateDeploymentConfig, (),
                      (image, port, cluster_name, execution_role_prefix, task_definition_prefix,
                       log_group, security_group_prefix, fargate_args, container_timeout,
                       runtime_timeout, server_image, region, profile, subnet_id, security_group_id,
                       ingress_cidr, assign_public_ip, connect, cpu, memory, startup_timeout, env,
                       labels))

}  // namespace rex
