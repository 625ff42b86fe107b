// The runtime conformance suite (tests/conformance) against the runtimes of this process: a
// LocalRuntime, and a RemoteRuntime talking to a rex Server in this process over TCP and over a
// unix socket. "RemoteTcpForeign" is RemoteTcp run as if its files and processes were not this
// machine's, so the suite's container path (shares_host == false) runs everywhere.
#include <rex/runtime/local_runtime.hpp>
#include <rex/runtime/remote_runtime.hpp>
#include <rex/server/server.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>

#include "conformance/conformance.hpp"
#include "support/test_helpers.hpp"

namespace rex::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const RuntimeFactory kLocal{"Local", [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                              return std::make_unique<LocalRuntime>(io.get_executor());
                            }};

// A RemoteRuntime talking to a rex Server over a LocalRuntime, all on the test's io_context:
// the whole wire path, in process.
class ServedRuntime final : public Runtime {
 public:
  // `socket_dir` (may be null) holds the server's unix socket; it goes after everything else.
  ServedRuntime(asio::io_context& io, server::ServerConfig server_config,
                std::unique_ptr<TempDir> socket_dir = nullptr)
      : socket_dir_(std::move(socket_dir)),
        io_(io),
        local_(io.get_executor()),
        server_(io.get_executor(), local_, server_config) {
    server_.listen();
    asio::co_spawn(io, server_.run(), [this](std::exception_ptr e) {
      server_error_ = e;
      server_done_ = true;
    });
    RemoteRuntimeConfig cfg;
    cfg.url = server_.url();
    cfg.auth_token = server_config.auth_token;
    remote_.emplace(io.get_executor(), cfg);
  }

  ~ServedRuntime() override {
    remote_.reset();
    server_.stop();
    const auto until = Clock::now() + 10s;
    io_.restart();
    while (!server_done_ && Clock::now() < until)
      io_.run_one_for(10ms);
    EXPECT_TRUE(server_done_) << "the server did not stop";
    if (server_error_) {
      try {
        std::rethrow_exception(server_error_);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "server: " << e.what();
      }
    }
  }

  asio::awaitable<IsAliveResponse> is_alive() override { return remote_->is_alive(); }
  asio::awaitable<CreateBashSessionResponse> create_session(CreateBashSessionRequest r) override {
    return remote_->create_session(std::move(r));
  }
  asio::awaitable<BashObservation> run_in_session(Action a) override {
    return remote_->run_in_session(std::move(a));
  }
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest r) override {
    return remote_->close_session(std::move(r));
  }
  asio::awaitable<CommandResponse> execute(Command c) override {
    return remote_->execute(std::move(c));
  }
  asio::awaitable<CaptureSessionsResponse> capture_sessions(CaptureSessionsRequest r) override {
    return remote_->capture_sessions(std::move(r));
  }
  asio::awaitable<RestoreSessionsResponse> restore_sessions(RestoreSessionsRequest r) override {
    return remote_->restore_sessions(std::move(r));
  }
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest r) override {
    return remote_->read_file(std::move(r));
  }
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest r) override {
    return remote_->write_file(std::move(r));
  }
  asio::awaitable<UploadResponse> upload(UploadRequest r) override {
    return remote_->upload(std::move(r));
  }
  asio::awaitable<DownloadResponse> download(DownloadRequest r) override {
    return remote_->download(std::move(r));
  }
  asio::awaitable<CloseResponse> close() override { return remote_->close(); }

 private:
  std::unique_ptr<TempDir> socket_dir_;
  asio::io_context& io_;
  LocalRuntime local_;
  server::Server server_;
  std::optional<RemoteRuntime> remote_;
  std::exception_ptr server_error_;
  bool server_done_ = false;
};

const RuntimeFactory kRemoteTcp{"RemoteTcp", [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                  server::ServerConfig cfg;
                                  cfg.host = "127.0.0.1";
                                  cfg.port = 0;
                                  cfg.auth_token = "conformance";
                                  return std::make_unique<ServedRuntime>(io, cfg);
                                }};

const RuntimeFactory kRemoteUnix{"RemoteUnix",
                                 [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                   auto dir = std::make_unique<TempDir>();
                                   server::ServerConfig cfg;
                                   cfg.unix_socket = dir->path() + "/rex.sock";
                                   return std::make_unique<ServedRuntime>(io, cfg, std::move(dir));
                                 }};

// The same server as RemoteTcp, but the tests may not touch its files or processes directly.
const RuntimeFactory kRemoteTcpForeign{"RemoteTcpForeign", kRemoteTcp.make, false};

INSTANTIATE_TEST_SUITE_P(Runtimes, RuntimeConformance,
                         ::testing::Values(kLocal, kRemoteTcp, kRemoteUnix, kRemoteTcpForeign),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
