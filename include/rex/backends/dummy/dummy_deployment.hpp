// DummyDeployment: a DummyRuntime behind the Deployment interface, for testing agents and
// harnesses without starting anything. Hooks see the same stages as a real deployment.
#pragma once

#include <rex/backends/dummy/dummy_config.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/runtime/dummy_runtime.hpp>

namespace rex {

class DummyDeployment final : public Deployment {
 public:
  explicit DummyDeployment(DummyDeploymentConfig config = {});

  asio::awaitable<void> start() override;
  asio::awaitable<void> stop() override;
  Runtime& runtime() override;
  bool started() const noexcept override;
  /// The runtime itself, to script it (available before start()).
  DummyRuntime& dummy_runtime() noexcept;

 private:
  DummyRuntime runtime_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace rex
