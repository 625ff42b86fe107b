// Modal's sandboxes as a SandboxBackend.
#include <rex/backends/modal/modal_deployment.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "backends/modal/modal_calls.hpp"
#include "deployment/hand_over.hpp"

namespace rex {

namespace {

class ModalBackend final : public SandboxBackend {
 public:
  ModalBackend(asio::any_io_executor executor, ModalDeploymentConfig settings)
      : executor_(std::move(executor)),
        settings_(std::move(settings)),
        resolved_(resolve_modal_config(settings_)) {}  // a missing token fails here

  std::string_view name() const noexcept override { return "modal"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    // The request over the settings (as given: a token from the environment is named so).
    ModalDeploymentConfig d = settings_;
    detail::lay_request_over(d, request);
    if (request.lifetime.count() > 0)  // Modal's limits
      d.deployment_timeout = std::clamp(request.lifetime, Seconds(1), Seconds(86400));
    auto creating =
        create_modal_sandbox(executor_, std::move(d), std::move(request.working_dir),
                             std::move(request.deployment_id), std::move(request.progress));
    co_return co_await std::move(creating);
  }

  asio::awaitable<void> destroy(std::string id) override {
    auto ending = terminate_modal_sandbox(executor_, resolved_, id);
    auto ended =
        detail::failing_as(fmt::format("modal: cannot end sandbox {}: ", id), std::move(ending));
    co_await std::move(ended);
  }

  asio::awaitable<std::optional<std::string>> lost(std::string id) override {
    auto asking = modal_sandbox_lost(executor_, resolved_, std::move(id));
    co_return co_await std::move(asking);
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    auto listing = list_modal_sandboxes(executor_, resolved_, std::move(labels));
    auto listed = detail::failing_as("modal: listing sandboxes: ", std::move(listing));
    std::vector<ModalSandboxListing> found = co_await std::move(listed);
    std::vector<SandboxInfo> out;
    for (auto& f : found)
      out.push_back(
          SandboxInfo{std::move(f.sandbox_id), std::move(f.tags), f.running, f.created_at});
    co_return out;
  }

  void configure_client(const std::string& url, http::ClientConfig& client) const override {
    (void)url;
    client.ca_file = resolved_.ca_file;  // the tunnels' certificates (a test's own CA)
  }

 private:
  asio::any_io_executor executor_;
  ModalDeploymentConfig settings_;  // as given
  ModalDeploymentConfig resolved_;  // with the environment's values
};

}  // namespace

std::unique_ptr<SandboxBackend> open_modal_backend(asio::any_io_executor executor,
                                                   ModalDeploymentConfig settings) {
  return std::make_unique<ModalBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
