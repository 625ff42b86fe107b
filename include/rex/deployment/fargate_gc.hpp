// Garbage collection of rex's Fargate tasks: the running tasks of a cluster that
// FargateDeployments started and can no longer stop themselves, found by the tag rex.managed=1
// and judged by the same rules as containers and pods (docker_gc.hpp: owner process gone,
// machine rebooted, expired). It is what `rex gc --fargate` runs.
#pragma once

#include <rex/deployment/docker_gc.hpp>

#include <boost/asio/awaitable.hpp>

#include <string>

namespace rex {

namespace aws {
class AwsClient;
}

struct FargateGcOptions {
  GcOptions gc{};
  std::string cluster = "rex-cluster";  // the cluster's name or ARN
};

/// Stops (StopTask) the tasks that should go. Entries are named by the task's ARN. A cluster
/// that does not exist has nothing to collect.
asio::awaitable<GcReport> collect_fargate_garbage(aws::AwsClient& client,
                                                  FargateGcOptions options = {});

}  // namespace rex
