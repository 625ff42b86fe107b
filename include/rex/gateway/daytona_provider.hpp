// DaytonaProvider: the gateway's sandboxes on Daytona. create() is a DaytonaDeployment's start
// (the sandbox from the environment's image, rex-server uploaded and started in it, the port's
// preview URL) handed over to the gateway, which keeps how to reach it: the preview URL, its
// token as a header, and the server's token. Each sandbox carries the gateway's id and the
// session's in its labels (rex.gateway, rex.session), which list() filters on; destroy() deletes
// it by id. Daytona's time to live, set to the session's maximum lifetime, and rex-server's
// --max-lifetime end it if the gateway never comes back.
#pragma once

#include <rex/gateway/provider.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex::gateway {

struct DaytonaProviderConfig {
  std::string gateway_id;  // in every sandbox's labels (rex.gateway)
  // Empty strings take Daytona's environment variables (DAYTONA_API_KEY, DAYTONA_API_URL,
  // DAYTONA_TARGET), as DaytonaDeploymentConfig's do.
  std::string api_key;
  std::string api_url;
  std::string target;
  std::string server_path;       // the static rex-server to upload; empty: found as for `rex run`
  double startup_timeout = 300;  // the create, the image's build and the sandbox's start
};

class DaytonaProvider final : public Provider {
 public:
  /// DeploymentConfigError for no API key or a bad URL.
  DaytonaProvider(asio::any_io_executor executor, DaytonaProviderConfig config);
  ~DaytonaProvider() override;

  std::string_view name() const noexcept override { return "daytona"; }
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
