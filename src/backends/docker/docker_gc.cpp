// `rex gc` on a Docker (or Podman) engine: rex's containers, by the shared rules.
#include <rex/backends/docker/docker_gc.hpp>
#include <rex/docker/engine.hpp>

#include <algorithm>
#include <set>

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
  // Checkpoints' images: they carry the labels of the container they were taken of, so the same
  // rules find the ones whose owner is gone. One a sandbox still starts from is refused by the
  // engine, and stays until that sandbox goes.
  filter.push_back("rex.checkpoint");
  auto images = co_await engine.list_images(filter);
  // Newest first: a checkpoint taken of a fork is a child of the fork's image, which the engine
  // keeps while a child exists.
  std::sort(images.begin(), images.end(),
            [](const auto& a, const auto& b) { return a.created > b.created; });
  std::set<std::string> image_ids;
  for (auto& image : images) {
    std::string name = image.tags.empty() ? image.id : image.tags.front();
    image_ids.insert(image.id);
    found.push_back(GcCandidate{image.id, "image " + name, std::move(image.labels)});
  }
  std::function<asio::awaitable<void>(const GcCandidate&)> remove =
      [&engine, image_ids](const GcCandidate& c) -> asio::awaitable<void> {
    if (image_ids.contains(c.id))
      co_await engine.remove_image(c.id, false);
    else
      co_await engine.remove_container(c.id, true);
  };
  auto sweeping = sweep_garbage(std::move(found), options, std::move(remove));
  co_return co_await std::move(sweeping);
}

}  // namespace rex
