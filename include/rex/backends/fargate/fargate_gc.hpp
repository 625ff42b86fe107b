// Garbage collection of rex's Fargate tasks: the running tasks of a cluster that
// FargateDeployments started and can no longer stop themselves, found by the tag rex.managed=1
// and judged by the same rules as containers and pods (gc.hpp: owner process gone,
// machine rebooted, expired). It is what `rex gc --fargate` runs.
#pragma once

#include <rex/deployment/gc.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace rex {

namespace aws {
class AwsClient;
}

struct FargateGcOptions {
  GcOptions gc{};
  std::string cluster = "rex-cluster";  // the cluster's name or ARN
  // Security groups FargateDeployment made (tag origin=rex-fargate) are removed once no network
  // interface uses them and they are older than this (a deployment that made one may not have
  // started its task yet); with gc.all, whatever their age.
  std::chrono::seconds group_grace{600};
};

/// A running task of a cluster, as DescribeTasks tells it.
struct FargateTask {
  std::string arn;
  std::map<std::string, std::string> tags;
  std::string last_status;  // PROVISIONING, PENDING, RUNNING, ...
  double created_at = 0;    // unix seconds
};

/// The tasks of `cluster` whose desired status is RUNNING (ListTasks, then DescribeTasks with
/// their tags, a hundred at a time). A cluster that does not exist has none.
asio::awaitable<std::vector<FargateTask>> list_fargate_tasks(aws::AwsClient& client,
                                                             std::string cluster);

/// Stops (StopTask) the tasks that should go (entries named by the task's ARN; a cluster that
/// does not exist has none), then deletes the security groups rex made that nothing uses any
/// more (entries named by the group's id).
asio::awaitable<GcReport> collect_fargate_garbage(aws::AwsClient& client,
                                                  FargateGcOptions options = {});

}  // namespace rex
