// LocalProvider: the embedded default provider. Each sandbox is a rex-server process on this
// host, in a directory of its own under the gateway's storage (`sandboxes/<session id>/`), served
// on a unix socket there, in a session and process group of its own and not a child of the
// gateway, so that it outlives a gateway crash and is adopted on the next start.
//
// A sandbox's directory holds `sandbox.json` (gateway id, session id, creation time, the
// server's pid), `server.sock`, `server.log` and `work/`, the working directory of its sessions
// unless the environment names another. Nothing confines what runs there but that directory's
// use as the root of the file calls: `local` is for one trusted user.
//
// Threading: call every member from the io_context given at construction.
#pragma once

#include <rex/gateway/provider.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace rex::gateway {

struct LocalProviderConfig {
  std::filesystem::path root;  // sandboxes/ under the storage folder (created when missing)
  std::string gateway_id;      // written into each sandbox.json; list() keeps to its own
  // The server and its first arguments: {"/path/rex-server"} (static: it starts fastest) or
  // {"/path/rex", "server"}.
  std::vector<std::string> server_command;
  std::chrono::milliseconds startup_timeout = std::chrono::seconds(20);
  std::chrono::milliseconds stop_grace = std::chrono::seconds(5);  // SIGTERM, then SIGKILL
};

class LocalProvider final : public Provider {
 public:
  /// Throws ProviderError when the root cannot be made or is too deep for a unix socket path.
  LocalProvider(asio::any_io_executor executor, LocalProviderConfig config);
  ~LocalProvider() override;

  std::string_view name() const noexcept override { return "local"; }
  asio::awaitable<SandboxAddress> create(SandboxSpec spec) override;
  asio::awaitable<void> destroy(std::string sandbox_id) override;
  asio::awaitable<std::vector<SandboxListing>> list() override;
  bool confines_files() const noexcept override { return true; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
