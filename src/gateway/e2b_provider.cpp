#include <rex/gateway/e2b_provider.hpp>

#include <rex/deployment/e2b_deployment.hpp>
#include <rex/http/client.hpp>
#include <rex/http/url.hpp>

#include "core/clock.hpp"
#include "gateway/handed_over.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <ctime>

namespace rex::gateway {

namespace json = boost::json;

namespace {

using detail::kGatewayKey;
using detail::kSessionKey;
// Where execute runs and relative paths point: the home of E2B's default user.
constexpr std::string_view kWorkingDir = "/home/user";
constexpr int kMaxPages = 100;

using rex::detail::unix_seconds;

}  // namespace

struct E2BProvider::Impl {
  asio::any_io_executor executor;
  E2BProviderConfig config;

  E2BDeploymentConfig deployment_config() const {
    E2BDeploymentConfig d;
    d.api_key = config.api_key;
    d.api_url = config.api_url;
    d.sandbox_url = config.sandbox_url;
    d.domain = config.domain;
    d.server_path = config.server_path;
    d.template_server_path = config.template_server_path;
    d.startup_timeout = config.startup_timeout;
    return d;
  }

  // The control API's URL and key, as the deployment resolves them from the environment:
  // once, at the start (DeploymentConfigError then for a missing key or a bad URL).
  std::string api_url;
  std::string api_key;
};

E2BProvider::E2BProvider(asio::any_io_executor executor, E2BProviderConfig config)
    : impl_(std::make_unique<Impl>(Impl{std::move(executor), std::move(config), {}, {}})) {
  const E2BDeployment probe(impl_->executor, impl_->deployment_config());
  impl_->api_url = probe.api_url();
  impl_->api_key = probe.api_key();
}

E2BProvider::~E2BProvider() = default;

asio::awaitable<SandboxAddress> E2BProvider::create(SandboxSpec spec) {
  E2BDeploymentConfig d = impl_->deployment_config();
  d.template_id =
      spec.environment.e2b_template.empty() ? std::string("base") : spec.environment.e2b_template;
  d.env = spec.env;
  d.metadata = {{std::string(kGatewayKey), impl_->config.gateway_id},
                {std::string(kSessionKey), spec.session_id}};
  d.timeout = spec.max_lifetime > 0 ? spec.max_lifetime : 3600;
  // Where sessions work when the environment names no place: where the sandbox starts
  // processes, else the home of E2B's default user.
  auto handing = detail::start_and_hand_over<E2BDeployment>(impl_->executor, std::move(d),
                                                            spec.environment.working_dir,
                                                            std::string(kWorkingDir), "e2b: ");
  co_return co_await std::move(handing);
}

asio::awaitable<void> E2BProvider::destroy(std::string sandbox_id) {
  const std::string& url = impl_->api_url;
  const std::string& key = impl_->api_key;
  http::ClientConfig cc;
  cc.timeout = std::chrono::seconds(30);
  http::Client client(impl_->executor, url, cc);
  http::ClientRequest kill;
  kill.method = "DELETE";
  kill.target = "/sandboxes/" + http::url_encode(sandbox_id);
  kill.headers.emplace_back("X-API-KEY", key);
  std::string failure;
  try {
    const auto answer = co_await client.request(std::move(kill));
    if (answer.status / 100 != 2 && answer.status != 404)
      failure = fmt::format("HTTP {}: {}", answer.status, answer.body.substr(0, 300));
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty())
    throw ProviderError(fmt::format("e2b: cannot kill sandbox {}: {}", sandbox_id, failure));
}

asio::awaitable<std::vector<SandboxListing>> E2BProvider::list() {
  const std::string& url = impl_->api_url;
  const std::string& key = impl_->api_key;
  http::ClientConfig cc;
  cc.timeout = std::chrono::seconds(30);
  http::Client client(impl_->executor, url, cc);
  const std::string filter =
      http::url_encode(fmt::format("{}={}", kGatewayKey, impl_->config.gateway_id));
  std::vector<SandboxListing> out;
  std::string next;
  for (int page = 0; page < kMaxPages; ++page) {
    http::ClientRequest get;
    get.target = "/v2/sandboxes?metadata=" + filter +
                 (next.empty() ? std::string() : "&nextToken=" + http::url_encode(next));
    get.headers.emplace_back("X-API-KEY", key);
    const auto answer = co_await client.request(std::move(get));
    if (answer.status != 200)
      throw ProviderError(fmt::format("e2b: listing sandboxes at {}: HTTP {}: {}", url,
                                      answer.status, answer.body.substr(0, 300)));
    boost::system::error_code ec;
    const json::value v = json::parse(answer.body, ec);
    if (ec || !v.is_array())
      throw ProviderError(fmt::format("e2b: listing sandboxes at {}: not a JSON array: {}", url,
                                      answer.body.substr(0, 300)));
    for (const auto& item : v.get_array()) {
      const json::object* o = item.if_object();
      if (o == nullptr)
        continue;
      const json::value* id = o->if_contains("sandboxID");
      const json::value* metadata = o->if_contains("metadata");
      if (id == nullptr || !id->is_string() || metadata == nullptr || !metadata->is_object())
        continue;
      const json::value* gateway = metadata->get_object().if_contains(kGatewayKey);
      const json::value* session = metadata->get_object().if_contains(kSessionKey);
      if (gateway == nullptr || !gateway->is_string() ||
          gateway->get_string() != impl_->config.gateway_id || session == nullptr ||
          !session->is_string())
        continue;  // the filter is the endpoint's; this checks it
      SandboxListing s;
      s.sandbox_id = std::string(id->get_string());
      s.session_id = std::string(session->get_string());
      const json::value* state = o->if_contains("state");
      s.running = state == nullptr || !state->is_string() || state->get_string() == "running";
      if (const json::value* started = o->if_contains("startedAt"); started && started->is_string())
        s.created_at = unix_seconds(started->get_string());
      out.push_back(std::move(s));
    }
    const auto token = answer.header("X-Next-Token");
    if (!token || token->empty())
      break;
    next = std::string(*token);
  }
  co_return out;
}

}  // namespace rex::gateway
