// `rex gc` on Daytona: rex's sandboxes, by the shared rules.
#include <rex/deployment/daytona_deployment.hpp>
#include <rex/kubernetes/object_fields.hpp>

#include <boost/json.hpp>

namespace rex {

asio::awaitable<GcReport> collect_daytona_garbage(asio::any_io_executor executor,
                                                  DaytonaDeploymentConfig config,
                                                  GcOptions options) {
  auto listing = list_daytona_sandboxes(executor, config, {{std::string(labels::managed), "1"}});
  const boost::json::array sandboxes = co_await std::move(listing);
  std::vector<GcCandidate> found;
  for (const auto& item : sandboxes) {
    const std::string state = kubernetes::field_text(item, {"state"});
    if (state == "destroyed" || state == "destroying")
      continue;  // already going
    GcCandidate c;
    c.id = kubernetes::field_text(item, {"id"});
    if (const auto* object = item.if_object()) {
      if (const auto* l = object->if_contains("labels"); l != nullptr && l->is_object()) {
        for (const auto& [k, v] : l->get_object()) {
          if (v.is_string())
            c.labels[std::string(k)] = std::string(v.get_string());
        }
      }
    }
    if (!c.id.empty())
      found.push_back(std::move(c));
  }
  auto remove = [executor, config](const GcCandidate& c) -> asio::awaitable<void> {
    co_await delete_daytona_sandbox(executor, config, c.id);
  };
  co_return co_await sweep_garbage(std::move(found), options, remove);
}

}  // namespace rex
