// Daytona's sandboxes as a SandboxBackend.
#include <rex/backends/daytona/daytona_deployment.hpp>
#include <rex/core/object_fields.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>

#include "core/clock.hpp"
#include "deployment/hand_over.hpp"

namespace rex {

namespace {

namespace json = boost::json;

class DaytonaBackend final : public SandboxBackend {
 public:
  DaytonaBackend(asio::any_io_executor executor, DaytonaDeploymentConfig settings)
      : executor_(std::move(executor)) {
    // The key and URL as the deployment resolves them: a missing key fails here.
    const DaytonaDeployment probe(executor_, std::move(settings));
    settings_ = probe.config();
  }

  std::string_view name() const noexcept override { return "daytona"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    DaytonaDeploymentConfig d = settings_;
    if (!request.image.empty())
      d.image = request.image;
    d.env = std::move(request.env);
    d.labels = std::move(request.labels);
    // Daytona counts whole minutes, from one.
    d.container_timeout = Seconds(std::max(60.0, request.lifetime > 0 ? request.lifetime : 3600.0));
    d.runtime_timeout = std::min(Seconds(60), settings_.startup_timeout);
    auto handing = detail::start_and_hand_over<DaytonaDeployment>(executor_, std::move(d),
                                                                  std::move(request.working_dir));
    co_return co_await std::move(handing);
  }

  asio::awaitable<void> destroy(std::string id) override {
    auto deleting = delete_daytona_sandbox(executor_, settings_, id);
    auto deleted = detail::failing_as(fmt::format("daytona: cannot delete sandbox {}: ", id),
                                      std::move(deleting));
    co_await std::move(deleted);
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    auto listing = list_daytona_sandboxes(executor_, settings_, std::move(labels));
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
  DaytonaDeploymentConfig settings_;
};

}  // namespace

std::unique_ptr<SandboxBackend> open_daytona_backend(asio::any_io_executor executor,
                                                     DaytonaDeploymentConfig settings) {
  return std::make_unique<DaytonaBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
