// AWS Fargate's tasks as a SandboxBackend.
#include <rex/aws/client.hpp>
#include <rex/backends/fargate/fargate_deployment.hpp>
#include <rex/backends/fargate/fargate_gc.hpp>

#include <fmt/format.h>

#include <optional>

#include "backends/fargate/fargate_calls.hpp"
#include "deployment/hand_over.hpp"

namespace rex {

namespace {

class FargateBackend final : public SandboxBackend {
 public:
  FargateBackend(asio::any_io_executor executor, FargateDeploymentConfig settings,
                 bool credentials_now)
      : executor_(std::move(executor)), settings_(std::move(settings)) {
    check_fargate_config(settings_);
    if (credentials_now)
      aws();
  }

  std::string_view name() const noexcept override { return "fargate"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    FargateDeploymentConfig d = settings_;
    detail::lay_request_over(d, request);
    if (request.lifetime.count() > 0)
      d.container_timeout = request.lifetime;
    auto creating =
        create_fargate_task(executor_, std::move(d), std::move(request.working_dir),
                            std::move(request.deployment_id), std::move(request.progress));
    co_return co_await std::move(creating);
  }

  asio::awaitable<void> destroy(std::string id) override {
    auto stopping = stop(id);
    auto stopped =
        detail::failing_as(fmt::format("fargate: cannot stop task {}: ", id), std::move(stopping));
    co_await std::move(stopped);
  }

  asio::awaitable<std::optional<std::string>> lost(std::string id) override {
    auto asking = fargate_task_lost(aws(), settings_.cluster_name, std::move(id));
    co_return co_await std::move(asking);
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    auto listing = list_all();
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
  // The client of the credentials and region the AWS CLI finds (CredentialsError when it finds
  // none), made when first needed; the start of a task makes its own.
  aws::AwsClient& aws() {
    if (!aws_)
      aws_ = std::make_unique<aws::AwsClient>(
          executor_, aws::config_from_environment(settings_.profile, settings_.region));
    return *aws_;
  }

  asio::awaitable<void> stop(std::string id) {
    auto stopping = stop_fargate_task(aws(), settings_.cluster_name, std::move(id),
                                      "rex: the sandbox was destroyed");
    co_await std::move(stopping);
  }

  asio::awaitable<std::vector<FargateTask>> list_all() {
    auto listing = list_fargate_tasks(aws(), settings_.cluster_name);
    co_return co_await std::move(listing);
  }

  asio::any_io_executor executor_;
  FargateDeploymentConfig settings_;
  std::unique_ptr<aws::AwsClient> aws_;
};

}  // namespace

std::unique_ptr<SandboxBackend> make_fargate_backend(asio::any_io_executor executor,
                                                     FargateDeploymentConfig settings,
                                                     bool credentials_now) {
  return std::make_unique<FargateBackend>(std::move(executor), std::move(settings),
                                          credentials_now);
}

std::unique_ptr<SandboxBackend> open_fargate_backend(asio::any_io_executor executor,
                                                     FargateDeploymentConfig settings) {
  // Credentials missing fail here, where the settings are read.
  return make_fargate_backend(std::move(executor), std::move(settings), true);
}

}  // namespace rex
