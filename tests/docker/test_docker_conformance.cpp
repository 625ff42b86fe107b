// The runtime conformance suite (tests/conformance) through DockerDeployment: a fresh container
// of the bookworm test image per test, reached over a published port, and over a unix socket in
// network-less mode, and under the hardened security profile. The container's files and processes
// are not this process's, so the suite makes its runtime-side paths and checks through the runtime.
#include <rex/deployment/docker_deployment.hpp>

#include <gtest/gtest.h>

#include "conformance/conformance.hpp"
#include "support/async_test.hpp"

namespace rex::test {
namespace {

using namespace std::chrono_literals;

// A started DockerDeployment behind the Runtime interface; stopping it removes the container.
class DeployedRuntime final : public Runtime {
 public:
  DeployedRuntime(asio::io_context& io, DockerDeploymentConfig config)
      : io_(io), deployment_(io.get_executor(), std::move(config)) {
    run_async(io_, deployment_.start(), 120s);
  }
  ~DeployedRuntime() override {
    try {
      run_async(io_, deployment_.stop(), 60s);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stopping the deployment: " << e.what();
    }
  }

  asio::awaitable<IsAliveResponse> is_alive() override { return rt().is_alive(); }
  asio::awaitable<CreateBashSessionResponse> create_session(CreateBashSessionRequest r) override {
    return rt().create_session(std::move(r));
  }
  asio::awaitable<BashObservation> run_in_session(Action a) override {
    return rt().run_in_session(std::move(a));
  }
  asio::awaitable<BashObservation> run_in_session_streaming(Action a, OutputListener l) override {
    return rt().run_in_session_streaming(std::move(a), std::move(l));
  }
  asio::awaitable<CloseBashSessionResponse> close_session(CloseBashSessionRequest r) override {
    return rt().close_session(std::move(r));
  }
  asio::awaitable<CommandResponse> execute(Command c) override {
    return rt().execute(std::move(c));
  }
  asio::awaitable<ReadFileResponse> read_file(ReadFileRequest r) override {
    return rt().read_file(std::move(r));
  }
  asio::awaitable<WriteFileResponse> write_file(WriteFileRequest r) override {
    return rt().write_file(std::move(r));
  }
  asio::awaitable<UploadResponse> upload(UploadRequest r) override {
    return rt().upload(std::move(r));
  }
  asio::awaitable<DownloadResponse> download(DownloadRequest r) override {
    return rt().download(std::move(r));
  }
  asio::awaitable<CloseResponse> close() override { return rt().close(); }

 private:
  Runtime& rt() { return deployment_.runtime(); }
  asio::io_context& io_;
  DockerDeployment deployment_;
};

DockerDeploymentConfig bookworm() {
  DockerDeploymentConfig c;
  c.image = "rex-test-bookworm:latest";
  c.pull = PullPolicy::never;
  c.startup_timeout = 60;
  c.labels = {{"rex.test", "conformance"}};
  return c;
}

const RuntimeFactory kDockerTcp{"DockerTcp",
                                [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                  return std::make_unique<DeployedRuntime>(io, bookworm());
                                },
                                false};

const RuntimeFactory kDockerUnix{"DockerUnix",
                                 [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                   auto c = bookworm();
                                   c.network_mode = "none";
                                   return std::make_unique<DeployedRuntime>(io, c);
                                 },
                                 false};

// The hardened profile: read-only root, capabilities dropped, no network. The suite works in
// /tmp (a tmpfs there) and the work dir.
const RuntimeFactory kDockerHardened{"DockerHardened",
                                     [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                       auto c = bookworm();
                                       c.security_profile = "hardened";
                                       return std::make_unique<DeployedRuntime>(io, c);
                                     },
                                     false};

INSTANTIATE_TEST_SUITE_P(Docker, RuntimeConformance,
                         ::testing::Values(kDockerTcp, kDockerUnix, kDockerHardened),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
