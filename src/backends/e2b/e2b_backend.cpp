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
    if (request.own_image)
      d.template_id = std::move(request.image);  // a snapshot's id: its sandboxes start from it
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

  // E2B's snapshots, pauses and metrics, as its SDKs call them.
  bool can(SandboxOperation operation) const noexcept override {
    return operation != SandboxOperation::build;
  }

  asio::awaitable<SandboxSnapshot> checkpoint(std::string id,
                                              std::map<std::string, std::string> labels) override {
    json::object body;
    if (const auto it = labels.find("rex.checkpoint"); it != labels.end())
      body["name"] = it->second;
    auto calling =
        call("POST", "/sandboxes/" + http::url_encode(id) + "/snapshots", json::serialize(body));
    const http::ClientResponse answer = co_await std::move(calling);
    if (answer.status != 201 && answer.status != 200)
      throw DeploymentStartupError(refused("snapshotting sandbox " + id, answer));
    boost::system::error_code ec;
    const json::value v = json::parse(answer.body, ec);
    const json::value* snapshot =
        ec || !v.is_object() ? nullptr : v.get_object().if_contains("snapshotID");
    if (snapshot == nullptr || !snapshot->is_string())
      throw DeploymentStartupError(fmt::format("e2b: snapshotting sandbox {}: no snapshotID in {}",
                                               id, answer.body.substr(0, 300)));
    co_return SandboxSnapshot{std::string(snapshot->get_string())};
  }

  asio::awaitable<void> remove_checkpoint(std::string image) override {
    auto calling = call("DELETE", "/templates/" + http::url_encode(image), "");
    const http::ClientResponse answer = co_await std::move(calling);
    if (answer.status / 100 != 2 && answer.status != 404)
      throw DeploymentStartupError(refused("deleting snapshot " + image, answer));
  }

  asio::awaitable<void> pause(std::string id) override {
    auto calling =
        call("POST", "/sandboxes/" + http::url_encode(id) + "/pause", R"({"memory":true})");
    const http::ClientResponse answer = co_await std::move(calling);
    if (answer.status / 100 != 2 && answer.status != 409)  // 409: paused already
      throw DeploymentStartupError(refused("pausing sandbox " + id, answer));
  }

  asio::awaitable<void> resume(std::string id) override {
    auto calling = call("POST", "/v2/sandboxes/" + http::url_encode(id) + "/connect", "{}");
    const http::ClientResponse answer = co_await std::move(calling);
    if (answer.status / 100 != 2)
      throw DeploymentStartupError(refused("resuming sandbox " + id, answer));
  }

  asio::awaitable<SandboxMetrics> metrics(std::string id) override {
    auto calling = call("GET", "/sandboxes/" + http::url_encode(id) + "/metrics", "");
    const http::ClientResponse answer = co_await std::move(calling);
    if (answer.status != 200)
      throw DeploymentStartupError(refused("reading the metrics of sandbox " + id, answer));
    boost::system::error_code ec;
    const json::value v = json::parse(answer.body, ec);
    SandboxMetrics m;
    m.timestamp =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (ec || !v.is_array() || v.get_array().empty() || !v.get_array().back().is_object())
      co_return m;  // no sample yet
    const json::object& last = v.get_array().back().get_object();
    auto number = [&last](std::string_view key) -> double {
      const json::value* f = last.if_contains(key);
      return f != nullptr && f->is_number() ? f->to_number<double>() : 0.0;
    };
    auto bytes = [&number](std::string_view key) {
      const double b = number(key);
      return b > 0 ? static_cast<std::uint64_t>(b) : std::uint64_t{0};
    };
    m.cpu_percent = number("cpuUsedPct");
    m.cpu_count = static_cast<int>(number("cpuCount"));
    m.memory_used = bytes("memUsed");
    m.memory_limit = bytes("memTotal");
    m.disk_used = bytes("diskUsed");
    m.disk_total = bytes("diskTotal");
    if (const double at = number("timestampUnix"); at > 0)
      m.timestamp = at;
    co_return m;
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
  // One call of the control API with the key; the answer as it came.
  asio::awaitable<http::ClientResponse> call(std::string method, std::string target,
                                             std::string body) {
    http::ClientConfig cc;
    cc.timeout = std::chrono::seconds(120);
    http::Client client(executor_, api_url_, cc);
    http::ClientRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.headers.emplace_back("X-API-KEY", api_key_);
    if (!body.empty()) {
      r.headers.emplace_back("Content-Type", "application/json");
      r.body = std::move(body);
    }
    auto requesting = client.request(std::move(r));
    co_return co_await std::move(requesting);
  }

  std::string refused(const std::string& what, const http::ClientResponse& answer) const {
    return fmt::format("e2b: {} at {}: HTTP {}: {}", what, api_url_, answer.status,
                       answer.body.substr(0, 300));
  }

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
