#include <rex/backends/gateway/gateway_deployment.hpp>

#include <rex/core/random.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/url.hpp>

#include "deployment/service_client.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <chrono>

namespace rex {

namespace json = boost::json;

namespace {

using detail::json_string_map;

// The gateway's error shape, {"error": {"code", "message"}}, as one line.
std::string gateway_error(const http::ClientResponse& r) {
  boost::system::error_code ec;
  const json::value v = json::parse(r.body, ec);
  if (!ec && v.is_object()) {
    if (const auto* e = v.get_object().if_contains("error"); e != nullptr && e->is_object()) {
      const auto& o = e->get_object();
      const auto* code = o.if_contains("code");
      const auto* message = o.if_contains("message");
      if (code != nullptr && code->is_string() && message != nullptr && message->is_string())
        return fmt::format("{} ({})", std::string_view(message->get_string()),
                           std::string_view(code->get_string()));
    }
  }
  return fmt::format("HTTP {}: {}", r.status, r.body.substr(0, 500));
}

}  // namespace

GatewayDeployment::GatewayDeployment(asio::any_io_executor executor, GatewayDeploymentConfig config)
    : executor_(std::move(executor)), config_(std::move(config)) {
  config_.url = detail::checked_base_url(config_.url, "gateway.url");
}

GatewayDeployment::~GatewayDeployment() = default;

asio::awaitable<void> GatewayDeployment::start() {
  if (started_ || stopped_)
    throw DeploymentStartupError("a gateway deployment starts once");
  emit(DeploymentStage::creating,
       fmt::format("creating a {} session on {}", config_.environment, config_.url));
  json::object body{{"environment", config_.environment},
                    {"metadata", json_string_map(config_.metadata)},
                    {"env", json_string_map(config_.env)}};
  if (!config_.provider.empty())
    body["provider"] = config_.provider;
  if (config_.timeout)
    body["timeout"] = *config_.timeout;
  if (config_.max_lifetime)
    body["max_lifetime"] = *config_.max_lifetime;

  http::ClientConfig cc;
  cc.timeout = detail::seconds_to_ms(config_.startup_timeout);
  http::Client client(executor_, config_.url, cc);
  http::ClientRequest create;
  create.method = "POST";
  create.target = "/api/sessions";
  create.body = json::serialize(body);
  create.headers.emplace_back("Content-Type", "application/json");
  // A create retried after a lost connection makes one sandbox, not two.
  create.headers.emplace_back("Idempotency-Key", "rex-" + random_hex(12));
  if (!config_.token.empty())
    create.headers.emplace_back("Authorization", "Bearer " + config_.token);
  http::ClientResponse answer;
  try {
    answer = co_await client.request(std::move(create));
  } catch (const std::exception& e) {
    throw DeploymentStartupError(
        fmt::format("cannot reach the gateway at {}: {}", config_.url, e.what()));
  }
  if (answer.status != 201)
    throw DeploymentStartupError(fmt::format("the gateway at {} refused the session: {}",
                                             config_.url, gateway_error(answer)));
  boost::system::error_code ec;
  const json::value created = json::parse(answer.body, ec);
  const json::value* id =
      ec || !created.is_object() ? nullptr : created.get_object().if_contains("session_id");
  if (id == nullptr || !id->is_string())
    throw DeploymentStartupError(fmt::format("the gateway at {} answered without a session_id: {}",
                                             config_.url, answer.body.substr(0, 500)));
  session_id_ = std::string(id->get_string());

  RemoteRuntimeConfig rc;
  rc.url = fmt::format("{}/api/sessions/{}/swerex", config_.url, session_id_);
  rc.auth_token = config_.token;
  runtime_ = std::make_unique<RemoteRuntime>(executor_, rc);
  emit(DeploymentStage::waiting, fmt::format("session {} on {}", session_id_, config_.url));
  std::exception_ptr failure;
  try {
    co_await runtime_->wait_until_alive(detail::seconds_to_ms(config_.startup_timeout));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    co_await stop();
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      throw DeploymentStartupError(
          fmt::format("session {} on {} did not answer: {}", session_id_, config_.url, e.what()));
    }
  }
  started_ = true;
  emit(DeploymentStage::ready, fmt::format("session {} ready", session_id_));
}

asio::awaitable<void> GatewayDeployment::stop() {
  if (stopped_)
    co_return;
  stopped_ = true;
  started_ = false;
  runtime_.reset();
  if (session_id_.empty())
    co_return;
  emit(DeploymentStage::stopping, fmt::format("destroying session {}", session_id_));
  http::Client client(executor_, config_.url);
  http::ClientRequest destroy;
  destroy.method = "DELETE";
  destroy.target = "/api/sessions/" + session_id_;
  if (!config_.token.empty())
    destroy.headers.emplace_back("Authorization", "Bearer " + config_.token);
  try {
    const auto answer = co_await client.request(std::move(destroy));
    (void)answer;  // 200, or 404/410 for a session already gone: both leave nothing behind
  } catch (const std::exception&) {
    // The gateway's own lifetimes end the session when it cannot be reached now.
  }
  emit(DeploymentStage::stopped, fmt::format("session {} destroyed", session_id_));
}

Runtime& GatewayDeployment::runtime() {
  if (!started_ || !runtime_)
    throw DeploymentNotStartedError("the gateway deployment is not started");
  return *runtime_;
}

bool GatewayDeployment::started() const noexcept {
  return started_;
}

}  // namespace rex
