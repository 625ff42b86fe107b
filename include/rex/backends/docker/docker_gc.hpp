// Garbage collection of rex's containers on a Docker (or Podman) engine: the containers rex
// processes started and can no longer remove themselves (the process is gone, killed or the
// machine rebooted, or the container's lifetime has passed), by the rules of
// rex/deployment/gc.hpp. It is what `rex gc --deployment docker` runs.
#pragma once

#include <rex/deployment/gc.hpp>

#include <boost/asio/awaitable.hpp>

namespace rex {

namespace docker {
class Engine;
}

asio::awaitable<GcReport> collect_garbage(docker::Engine& engine, GcOptions options = {});

}  // namespace rex
