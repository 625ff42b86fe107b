// ModalProvider: the gateway's sandboxes on Modal. create() is a ModalDeployment's start (the
// sandbox from the environment's image, rex-server mounted into it, an encrypted tunnel to its
// port) handed over to the gateway, which keeps the tunnel's URL and the server's token. Each
// sandbox carries the gateway's id and the session's as tags (rex.gateway, rex.session), which
// list() filters on (SandboxList); destroy() ends it by id (SandboxTerminate). Modal's timeout,
// set to the session's maximum lifetime, and rex-server's --max-lifetime end it if the gateway
// never comes back.
#pragma once

#include <rex/gateway/provider.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex::gateway {

struct ModalProviderConfig {
  std::string gateway_id;  // in every sandbox's tags (rex.gateway)
  // Empty strings take Modal's environment variables (MODAL_TOKEN_ID, MODAL_TOKEN_SECRET,
  // MODAL_SERVER_URL, MODAL_ENVIRONMENT), as ModalDeploymentConfig's do.
  std::string token_id;
  std::string token_secret;
  std::string server_url;
  std::string environment;
  std::string app_name = "rex";
  std::string ca_file;           // extra trusted certificates for the API and the tunnels
  std::string server_path;       // the static rex-server to mount; empty: found as for `rex run`
  double startup_timeout = 180;  // the image, the sandbox's scheduling and its tunnel
};

class ModalProvider final : public Provider {
 public:
  /// DeploymentConfigError for no token or a bad server URL.
  ModalProvider(asio::any_io_executor executor, ModalProviderConfig config);
  ~ModalProvider() override;

  std::string_view name() const noexcept override { return "modal"; }
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;
  void configure_client(const std::string& url, http::ClientConfig& client) const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
