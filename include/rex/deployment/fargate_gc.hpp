// Garbage collection of rex's Fargate tasks: the running tasks of a cluster that
// FargateDeployments started and can no longer stop themselves, found by the tag rex.managed=1
// and judged by the same rules as containers and pods (docker_gc.hpp: owner process gone,
// machine rebooted, expired). It is what `rex gc --fargate` runs.
#pragma once

#include <rex/deployment/docker_gc.hpp>

#include <boost/asio/awaitable.hpp>

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

/// Stops (StopTask) the tasks that should go. Entries are named by the task's ARN. A cluster
/// that does not exist has nothing to collect.
asio::awaitable<GcReport> collect_fargate_garbage(aws::AwsClient& client,
                                                  FargateGcOptions options = {});

}  // namespace rex
