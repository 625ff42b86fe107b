// BackendProvider: a gateway provider over any SandboxBackend (rex/deployment/backend.hpp). A
// session's sandbox is a backend's sandbox labelled with the gateway's id and the session's, so
// list() finds what this gateway made, and nothing of another gateway or of `rex run`. Internal
// to the library.
#pragma once

#include <rex/deployment/backend.hpp>
#include <rex/gateway/provider.hpp>

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rex::gateway {

class BackendProvider final : public Provider {
 public:
  BackendProvider(std::unique_ptr<SandboxBackend> backend, std::string gateway_id);

  std::string_view name() const noexcept override;
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;
  void configure_client(const std::string& url, http::ClientConfig& client) const override;
  bool can(SandboxOperation operation) const noexcept override;
  asio::awaitable<std::string> checkpoint(std::string sandbox_id,
                                          std::map<std::string, std::string> labels) override;
  asio::awaitable<void> remove_checkpoint(std::string image) override;
  asio::awaitable<std::vector<SandboxInfo>> list_checkpoints() override;
  asio::awaitable<void> pause(std::string sandbox_id) override;
  asio::awaitable<void> resume(std::string sandbox_id) override;
  asio::awaitable<SandboxMetrics> metrics(std::string sandbox_id) override;
  asio::awaitable<std::string> build_image(ImageBuild build) override;
  asio::awaitable<std::vector<SandboxInfo>> list_built_images() override;
  asio::awaitable<std::optional<std::string>> image_id(std::string name) override;

 private:
  std::unique_ptr<SandboxBackend> backend_;
  std::string gateway_id_;
};

}  // namespace rex::gateway
