// A client of AWS's APIs: signed calls in the two protocols rex needs, with AWS's retries.
//
// - JSON 1.1 (ECS): POST / with X-Amz-Target "<prefix>.<Operation>" and a JSON body; the
//   answer is JSON.
// - Query (EC2, IAM): POST / with a form body Action=<Operation>&Version=<version>&<params>;
//   the answer is XML.
// Either may answer an error as JSON or as XML whatever the protocol (some front ends answer
// XML for a JSON service); both are read.
//
// Retries: throttling (Throttling, ThrottlingException, RequestLimitExceeded, ...), AWS's
// transient errors (InternalError, ServiceUnavailable, RequestTimeout, ...), HTTP 500, 502,
// 503 and 504, and connections lost before an answer are tried again up to max_attempts in
// all, after exponential delays with full jitter. Everything else fails at once, and so does
// a credential that is wrong or expired (its message says where the credentials came from).
//
// Errors: AwsError, "<Service> <Operation>: <Code>: <AWS's message>" with the code, message
// and HTTP status apart. A lost connection or timeout after the last attempt is the HTTP
// client's ConnectionError or RequestTimeoutError.
//
// Threading: one executor; calls may run side by side.
#pragma once

#include <rex/aws/credentials.hpp>
#include <rex/aws/sigv4.hpp>
#include <rex/aws/xml.hpp>
#include <rex/core/backoff.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rex::aws {

namespace asio = boost::asio;

/// One AWS API: how it is reached and signed.
struct Service {
  std::string name;             // for messages: "ECS"
  std::string endpoint_prefix;  // the host's first label: "ecs" (ecs.REGION.amazonaws.com)
  std::string signing_name;     // the scope's service: "ecs"
  std::string json_target;      // JSON 1.1: X-Amz-Target's prefix; empty for Query APIs
  std::string api_version;      // Query: the Version parameter
  bool global = false;          // one endpoint for every region (IAM), signed for us-east-1
};

extern const Service kEcs;
extern const Service kEc2;
extern const Service kIam;

class AwsError : public std::runtime_error {
 public:
  AwsError(const std::string& what, std::string code, std::string message, unsigned status);

  const std::string& code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  unsigned status() const noexcept { return status_; }

 private:
  std::string code_;
  std::string message_;
  unsigned status_;
};

/// Whether an error code (or a status, for codes AWS leaves out) is worth another attempt.
bool is_throttling(std::string_view code);
bool is_retryable(std::string_view code, unsigned status);
/// Whether an error code says the credentials are wrong or expired.
bool is_credential_error(std::string_view code);

/// An error answer's code and message, from JSON (__type, message/Message; the
/// X-Amzn-ErrorType header when given) or XML (Error/Code, Error/Message at any depth). What
/// fits neither gives "HTTP <status>" and the start of the body.
std::pair<std::string, std::string> error_of(unsigned status, std::string_view body,
                                             std::string_view error_type_header = {});

struct AwsConfig {
  Credentials credentials;
  std::string region;
  /// Every service at this URL (AWS_ENDPOINT_URL: an emulator, a proxy); empty: AWS's own
  /// endpoints (https://PREFIX.REGION.amazonaws.com, https://iam.amazonaws.com).
  std::string endpoint_url;
  /// One service elsewhere, by endpoint prefix ("ecs" -> URL; AWS_ENDPOINT_URL_ECS).
  std::map<std::string, std::string> service_endpoints;
  unsigned max_attempts = 5;
  Backoff backoff{std::chrono::milliseconds(200), std::chrono::seconds(20), 2.0, 1.0};
  std::chrono::steady_clock::duration timeout = std::chrono::seconds(60);  // per attempt
};

/// The configuration the AWS CLI would use: credentials and region (credentials.hpp), and
/// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<PREFIX> (ECS, EC2, IAM) when set. A `region` given
/// (a config's or a flag's) is used as it is, and then none need be set anywhere.
AwsConfig config_from_environment(const std::string& profile = {}, const std::string& region = {},
                                  const EnvLookup& env = process_environment());

class AwsClient {
 public:
  AwsClient(asio::any_io_executor executor, AwsConfig config);
  ~AwsClient();
  AwsClient(const AwsClient&) = delete;
  AwsClient& operator=(const AwsClient&) = delete;

  /// A JSON 1.1 call; the answer's JSON object (empty for an empty answer).
  asio::awaitable<boost::json::object> json_call(const Service& service, std::string operation,
                                                 boost::json::object params);

  /// A Query call with flattened parameters ("Filter.1.Name" = "vpc-id"), sent as a form; the
  /// answer's root.
  asio::awaitable<XmlElement> query_call(const Service& service, std::string operation,
                                         Headers params);

  /// The base URL a service is called at.
  std::string endpoint_of(const Service& service) const;
  const AwsConfig& config() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace rex::aws
