// Run by CTest after every other test of the docker label (a fixture cleanup, see
// tests/CMakeLists.txt): no container with rex's labels may remain once the suite is done, on a
// machine where nothing else runs rex, nor a checkpoint's or a template's image. Disabled for
// gtest's own runs, which would find the containers of tests still running.
#include <rex/backends/docker/docker_gc.hpp>
#include <rex/docker/engine.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/async_test.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;

// A label of a container or an image, "?" when it has none.
template <class Listed>
std::string label_of(const Listed& listed, const std::string& key) {
  const auto it = listed.labels.find(key);
  return it == listed.labels.end() ? std::string("?") : it->second;
}

TEST(Leftovers, DISABLED_NoRexContainerRemains) {
  asio::io_context io;
  docker::Engine engine(io.get_executor());
  std::vector<std::string> filter{std::string(labels::managed)};
  const auto containers = test::run_async(io, engine.list_containers(filter, true), 60s);
  for (const auto& c : containers) {
    ADD_FAILURE() << "left behind: " << (c.names.empty() ? c.id : c.names.front()) << " ("
                  << c.state << ", image " << c.image << ", owner pid "
                  << label_of(c, std::string(labels::owner_pid)) << ", test label "
                  << label_of(c, "rex.test") << ")";
  }
  // Nor a checkpoint's image, nor a template's (the tests' gateways go for good, and their
  // templates' images with them), on either engine. A template's image is a real gateway's to
  // keep: when scripts/test.sh says when its tests started (REX_TESTS_STARTED, unix seconds),
  // only those made since count.
  std::int64_t since = 0;
  if (const char* started = std::getenv("REX_TESTS_STARTED"))
    since = std::strtoll(started, nullptr, 10);
  for (const char* runtime : {"docker", "podman"}) {
    docker::Engine each(io.get_executor(), docker::engine_config_from_environment(runtime));
    const auto checkpoints = test::run_async(io, each.list_images({"rex.checkpoint"}), 60s);
    const auto templates = test::run_async(io, each.list_images({"rex.template"}), 60s);
    for (const auto& image : checkpoints) {
      ADD_FAILURE() << runtime << ": checkpoint image left behind: " << image.id << " ("
                    << label_of(image, "rex.checkpoint") << " of sandbox "
                    << label_of(image, "rex.checkpoint.sandbox") << ", test label "
                    << label_of(image, "rex.test") << ")";
    }
    for (const auto& image : templates) {
      if (image.created < since)
        continue;
      ADD_FAILURE() << runtime << ": template image left behind: " << image.id << " (template "
                    << label_of(image, "rex.template") << " of gateway "
                    << label_of(image, "rex.gateway") << ")";
    }
  }
}

}  // namespace
}  // namespace rex
