// AWS Fargate's tasks as a SandboxBackend.
#include <rex/aws/client.hpp>
#include <rex/backends/fargate/fargate_deployment.hpp>
#include <rex/backends/fargate/fargate_gc.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>

#include "deployment/hand_over.hpp"

namespace rex {

namespace {

namespace json = boost::json;

class FargateBackend final : public SandboxBackend {
 public:
  FargateBackend(asio::any_io_executor executor, FargateDeploymentConfig settings)
      : executor_(std::move(executor)), settings_(std::move(settings)) {
    // The settings as the deployment checks them, and the credentials and region as the AWS CLI
    // finds them: either missing fails here.
    const FargateDeployment probe(executor_, settings_);
    aws_ = std::make_unique<aws::AwsClient>(
        executor_, aws::config_from_environment(settings_.profile, settings_.region));
  }

  std::string_view name() const noexcept override { return "fargate"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    FargateDeploymentConfig d = settings_;
    if (!request.image.empty())
      d.image = request.image;
    d.env = std::move(request.env);
    d.labels = std::move(request.labels);
    d.container_timeout = Seconds(request.lifetime > 0 ? request.lifetime : 3600.0);
    d.runtime_timeout = std::min(Seconds(60), settings_.startup_timeout);
    auto handing = detail::start_and_hand_over<FargateDeployment>(executor_, std::move(d),
                                                                  std::move(request.working_dir));
    co_return co_await std::move(handing);
  }

  asio::awaitable<void> destroy(std::string id) override {
    std::string failure;
    try {
      auto stopping = aws_->json_call(aws::kEcs, "StopTask",
                                      json::object{{"cluster", settings_.cluster_name},
                                                   {"task", id},
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
      throw DeploymentStartupError(fmt::format("fargate: cannot stop task {}: {}", id, failure));
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    auto listing = list_fargate_tasks(*aws_, settings_.cluster_name);
    auto listed = detail::failing_as("fargate: listing tasks: ", std::move(listing));
    std::vector<FargateTask> tasks = co_await std::move(listed);
    std::vector<SandboxInfo> out;
    for (auto& t : tasks) {
      if (!detail::has_labels(t.tags, labels))
        continue;  // another gateway's, or `rex run`'s
      // Desired RUNNING: still starting counts as running (its create may be in flight).
      const bool running = t.last_status != "STOPPED" && t.last_status != "DEPROVISIONING";
      out.push_back(SandboxInfo{std::move(t.arn), std::move(t.tags), running, t.created_at});
    }
    co_return out;
  }

 private:
  asio::any_io_executor executor_;
  FargateDeploymentConfig settings_;
  std::unique_ptr<aws::AwsClient> aws_;
};

}  // namespace

std::unique_ptr<SandboxBackend> open_fargate_backend(asio::any_io_executor executor,
                                                     FargateDeploymentConfig settings) {
  return std::make_unique<FargateBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
