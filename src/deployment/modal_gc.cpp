// `rex gc` on Modal: rex's running sandboxes, by the shared rules.
#include <rex/deployment/modal_deployment.hpp>

namespace rex {

asio::awaitable<GcReport> collect_modal_garbage(asio::any_io_executor executor,
                                                ModalDeploymentConfig config, GcOptions options) {
  auto listing = list_modal_sandboxes(executor, config, {{std::string(labels::managed), "1"}});
  std::vector<ModalSandboxListing> sandboxes = co_await std::move(listing);
  std::vector<GcCandidate> found;
  for (auto& s : sandboxes) {
    if (s.running)
      found.push_back(GcCandidate{s.sandbox_id, {}, std::move(s.tags)});
  }
  auto remove = [executor, config](const GcCandidate& c) -> asio::awaitable<void> {
    co_await terminate_modal_sandbox(executor, config, c.id);
  };
  co_return co_await sweep_garbage(std::move(found), options, remove);
}

}  // namespace rex
