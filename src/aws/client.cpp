#include <rex/aws/client.hpp>
#include <rex/core/random.hpp>
#include <rex/core/retry.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/url.hpp>

#include <fmt/core.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <array>
#include <random>

namespace rex::aws {

namespace json = boost::json;

const Service kEcs{"ECS", "ecs", "ecs", "AmazonEC2ContainerServiceV20141113", "", false};
const Service kEc2{"EC2", "ec2", "ec2", "", "2016-11-15", false};
const Service kIam{"IAM", "iam", "iam", "", "2010-05-08", true};

namespace {

constexpr std::size_t kBodyInMessages = 300;

std::string clip(std::string_view text) {
  if (text.size() <= kBodyInMessages)
    return std::string(text);
  return std::string(text.substr(0, kBodyInMessages)) + "...";
}

bool one_of(std::string_view code, std::initializer_list<std::string_view> codes) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

// "aws.protocols#ClientException:http://..." -> "ClientException"
std::string bare_code(std::string_view type) {
  if (const auto colon = type.find(':'); colon != std::string_view::npos)
    type = type.substr(0, colon);
  if (const auto hash = type.rfind('#'); hash != std::string_view::npos)
    type = type.substr(hash + 1);
  return std::string(type);
}

// The Host header as sent and signed: no port when it is the scheme's own.
std::string host_of(const http::Url& url) {
  const bool default_port = (url.scheme == http::Url::Scheme::https && url.port == 443) ||
                            (url.scheme == http::Url::Scheme::http && url.port == 80);
  if (!default_port)
    return url.host_header();
  return url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
}

// A Query call's body: form encoding as AWS's SDKs send it (a space is '+'), sorted. The
// signature covers the body's hash, so any encoding would do for AWS itself; emulators that
// re-encode the parsed form to check it (moto) expect this one.
std::string form_body(const Headers& params) {
  std::string body = canonical_query(params);
  std::string out;
  out.reserve(body.size());
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body.compare(i, 3, "%20") == 0) {
      out.push_back('+');
      i += 2;
    } else {
      out.push_back(body[i]);
    }
  }
  return out;
}

}  // namespace

AwsError::AwsError(const std::string& what, std::string code, std::string message, unsigned status)
    : std::runtime_error(what),
      code_(std::move(code)),
      message_(std::move(message)),
      status_(status) {}

bool is_throttling(std::string_view code) {
  return one_of(
      code, {"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
             "TooManyRequestsException", "ProvisionedThroughputExceededException",
             "TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
             "RequestThrottled", "SlowDown", "PriorRequestNotComplete", "EC2ThrottledException"});
}

bool is_retryable(std::string_view code, unsigned status) {
  return is_throttling(code) ||
         one_of(code, {"RequestTimeout", "RequestTimeoutException", "InternalError",
                       "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException",
                       "InternalServerError", "IDPCommunicationError"}) ||
         status == 500 || status == 502 || status == 503 || status == 504;
}

bool is_credential_error(std::string_view code) {
  return one_of(code, {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId",
                       "UnrecognizedClientException", "SignatureDoesNotMatch", "AuthFailure",
                       "InvalidSignatureException", "IncompleteSignature",
                       "MissingAuthenticationToken", "InvalidAccessKeyId", "RequestExpired"});
}

std::pair<std::string, std::string> error_of(unsigned status, std::string_view body,
                                             std::string_view error_type_header) {
  std::string code = error_type_header.empty() ? std::string() : bare_code(error_type_header);
  std::string message;
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    const json::object& o = v.get_object();
    for (const char* key : {"__type", "code", "Code"})
      if (const auto* t = o.if_contains(key); t != nullptr && t->is_string() && code.empty())
        code = bare_code(t->get_string());
    for (const char* key : {"message", "Message", "errorMessage"})
      if (const auto* m = o.if_contains(key); m != nullptr && m->is_string() && message.empty())
        message = std::string(m->get_string());
  } else if (body.find('<') != std::string_view::npos) {
    try {
      const XmlElement root = parse_xml(body);
      const XmlElement* error = root.name == "Error" ? &root : root.find("Error");
      if (error != nullptr) {
        if (code.empty())
          code = error->text_at("Code");
        message = error->text_at("Message");
      }
    } catch (const XmlError&) {
    }
  }
  if (code.empty())
    code = fmt::format("HTTP {}", status);
  if (message.empty())
    message = clip(body);
  return {std::move(code), std::move(message)};
}

AwsConfig config_from_environment(const std::string& profile, const std::string& region,
                                  const EnvLookup& env) {
  AwsConfig c;
  c.credentials = find_credentials(profile, env);
  c.region = region.empty() ? find_region(profile, env) : region;
  c.endpoint_url = env("AWS_ENDPOINT_URL").value_or("");
  for (const Service* s : {&kEcs, &kEc2, &kIam}) {
    std::string name = "AWS_ENDPOINT_URL_" + s->endpoint_prefix;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    if (auto url = env(name); url && !url->empty())
      c.service_endpoints[s->endpoint_prefix] = *url;
  }
  return c;
}

struct AwsClient::Impl {
  asio::any_io_executor ex;
  AwsConfig cfg;
  std::map<std::string, std::unique_ptr<http::Client>> clients;  // by base URL

