// The runtime conformance suite (tests/conformance) through DockerDeployment: a fresh container
// of the bookworm test image per test, reached over a published port, and over a unix socket in
// network-less mode, and under the hardened security profile. The container's files and processes
// are not this process's, so the suite makes its runtime-side paths and checks through the runtime.
#include <rex/backends/docker/docker_deployment.hpp>

#include <gtest/gtest.h>

#include "conformance/backend_conformance.hpp"
#include "conformance/conformance.hpp"
#include "support/async_test.hpp"
#include "support/deployed_runtime.hpp"

namespace rex::test {
namespace {

using namespace std::chrono_literals;

// A started DockerDeployment behind the Runtime interface; stopping it removes the container.
using DeployedDocker = DeployedRuntime<DockerDeployment>;

DockerDeploymentConfig bookworm() {
  DockerDeploymentConfig c;
  c.image = "rex-test-bookworm:latest";
  c.pull = PullPolicy::never;
  c.startup_timeout = Seconds(60);
  c.labels = {{"rex.test", "conformance"}};
  return c;
}

const RuntimeFactory kDockerTcp{"DockerTcp",
                                [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                  return std::make_unique<DeployedDocker>(io, bookworm());
                                },
                                false};

const RuntimeFactory kDockerUnix{"DockerUnix",
                                 [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                   auto c = bookworm();
                                   c.network_mode = "none";
                                   return std::make_unique<DeployedDocker>(io, c);
                                 },
                                 false};

// The hardened profile: read-only root, capabilities dropped, no network. The suite works in
// /tmp (a tmpfs there) and the work dir.
const RuntimeFactory kDockerHardened{"DockerHardened",
                                     [](asio::io_context& io) -> std::unique_ptr<Runtime> {
                                       auto c = bookworm();
                                       c.security_profile = "hardened";
                                       return std::make_unique<DeployedDocker>(io, c);
                                     },
                                     false};

INSTANTIATE_TEST_SUITE_P(Docker, RuntimeConformance,
                         ::testing::Values(kDockerTcp, kDockerUnix, kDockerHardened),
                         [](const auto& info) { return info.param.name; });

// The backend conformance suite on Docker's engine and Podman's: shared with the other docker
// tests, so `rex gc --all` runs as a dry run only.
BackendCase engine_backend(const char* name, const char* runtime) {
  BackendCase c;
  c.name = name;
  c.settings = [runtime] {
    DockerDeploymentConfig d;
    d.container_runtime = runtime;
    d.pull = PullPolicy::never;
    d.startup_timeout = Seconds(60);
    return DeploymentConfig(std::move(d));
  };
  c.request.image = "rex-test-bookworm:latest";
  c.failing.image = "rex-test-no-such-image:none";
  c.failing_says = "image 'rex-test-no-such-image:none' is not present";
  c.collects_all = false;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Engines, BackendConformance,
                         ::testing::Values(engine_backend("Docker", "docker"),
                                           engine_backend("Podman", "podman")),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Engines, BackendGcConformance,
                         ::testing::Values(engine_backend("Docker", "docker"),
                                           engine_backend("Podman", "podman")),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rex::test
