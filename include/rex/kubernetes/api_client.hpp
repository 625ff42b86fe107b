// ApiClient: requests to a Kubernetes API server as one user of a kubeconfig (kubeconfig.hpp):
// TLS as the cluster entry says, and the user's credentials on every request.
//
// - A token is sent as a bearer token; a token file is read again when it is a minute old (the
//   kubelet rotates service account tokens); username and password as basic authentication.
// - An exec plugin runs at the first request and again when its credential has expired (ten
//   seconds early) or the server answered 401 to it (then the request is sent once more with
//   the new credential). A plugin's client certificate makes a new connection pool.
// - Answers other than 2xx are ApiErrors carrying the status and the server's Status object
//   (reason and message), named by method and path.
//
// Threading: call from the executor given at construction; the client must outlive its calls.
#pragma once

#include <rex/http/client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

namespace rex::kubernetes {

namespace asio = boost::asio;

/// An answer of the API server other than 2xx.
class ApiError : public std::runtime_error {
 public:
  ApiError(const std::string& what, unsigned status, std::string reason, std::string message)
      : std::runtime_error(what),
        status_(status),
        reason_(std::move(reason)),
        message_(std::move(message)) {}
  unsigned status() const noexcept { return status_; }
  /// The Status object's reason (NotFound, AlreadyExists, Forbidden, ...), or empty.
  const std::string& reason() const noexcept { return reason_; }
  /// The Status object's message, or the body's start.
  const std::string& message() const noexcept { return message_; }

 private:
  unsigned status_;
  std::string reason_;
  std::string message_;
};

struct ApiClientConfig {
  std::chrono::steady_clock::duration timeout = std::chrono::seconds(30);  // per request
  std::chrono::steady_clock::duration exec_timeout = std::chrono::seconds(60);
  std::string user_agent = "rex";
};

class ApiClient {
 public:
  /// Throws KubeconfigError when the TLS material of `access` cannot be loaded.
  ApiClient(asio::any_io_executor executor, ClusterAccess access, ApiClientConfig config = {});
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  /// Sends a request with the user's credentials and returns the answer, whatever its status.
  /// Throws http's errors (ConnectionError, RequestTimeoutError) and KubeconfigError (a
  /// credential that cannot be had).
  asio::awaitable<http::ClientResponse> request(http::ClientRequest request);

  /// A JSON call: `body` (when not null) is sent as JSON; a 2xx answer's JSON is returned (null
  /// for an empty body). Throws ApiError for other answers.
  asio::awaitable<boost::json::value> call(std::string method, std::string path,
                                           boost::json::value body = nullptr,
                                           std::string content_type = "application/json");

  /// The Authorization header's value that request() would send now (an exec plugin run when
  /// its credential is missing or expired), or empty: for another client of the same server
  /// (one that goes through the API server's proxy).
  asio::awaitable<std::string> authorization();
  /// Forgets an exec plugin's credential: the next use runs the plugin again (after a 401).
  void renew_credentials() noexcept;
  /// The TLS settings of this client's connections (trust, server name, the client certificate
  /// of the kubeconfig or of the exec plugin's last credential), for another client.
  http::ClientConfig tls_config() const;

  const ClusterAccess& access() const noexcept;
  /// Runs of the exec plugin so far (for tests and diagnostics).
  unsigned exec_runs() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// The ApiError for an answer: "METHOD PATH: STATUS REASON: MESSAGE".
ApiError api_error(std::string_view method, std::string_view path,
                   const http::ClientResponse& response);

}  // namespace rex::kubernetes