  std::string endpoint_of(const Service& s) const {
    if (auto it = cfg.service_endpoints.find(s.endpoint_prefix); it != cfg.service_endpoints.end())
      return it->second;
    if (!cfg.endpoint_url.empty())
      return cfg.endpoint_url;
    if (s.global)
      return fmt::format("https://{}.amazonaws.com", s.endpoint_prefix);
    return fmt::format("https://{}.{}.amazonaws.com", s.endpoint_prefix, cfg.region);
  }

  http::Client& client_of(const std::string& base) {
    auto& c = clients[base];
    if (!c) {
      http::ClientConfig hc;
      hc.timeout = cfg.timeout;
      hc.user_agent = "rex-aws";
      c = std::make_unique<http::Client>(ex, base, hc);
    }
    return *c;
  }

  // One call, signed anew for each attempt; AWS's retries around it.
  asio::awaitable<http::ClientResponse> call(const Service& s, const std::string& operation,
                                             Headers headers, std::string body) {
    const std::string base = endpoint_of(s);
    http::Client& client = client_of(base);
    const std::string host = host_of(client.base_url());
    const Scope scope{s.global ? "us-east-1" : cfg.region, s.signing_name};
    const std::string what = s.name + " " + operation;
    auto attempt = [&](unsigned n,
                       bool last) -> asio::awaitable<std::optional<http::ClientResponse>> {
      SigningRequest sr;
      sr.method = "POST";
      sr.host = host;
      sr.path = client.base_url().prefix.empty() ? "/" : client.base_url().prefix + "/";
      sr.headers = headers;
      sr.body = body;
      http::ClientRequest r;
      r.method = "POST";
      r.target = "/";
      r.headers = headers;
      r.headers.emplace_back("Host", host);
      for (auto& h : sign_v4(sr, cfg.credentials, scope, std::chrono::system_clock::now()))
        r.headers.push_back(std::move(h));
      r.body = body;
      http::ClientResponse got;
      try {
        auto sending = client.request(std::move(r));
        got = co_await std::move(sending);
      } catch (const http::ConnectionError&) {
        if (last)
          throw;
        co_return std::nullopt;
      }
      if (got.status / 100 == 2)
        co_return got;
      const auto [code, message] =
          error_of(got.status, got.body, got.header("X-Amzn-ErrorType").value_or(""));
      if (is_credential_error(code))
        throw AwsError(
            fmt::format("{}: {}: {} (credentials from {})", what, code, message,
                        cfg.credentials.source.empty() ? "the caller" : cfg.credentials.source),
            code, message, got.status);
      if (!is_retryable(code, got.status) || last)
        throw AwsError(fmt::format("{}: {}: {}{}", what, code, message,
                                   n > 1 ? fmt::format(" ({} attempts)", n) : ""),
                       code, message, got.status);
      co_return std::nullopt;
    };
    auto calling = retrying<http::ClientResponse>(ex, RetryLoop{cfg.max_attempts, cfg.backoff},
                                                  std::move(attempt));
    co_return co_await std::move(calling);
  }
};

AwsClient::AwsClient(asio::any_io_executor executor, AwsConfig config)
    : impl_(std::make_shared<Impl>()) {
  impl_->ex = std::move(executor);
  impl_->cfg = std::move(config);
}

AwsClient::~AwsClient() = default;

std::string AwsClient::endpoint_of(const Service& service) const {
  return impl_->endpoint_of(service);
}

const AwsConfig& AwsClient::config() const noexcept {
  return impl_->cfg;
}

asio::awaitable<json::object> AwsClient::json_call(const Service& service, std::string operation,
                                                   json::object params) {
  auto keep = impl_;
  if (service.json_target.empty())
    throw std::invalid_argument(service.name + " is not a JSON 1.1 service");
  Headers headers{{"Content-Type", "application/x-amz-json-1.1"},
                  {"X-Amz-Target", service.json_target + "." + operation}};
  auto op = keep->call(service, operation, std::move(headers), json::serialize(params));
  const http::ClientResponse got = co_await std::move(op);
  if (got.body.empty())
    co_return json::object();
  boost::system::error_code ec;
  json::value v = json::parse(got.body, ec);
  if (ec || !v.is_object())
    throw AwsError(fmt::format("{} {}: the answer is not a JSON object: {}", service.name,
                               operation, clip(got.body)),
                   "BadAnswer", clip(got.body), got.status);
  co_return std::move(v.get_object());
}

asio::awaitable<XmlElement> AwsClient::query_call(const Service& service, std::string operation,
                                                  Headers params) {
  auto keep = impl_;
  if (service.api_version.empty())
    throw std::invalid_argument(service.name + " is not a Query service");
  params.emplace_back("Action", operation);
  params.emplace_back("Version", service.api_version);
  Headers headers{{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}};
  auto op = keep->call(service, operation, std::move(headers), form_body(params));
  const http::ClientResponse got = co_await std::move(op);
  try {
    co_return parse_xml(got.body);
  } catch (const XmlError& e) {
    throw AwsError(fmt::format("{} {}: the answer is not XML ({}): {}", service.name, operation,
                               e.what(), clip(got.body)),
                   "BadAnswer", clip(got.body), got.status);
  }
}

}  // namespace rex::aws
