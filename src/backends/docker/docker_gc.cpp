// `rex gc` on a Docker (or Podman) engine: rex's containers, by the shared rules.
#include <rex/backends/docker/docker_gc.hpp>
#include <rex/docker/engine.hpp>

namespace rex {

asio::awaitable<GcReport> collect_garbage(docker::Engine& engine, GcOptions options) {
  std::vector<std::string> filter{std::string(labels::managed) + "=1"};
  auto containers = co_await engine.list_containers(filter, true);
  std::vector<GcCandidate> found;
  for (auto& c : containers) {
    std::string name = c.names.empty() ? c.id.substr(0, 12) : c.names.front();
    if (name.starts_with('/'))
      name.erase(0, 1);
    found.push_back(GcCandidate{c.id, std::move(name), std::move(c.labels)});
  }
  std::function<asio::awaitable<void>(const GcCandidate&)> remove =
      [&engine](const GcCandidate& c) -> asio::awaitable<void> {
    co_await engine.remove_container(c.id, true);
  };
  auto sweeping = sweep_garbage(std::move(found), options, std::move(remove));
  co_return co_await std::move(sweeping);
}

}  // namespace rex
