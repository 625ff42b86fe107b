// Modal's sandboxes as a SandboxBackend.
#include <rex/backends/modal/modal_deployment.hpp>

#include <fmt/format.h>

#include <algorithm>

#include "deployment/hand_over.hpp"

namespace rex {

namespace {

class ModalBackend final : public SandboxBackend {
 public:
  ModalBackend(asio::any_io_executor executor, ModalDeploymentConfig settings)
      : executor_(std::move(executor)) {
    // The token and URL as the deployment resolves them: a missing token fails here.
    const ModalDeployment probe(executor_, std::move(settings));
    settings_ = probe.config();
  }

  std::string_view name() const noexcept override { return "modal"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    ModalDeploymentConfig d = settings_;
    if (!request.image.empty())
      d.image = request.image;
    d.env = std::move(request.env);
    d.labels = std::move(request.labels);
    d.deployment_timeout =
        Seconds(std::clamp(request.lifetime > 0 ? request.lifetime : 3600.0, 1.0, 86400.0));
    auto handing = detail::start_and_hand_over<ModalDeployment>(executor_, std::move(d),
                                                                std::move(request.working_dir));
    co_return co_await std::move(handing);
  }

  asio::awaitable<void> destroy(std::string id) override {
    auto ending = terminate_modal_sandbox(executor_, settings_, id);
    auto ended =
        detail::failing_as(fmt::format("modal: cannot end sandbox {}: ", id), std::move(ending));
    co_await std::move(ended);
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    auto listing = list_modal_sandboxes(executor_, settings_, std::move(labels));
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
    client.ca_file = settings_.ca_file;  // the tunnels' certificates (a test's own CA)
  }

 private:
  asio::any_io_executor executor_;
  ModalDeploymentConfig settings_;
};

}  // namespace

std::unique_ptr<SandboxBackend> open_modal_backend(asio::any_io_executor executor,
                                                   ModalDeploymentConfig settings) {
  return std::make_unique<ModalBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
