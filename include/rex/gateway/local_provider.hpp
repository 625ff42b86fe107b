// LocalProvider: the embedded default provider. Each sandbox is a rex-server process on this
// host, in a directory of its own under the gateway's storage (`sandboxes/<session id>/`), served
// on a unix socket there, in a session and process group of its own (the gateway reaps it when
// it ends), so that it outlives a gateway crash and is adopted on the next start.
//
// A sandbox's directory holds `sandbox.json` (gateway id, session id, creation time, the
// server's pid), `server.sock`, `server.log` and `work/`, the working directory of its sessions
// unless the environment names another. A spare (keep_spares) is the same, under an id of its
// own ("w" and 16 hex digits), its sandbox.json marked spare with no session until one takes it,
// its notebook shell already started. A sandbox started from a checkpoint (a rewind's, a
// resume's) has an id of its own, the session's and a suffix. Nothing confines what runs there but
// that directory's use as the root of the file calls: `local` is for one trusted user.
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
  // Where checkpoints keep their copies of working directories (`<id>/work` and
  // `<id>/checkpoint.json`); empty: `checkpoints/` beside the root.
  std::filesystem::path checkpoint_root;
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
  void keep_spares(SandboxSpec spec, std::size_t count) override;
  /// Checkpoints copy a sandbox's working directory (reflinked where the file system can, while
  /// its processes run on), when it works in its own directory; sandboxes start from a copy of
  /// that copy. Pauses stop every process of the sandbox (SIGSTOP, then SIGCONT); metrics come
  /// from /proc and the directory's size.
  bool can(SandboxOperation operation) const noexcept override;
  asio::awaitable<std::string> checkpoint(std::string sandbox_id,
                                          std::map<std::string, std::string> labels) override;
  asio::awaitable<void> remove_checkpoint(std::string image) override;
  asio::awaitable<std::vector<SandboxInfo>> list_checkpoints() override;
  asio::awaitable<void> pause(std::string sandbox_id) override;
  asio::awaitable<void> resume(std::string sandbox_id) override;
  asio::awaitable<SandboxMetrics> metrics(std::string sandbox_id) override;
  asio::awaitable<void> tend_spares() override;
  asio::awaitable<void> drop_spares() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::gateway
