// E2B's sandboxes (or an E2B-compatible endpoint's) as a SandboxBackend.
#include <rex/backends/e2b/e2b_deployment.hpp>
#include <rex/http/client.hpp>
#include <rex/http/url.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include "backends/e2b/e2b_calls.hpp"
#include "core/clock.hpp"
#include "deployment/hand_over.hpp"

namespace rex {

namespace {

namespace json = boost::json;

constexpr int kMaxPages = 100;

class E2BBackend final : public SandboxBackend {
 public:
  E2BBackend(asio::any_io_executor executor, E2BDeploymentConfig settings)
      : executor_(std::move(executor)),
        settings_(std::move(settings)),
        resolved_(resolve_e2b_config(settings_)) {  // a missing key or a bad URL fails here
    api_url_ = resolved_.api_url;
    api_key_ = resolved_.api_key;
  }

  std::string_view name() const noexcept override { return "e2b"; }

  asio::awaitable<StartedSandbox> create(SandboxRequest request) override {
    // The request over the settings (as given: a key from the environment is named so).
    E2BDeploymentConfig d = settings_;
    if (!request.template_name.empty())
      d.template_id = std::move(request.template_name);
    for (auto& [k, v] : request.env)
      d.env[k] = std::move(v);
    for (auto& [k, v] : request.labels)
      d.metadata[k] = std::move(v);
    if (request.lifetime.count() > 0)
      d.timeout = request.lifetime;
    auto creating =
        create_e2b_sandbox(executor_, std::move(d), std::move(request.working_dir),
                           std::move(request.deployment_id), std::move(request.progress));
    co_return co_await std::move(creating);
  }

  asio::awaitable<void> destroy(std::string id) override {
    auto killing = kill_e2b_sandbox(executor_, resolved_, id);
    auto killed =
        detail::failing_as(fmt::format("e2b: cannot kill sandbox {}: ", id), std::move(killing));
    co_await std::move(killed);
  }

  asio::awaitable<std::optional<std::string>> lost(std::string id) override {
    auto asking = e2b_sandbox_lost(executor_, resolved_, std::move(id));
    co_return co_await std::move(asking);
  }

  asio::awaitable<std::vector<SandboxInfo>> list(
      std::map<std::string, std::string> labels) override {
    http::ClientConfig cc;
    cc.timeout = std::chrono::seconds(30);
    http::Client client(executor_, api_url_, cc);
    std::string filter;
    for (const auto& [k, v] : labels)
      filter += fmt::format("{}{}={}", filter.empty() ? "" : "&", k, v);
    std::vector<SandboxInfo> out;
    std::string next;
    for (int page = 0; page < kMaxPages; ++page) {
      http::ClientRequest get;
      get.target = "/v2/sandboxes?metadata=" + http::url_encode(filter) +
                   (next.empty() ? std::string() : "&nextToken=" + http::url_encode(next));
      get.headers.emplace_back("X-API-KEY", api_key_);
      const auto answer = co_await client.request(std::move(get));
      if (answer.status != 200)
        throw DeploymentStartupError(fmt::format("e2b: listing sandboxes at {}: HTTP {}: {}",
                                                 api_url_, answer.status,
                                                 answer.body.substr(0, 300)));
      boost::system::error_code ec;
      const json::value v = json::parse(answer.body, ec);
      if (ec || !v.is_array())
        throw DeploymentStartupError(
            fmt::format("e2b: listing sandboxes at {}: not a JSON array: {}", api_url_,
                        answer.body.substr(0, 300)));
      for (const auto& item : v.get_array()) {
        const json::object* o = item.if_object();
        if (o == nullptr)
          continue;
        const json::value* id = o->if_contains("sandboxID");
        const json::value* metadata = o->if_contains("metadata");
        if (id == nullptr || !id->is_string() || metadata == nullptr || !metadata->is_object())
          continue;
        SandboxInfo s;
        s.id = std::string(id->get_string());
        for (const auto& [k, m] : metadata->get_object()) {
          if (m.is_string())
            s.labels[std::string(k)] = std::string(m.get_string());
        }
        if (!detail::has_labels(s.labels, labels))
          continue;  // the filter is the endpoint's; this checks it
        const json::value* state = o->if_contains("state");
        s.running = state == nullptr || !state->is_string() || state->get_string() == "running";
        if (const json::value* started = o->if_contains("startedAt");
            started && started->is_string())
          s.created_at = rex::detail::unix_seconds(started->get_string());
        out.push_back(std::move(s));
      }
      const auto token = answer.header("X-Next-Token");
      if (!token || token->empty())
        break;
      next = std::string(*token);
    }
    co_return out;
  }

 private:
  asio::any_io_executor executor_;
  E2BDeploymentConfig settings_;  // as given
  E2BDeploymentConfig resolved_;  // with the environment's values
  std::string api_url_;
  std::string api_key_;
};

}  // namespace

std::unique_ptr<SandboxBackend> open_e2b_backend(asio::any_io_executor executor,
                                                 E2BDeploymentConfig settings) {
  return std::make_unique<E2BBackend>(std::move(executor), std::move(settings));
}

}  // namespace rex
