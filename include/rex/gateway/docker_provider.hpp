// DockerProvider: sandboxes as containers of a Docker engine, or of Podman through its
// Docker-compatible API (the same class, named "podman", on Podman's socket). Each sandbox is a
// DockerDeployment started from the environment's image and settings and then handed over: the
// gateway's database keeps how to reach it, so it outlives a gateway crash and is adopted on the
// next start.
//
// A container carries the labels rex.gateway (this gateway's id) and rex.session (the session's
// id) beside DockerDeployment's own; list() finds this gateway's containers by the first and
// nothing else, so containers of other gateways and of `rex run` are never listed, and `rex gc`
// leaves a gateway's containers alone until they expire. Its name, rex-<gateway>-<session>, makes
// a second container for one session impossible. Its server ends itself at the sandbox's hard
// deadline (--max-lifetime); the stopped container is then removed by the gateway's drift check,
// or by `rex gc` once it expires.
//
// With no engine installed (its unix socket absent) list() has nothing to report and create()
// fails with the engine's message and a hint, so a gateway on a laptop without Docker runs its
// local sessions undisturbed.
//
// Threading: call every member from the io_context given at construction.
#pragma once

#include <rex/gateway/provider.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace rex::gateway {

struct DockerProviderConfig {
  std::string name = "docker";   // docker | podman: the provider's name and default engine
  std::string gateway_id;        // on every container's rex.gateway label
  std::string engine;            // DOCKER_HOST form; empty: the runtime's default socket
  std::string server_path;       // the static rex-server to inject; empty: found as for `rex run`
  double startup_timeout = 120;  // seconds from create to the server's first answer
};

class DockerProvider final : public Provider {
 public:
  /// std::invalid_argument for an engine address that cannot be used.
  DockerProvider(asio::any_io_executor executor, DockerProviderConfig config);
  ~DockerProvider() override;

  std::string_view name() const noexcept override;
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
