// E2BProvider: the gateway's sandboxes on E2B, or on any E2B-compatible endpoint (another rex
// gateway, for one). create() is an E2BDeployment's start (the sandbox, rex-server uploaded and
// started in it) handed over to the gateway, which keeps how to reach it: the port's URL, the
// routing headers and the server's token. Each sandbox carries the gateway's id and the
// session's in its metadata (rex.gateway, rex.session), which list() filters on; destroy() kills
// it by id. E2B's own timeout, set to the session's maximum lifetime, and rex-server's
// --max-lifetime end it if the gateway never comes back.
#pragma once

#include <rex/gateway/provider.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex::gateway {

struct E2BProviderConfig {
  std::string gateway_id;  // in every sandbox's metadata (rex.gateway)
  // Empty strings take E2B's environment variables (E2B_API_KEY, E2B_API_URL,
  // E2B_SANDBOX_URL, E2B_DOMAIN), as E2BDeploymentConfig's do.
  std::string api_key;
  std::string api_url;
  std::string sandbox_url;
  std::string domain;
  std::string server_path;  // the static rex-server to upload; empty: found as for `rex run`
  std::string template_server_path;  // one already in the templates: started, not uploaded
  double startup_timeout = 120;      // seconds for each step of a create
};

class E2BProvider final : public Provider {
 public:
  explicit E2BProvider(asio::any_io_executor executor, E2BProviderConfig config);
  ~E2BProvider() override;

  std::string_view name() const noexcept override { return "e2b"; }
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
