// The backend conformance suite: what every SandboxBackend (rex/deployment/backend.hpp) and its
// entry in the backend table must do, against the real thing or the emulator a suite runs: a
// sandbox created from a request answers, carries the request's labels and deployment id, is found
// by them and by nothing else, is gone after destroy() (and a second destroy() is no error), its
// backend's lost() says nothing while it runs and names it once destroyed, and a client of it then
// reports it lost; a start that fails says why and leaves nothing running behind; `rex gc` through
// the table keeps the sandbox of a live owner, and --all removes it (a dry run only says so; where
// the backend is shared with other tests, --all runs as a dry run only). A test executable
// instantiates it with its backends:
//
//   INSTANTIATE_TEST_SUITE_P(Daytona, BackendConformance, ::testing::Values(BackendCase{...}),
//                            [](const auto& info) { return info.param.name; });
//
// and BackendGcConformance the same way where the backend has `rex gc`.
#pragma once

#include <rex/backends/backends.hpp>
#include <rex/deployment/backend.hpp>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>

namespace rex::test {

struct BackendCase {
  std::string name;  // the test's name: "Daytona", "DockerEngine", ...
  // The backend's settings as this suite's stack wants them (where it lists, its credentials).
  std::function<DeploymentConfig()> settings;
  // Why the backend cannot run here (its stack or emulator is missing), or empty.
  std::function<std::string()> unavailable = [] { return std::string(); };
  // A request that starts a sandbox (its image); the suite adds labels of its own.
  SandboxRequest request{};
  // A request whose start fails here (an image that is not there, or one the emulator fails),
  // and words of the error it must give.
  SandboxRequest failing{};
  std::string failing_says;
  // `rex gc --all` may run: the backend's sandboxes here are this suite's alone (an emulator of
  // its own). False for a shared engine or cluster, where --all would remove other tests'
  // sandboxes: the suite then checks --all as a dry run only and destroys its own.
  bool collects_all = true;
};

std::ostream& operator<<(std::ostream& os, const BackendCase& c);

class BackendConformance : public ::testing::TestWithParam<BackendCase> {
 protected:
  // Skips when the case is unavailable; otherwise opens its backend.
  void SetUp() override;
  // Creates a sandbox of the case's request, named `name`, with `labels` added, for the
  // deployment `deployment_id` (empty: the backend picks one).
  StartedSandbox create(std::string name, std::map<std::string, std::string> labels = {},
                        std::string deployment_id = {});

  asio::io_context io;
  DeploymentConfig settings;
  const Backend* entry = nullptr;  // the table's
  std::unique_ptr<SandboxBackend> backend;
};

/// `rex gc` through the table, for the backends that have it.
class BackendGcConformance : public BackendConformance {};

}  // namespace rex::test
