// Run by CTest after every other test of the docker label (a fixture cleanup, see
// tests/CMakeLists.txt): no container with rex's labels may remain once the suite is done, on a
// machine where nothing else runs rex, nor a checkpoint's image. Disabled for gtest's own runs,
// which would find the containers of tests still running.
#include <rex/backends/docker/docker_gc.hpp>
#include <rex/docker/engine.hpp>

#include <gtest/gtest.h>

#include <string>

#include "support/async_test.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;

TEST(Leftovers, DISABLED_NoRexContainerRemains) {
  asio::io_context io;
  docker::Engine engine(io.get_executor());
  std::vector<std::string> filter{std::string(labels::managed)};
  const auto containers = test::run_async(io, engine.list_containers(filter, true), 60s);
  for (const auto& c : containers) {
    auto owner = [&](std::string_view key) {
      auto it = c.labels.find(std::string(key));
      return it == c.labels.end() ? std::string("?") : it->second;
    };
    ADD_FAILURE() << "left behind: " << (c.names.empty() ? c.id : c.names.front()) << " ("
                  << c.state << ", image " << c.image << ", owner pid " << owner(labels::owner_pid)
                  << ", test label " << owner("rex.test") << ")";
  }
  // Nor a checkpoint's image, on either engine.
  for (const char* runtime : {"docker", "podman"}) {
    docker::Engine each(io.get_executor(), docker::engine_config_from_environment(runtime));
    const auto images = test::run_async(io, each.list_images({"rex.checkpoint"}), 60s);
    for (const auto& image : images) {
      auto label = [&](const char* key) {
        auto it = image.labels.find(key);
        return it == image.labels.end() ? std::string("?") : it->second;
      };
      ADD_FAILURE() << runtime << ": checkpoint image left behind: " << image.id << " ("
                    << label("rex.checkpoint") << " of sandbox " << label("rex.checkpoint.sandbox")
                    << ", test label " << label("rex.test") << ")";
    }
  }
}

}  // namespace
}  // namespace rex
