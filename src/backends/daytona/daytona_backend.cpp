// Daytona's sandboxes as a SandboxBackend.
#include <rex/backends/daytona/daytona_deployment.hpp>
#include <rex/core/object_fields.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <optional>

#include "backends/daytona/daytona_calls.hpp"
#include "core/clock.hpp"
#include "deployment/hand_over.hpp"

namespace rex {

namespace {

namespace json = boost::json;

class DaytonaBackend final : public SandboxBackend {
 public:
  DaytonaBackend(asio::any_io_executor executor, DaytonaDeploymentConfig settings)
      : executor_(std::move(executor)),
        settings_(std::move(settings)),
        resolved_(resolve_daytona_config(settings_)) {}  // a missing key fails here

  std::string_view name() const noexcept override { return "daytona"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    // The request over the settings (as given: a key from the environment is named so).
    DaytonaDeploymentConfig d = settings_;
    detail::lay_request_over(d, request);
    if (request.lifetime.count() > 0)  // Daytona counts whole minutes, from one
      d.container_timeout = std::max(Seconds(60), request.lifetime);
    auto creating =
        create_daytona_sandbox(executor_, std::move(d), std::move(request.working_dir),
                               std::move(request.deployment_id), std::move(request.progress));
    co_return co_await std::move(creating);
  }

  asio::awaitable<void> destroy(std::string id) override {
    auto deleting = delete_daytona_sandbox(executor_, resolved_, id);
    auto deleted = detail::failing_as(fmt::format("daytona: cannot delete sandbox {}: ", id),
                                      std::move(deleting));
    co_await std::move(deleted);
  }

  asio::awaitable<std::optional<std::string>> lost(std::string id) override {
    auto asking = daytona_sandbox_lost(executor_, resolved_, std::move(id));
    co_return co_await std::move(asking);
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    auto listing = list_daytona_sandboxes(executor_, resolved_, std::move(labels));
    auto listed = detail::failing_as("daytona: listing sandboxes: ", std::move(listing));
    const json::array found = co_await std::move(listed);
    std::vector<SandboxInfo> out;
    for (const auto& item : found) {
      const std::string state = field_text(item, {"state"});
      if (state == "destroyed" || state == "destroying")
        continue;  // gone, or going
      SandboxInfo s;
      s.id = field_text(item, {"id"});
      if (const auto* l = item.is_object() ? item.get_object().if_contains("labels") : nullptr;
          l != nullptr && l->is_object()) {
        for (const auto& [k, v] : l->get_object()) {
          if (v.is_string())
            s.labels[std::string(k)] = std::string(v.get_string());
        }
      }
      // A sandbox still being made counts as running: its create may be in flight.
      s.running =
          state != "stopped" && state != "error" && state != "build_failed" && state != "archived";
      s.created_at = rex::detail::unix_seconds(field_text(item, {"createdAt"}));
      if (!s.id.empty())
        out.push_back(std::move(s));
    }
    co_return out;
  }

 private:
  asio::any_io_executor executor_;
  DaytonaDeploymentConfig settings_;  // as given
  DaytonaDeploymentConfig resolved_;  // with the environment's values
};

}  // namespace

std::unique_ptr<SandboxBackend> open_daytona_backend(asio::any_io_executor executor,
                                                     DaytonaDeploymentConfig settings) {
  return std::make_unique<DaytonaBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
