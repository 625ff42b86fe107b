// LocalDeployment: the embedded default. A LocalRuntime in this process, so sessions run on this
// machine with no server and no container in between. stop() closes every session.
#pragma once

#include <rex/backends/local/local_config.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/runtime/local_runtime.hpp>

#include <memory>

namespace rex {

class LocalDeployment final : public Deployment {
 public:
  explicit LocalDeployment(asio::any_io_executor executor, LocalDeploymentConfig config = {});
  ~LocalDeployment() override;

  /// Creates working_dir when missing. DeploymentStartupError when it cannot.
  asio::awaitable<void> start() override;
  asio::awaitable<void> stop() override;
  Runtime& runtime() override;
  bool started() const noexcept override;

 private:
  asio::any_io_executor executor_;
  LocalDeploymentConfig config_;
  std::unique_ptr<LocalRuntime> runtime_;
  bool stopped_ = false;
};

}  // namespace rex
