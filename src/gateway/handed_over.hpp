// What the gateway's cloud providers (e2b, daytona, modal, fargate) share in create(): a
// deployment started, then handed over to the gateway with where its sessions work. Internal to
// the library.
#pragma once

#include <rex/deployment/deployment.hpp>
#include <rex/gateway/provider.hpp>
#include <rex/protocol/commands.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace rex::gateway::detail {

/// The labels (tags, metadata) by which a cloud provider finds its sandboxes again: the gateway's
/// id and the session's.
inline constexpr std::string_view kGatewayKey = "rex.gateway";
inline constexpr std::string_view kSessionKey = "rex.session";

/// Makes a D from `config` and starts it (it removes its sandbox itself when the start fails),
/// then hands it over: `working_dir`, else where the sandbox starts processes (`pwd`,
/// `fallback_dir` when that fails), and the handoff's URL, token and headers. ProviderError with
/// `prefix` and the deployment's message for any failure, a config the deployment refuses
/// included.
template <class D, class Config>
asio::awaitable<SandboxAddress> start_and_hand_over(asio::any_io_executor executor, Config config,
                                                    std::string working_dir,
                                                    std::string fallback_dir = "/",
                                                    std::string prefix = {}) {
  SandboxAddress address;
  address.working_dir = std::move(working_dir);
  std::string failure;
  try {
    D deployment(std::move(executor), std::move(config));
    auto starting = deployment.start();
    co_await std::move(starting);
    if (address.working_dir.empty()) {
      Command pwd;
      pwd.command = "pwd";
      pwd.shell = true;
      pwd.timeout = 30;
      auto asking = deployment.runtime().execute(std::move(pwd));
      const CommandResponse where = co_await std::move(asking);
      const std::string dir = where.stdout_.substr(0, where.stdout_.find('\n'));
      address.working_dir = where.exit_code == 0 && dir.starts_with('/') ? dir : fallback_dir;
    }
    SandboxHandoff handoff = deployment.handoff();
    address.sandbox_id = std::move(handoff.sandbox_id);
    address.url = std::move(handoff.url);
    address.token = std::move(handoff.token);
    address.headers = std::move(handoff.headers);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(prefix + failure);
  co_return address;
}

}  // namespace rex::gateway::detail
