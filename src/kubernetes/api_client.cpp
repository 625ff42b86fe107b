#include <rex/core/text.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/exec_credential.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include "kubernetes/small_file.hpp"

#include <optional>

namespace rex::kubernetes {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kTokenFileAge = std::chrono::minutes(1);
constexpr auto kExpiryMargin = std::chrono::seconds(10);

}  // namespace

ApiError api_error(std::string_view method, std::string_view path,
                   const http::ClientResponse& response) {
  std::string reason;
  std::string message;
  boost::system::error_code ec;
  const json::value v = json::parse(response.body, ec);
  if (!ec && v.is_object()) {
    const auto& o = v.get_object();
    if (const auto* r = o.if_contains("reason"); r != nullptr && r->is_string())
      reason = std::string(r->get_string());
    if (const auto* m = o.if_contains("message"); m != nullptr && m->is_string())
      message = std::string(m->get_string());
  }
  if (message.empty())
    message = response.body.substr(0, 300);
  while (!message.empty() && message.back() == '\n')
    message.pop_back();
  // Formatted first: the arguments below are moved from.
  std::string what =
      fmt::format("{} {}: {}{}{}{}", method, path, response.status, reason.empty() ? "" : " ",
                  reason, message.empty() ? std::string() : ": " + message);
  return ApiError(what, response.status, std::move(reason), std::move(message));
}

struct ApiClient::Impl {
  asio::any_io_executor ex;
  ClusterAccess access;
  ApiClientConfig cfg;
  std::unique_ptr<http::Client> client;

  std::string token_from_file;
  Clock::time_point token_read_at{};

  std::optional<ExecCredential> exec_credential;
  std::optional<Clock::time_point> exec_expires;
  unsigned exec_runs = 0;

  http::ClientConfig tls(const std::string& cert, const std::string& key) const {
    http::ClientConfig c;
    c.timeout = cfg.timeout;
    c.user_agent = cfg.user_agent;
    c.ca_pem = access.ca_pem;
    c.verify_peer = !access.insecure_skip_tls_verify;
    c.tls_server_name = access.tls_server_name;
    c.cert_pem = cert;
    c.key_pem = key;
    return c;
  }

  http::ClientConfig current_tls() const {
    if (exec_credential && !exec_credential->client_cert_pem.empty())
      return tls(exec_credential->client_cert_pem, exec_credential->client_key_pem);
    return tls(access.client_cert_pem, access.client_key_pem);
  }

  std::unique_ptr<http::Client> make_client(const std::string& cert, const std::string& key) {
    const http::ClientConfig c = tls(cert, key);
    try {
      return std::make_unique<http::Client>(ex, access.server, c);
    } catch (const std::invalid_argument& e) {
      throw KubeconfigError(fmt::format("{}: {}", access.source, e.what()));
    } catch (const std::exception& e) {
      throw KubeconfigError(
          fmt::format("{}: the server {:?}: {}", access.source, access.server, e.what()));
    }
  }

  bool exec_current() const {
    return exec_credential && (!exec_expires || Clock::now() < *exec_expires);
  }

  asio::awaitable<void> run_exec() {
    ExecCredential c = co_await run_exec_plugin(*access.exec, access, cfg.exec_timeout);
    ++exec_runs;
    exec_expires.reset();
    if (c.expires) {
      // The credential's wall-clock expiry as a point on the steady clock.
      const auto left = *c.expires - std::chrono::system_clock::now();
      exec_expires = Clock::now() + std::chrono::duration_cast<Clock::duration>(left) -
                     std::chrono::duration_cast<Clock::duration>(kExpiryMargin);
    }
    const bool new_cert = !exec_credential ||
                          exec_credential->client_cert_pem != c.client_cert_pem ||
                          exec_credential->client_key_pem != c.client_key_pem;
    exec_credential = std::move(c);
    if (new_cert && !exec_credential->client_cert_pem.empty())
      client = make_client(exec_credential->client_cert_pem, exec_credential->client_key_pem);
  }

  // The Authorization header's value, or empty.
  asio::awaitable<std::string> authorization() {
    if (access.exec) {
      if (!exec_current())
        co_await run_exec();
      co_return exec_credential->token.empty() ? std::string() : "Bearer " + exec_credential->token;
    }
    if (!access.token.empty())
      co_return "Bearer " + access.token;
    if (!access.token_file.empty()) {
      if (token_from_file.empty() || Clock::now() - token_read_at >= kTokenFileAge) {
        token_from_file = detail::without_trailing_space(
            detail::read_small_file(access.token_file, "the token file"));
        token_read_at = Clock::now();
      }
      co_return "Bearer " + token_from_file;
    }
    if (!access.username.empty())
      co_return "Basic " + base64_encode(access.username + ":" + access.password);
    co_return std::string();
  }

  asio::awaitable<http::ClientResponse> send(http::ClientRequest request) {
    const std::string auth = co_await authorization();
    if (!auth.empty())
      request.headers.emplace_back("Authorization", auth);
    co_return co_await client->request(std::move(request));
  }
};

ApiClient::ApiClient(asio::any_io_executor executor, ClusterAccess access, ApiClientConfig config)
    : impl_(std::make_shared<Impl>()) {
  impl_->ex = std::move(executor);
  impl_->access = std::move(access);
  impl_->cfg = std::move(config);
  impl_->client = impl_->make_client(impl_->access.client_cert_pem, impl_->access.client_key_pem);
}

ApiClient::~ApiClient() = default;

asio::awaitable<http::ClientResponse> ApiClient::request(http::ClientRequest request) {
  auto self = impl_;
  if (!self->access.exec)
    co_return co_await self->send(std::move(request));
  http::ClientRequest again = request;
  http::ClientResponse response = co_await self->send(std::move(request));
  if (response.status != 401)
    co_return response;
  // The plugin's credential may have been revoked or rotated early: once more with a new one.
  self->exec_credential.reset();
  co_return co_await self->send(std::move(again));
}

asio::awaitable<json::value> ApiClient::call(std::string method, std::string path, json::value body,
                                             std::string content_type) {
  http::ClientRequest request;
  request.method = method;
  request.target = path;
  request.headers.emplace_back("Accept", "application/json");
  if (!body.is_null()) {
    request.body = json::serialize(body);
    request.headers.emplace_back("Content-Type", std::move(content_type));
  }
  const http::ClientResponse response = co_await this->request(std::move(request));
  if (response.status / 100 != 2)
    throw api_error(method, path, response);
  if (response.body.empty())
    co_return nullptr;
  boost::system::error_code ec;
  json::value v = json::parse(response.body, ec);
  if (ec)
    throw ApiError(fmt::format("{} {}: {} with a body that is not JSON: {:?}", method, path,
                               response.status, response.body.substr(0, 200)),
                   response.status, "", "not JSON");
  co_return v;
}

asio::awaitable<std::string> ApiClient::authorization() {
  auto self = impl_;
  co_return co_await self->authorization();
}

void ApiClient::renew_credentials() noexcept {
  impl_->exec_credential.reset();
  impl_->token_from_file.clear();
}

http::ClientConfig ApiClient::tls_config() const {
  return impl_->current_tls();
}

const ClusterAccess& ApiClient::access() const noexcept {
  return impl_->access;
}

unsigned ApiClient::exec_runs() const noexcept {
  return impl_->exec_runs;
}

}  // namespace rex::kubernetes
