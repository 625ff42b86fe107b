// Client: an HTTP/1.1 client for one server (a base URL: TCP, TLS or a unix socket; see url.hpp),
// on Boost.Beast.
//
// Guarantees:
// - Connections are kept alive and reused; requests that run at the same time use separate
//   connections. At most `max_idle_connections` wait idle; one the server has closed meanwhile
//   is noticed and the request goes out once more on a new connection, without counting as a
//   retry.
// - Each request has one deadline covering name resolution, connecting, TLS, writing and reading
//   the whole answer, retries and their delays included. When it passes, the request is
//   abandoned, its connection closed, and RequestTimeoutError names the URL and the timeout.
// - Connection failures before any byte of an answer are retried per RetryPolicy with the same
//   request (the same headers, so the same X-Request-ID); an answer never is. When the attempts
//   run out, ConnectionError names the URL, the attempts and the last error.
// - Request bodies come from a string or are streamed from a file; answer bodies go into a
//   string or, for a 2xx answer, are streamed into a file or handed piece by piece to a
//   callback as they arrive, so transfers never sit in memory.
// - Cancellation: a request obeys terminal cancellation of the coroutine that awaits it; its
//   connection is then closed, never reused.
//
// Threading: a Client and its requests run on the executor given at construction; call it from
// that executor only. Requests in flight keep what they need alive if the Client is destroyed.
#pragma once

#include <rex/http/retry_policy.hpp>
#include <rex/http/url.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::http {

namespace asio = boost::asio;

namespace detail {
struct ClientState;
}

struct ClientConfig {
  std::chrono::steady_clock::duration timeout = std::chrono::seconds(60);  // per request
  RetryPolicy retry{};
  std::size_t max_idle_connections = 8;
  // An idle connection older than this is closed instead of reused: servers drop idle
  // connections after a while, and a fresh one costs less than a failed reuse.
  std::chrono::steady_clock::duration idle_timeout = std::chrono::seconds(30);
  bool verify_peer = true;  // TLS: check the certificate chain and the host name
  std::string ca_file{};    // TLS: extra trusted certificates (PEM), besides the system's
  // TLS: a client certificate (PEM, may hold the chain) and its private key (PEM), for servers
  // that authenticate their clients (a Docker engine with --tlsverify). Both or neither.
  std::string cert_file{};
  std::string key_file{};
  // The same given as PEM text instead of files (a kubeconfig's inline data), besides them.
  std::string ca_pem{};
  std::string cert_pem{};  // with key_pem, instead of cert_file and key_file
  std::string key_pem{};
  // TLS: the name to send (SNI) and to find in the server's certificate, when it is not the
  // URL's host (a server reached by address whose certificate names it otherwise).
  std::string tls_server_name{};
  std::uint64_t max_body_in_memory = std::uint64_t{1} << 30;  // larger answers fail
  std::string user_agent = "rex";
  // Sent with every request that does not set the same header itself (routing headers of a
  // proxy in front of the server, for instance).
  std::vector<std::pair<std::string, std::string>> headers{};
  // Asked at every request for headers whose values change over time (an expiring bearer
  // token), added like `headers`. Runs on the client's executor and must not block.
  std::function<std::vector<std::pair<std::string, std::string>>()> header_source{};
  // Request bodies go chunked instead of with a Content-Length. For a proxy in front of the
  // server that answers early answers badly: Go's HTTP/1 reverse proxies (the Kubernetes API
  // server's pod proxy) send a body of known length to the server, then read the client's body
  // once more to find its end; when the server's answer has come in the meantime, writing its
  // head closes the client's body under that read, and the proxy drops its connection to the
  // server with the answer half sent. A chunked body ends only after that read.
  bool chunked_request_bodies = false;
};

struct ClientRequest {
  std::string method = "GET";  // any standard method name: GET, POST, PUT, DELETE, ...
  std::string target = "/";    // path and query, below the base URL's prefix
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string body{};
  std::string body_file{};      // when set, the body is streamed from this file instead
  std::string response_file{};  // when set, a 2xx answer's body is streamed into this file
  // When set (and response_file is not), a 2xx answer's body is handed to it piece by piece as
  // it arrives (chunked or not; the pieces follow no message boundary) and not kept. It runs on
  // the client's executor inside the request; an exception it throws ends the request (the
  // connection is closed) and propagates to the caller. The request's timeout covers the whole
  // stream: give a long stream a long one and cancel it to stop early.
  std::function<void(std::string_view)> on_body{};
  std::optional<std::chrono::steady_clock::duration> timeout{};  // else the client's
  std::optional<RetryPolicy> retry{};                            // else the client's
};

struct ClientResponse {
  unsigned status = 0;
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string body{};         // empty when it went to the response_file or on_body
  bool body_in_file = false;  // true when it went to the request's response_file

  /// The first header of that name (case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

class Client {
 public:
  /// Throws InvalidUrlError for a bad base URL, and std::invalid_argument when the TLS settings
  /// cannot be loaded (a ca_file, cert_file or key_file that cannot be read, a key that does not
  /// match the certificate, one of cert_file and key_file without the other).
  Client(asio::any_io_executor executor, std::string_view base_url, ClientConfig config = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Sends a request and reads its whole answer. Throws ConnectionError, RequestTimeoutError,
  /// std::invalid_argument for a request that cannot be sent (unknown method, unreadable
  /// body_file), and SwerexException for an answer that is not valid HTTP or too large.
  asio::awaitable<ClientResponse> request(ClientRequest request);

  const Url& base_url() const noexcept;
  /// The full URL of a target, for messages: base URL text + target.
  std::string url_of(std::string_view target) const;
  asio::any_io_executor get_executor() const noexcept;
  /// Connections that wait idle for reuse.
  std::size_t idle_connections() const noexcept;
  /// Connections opened so far (reuse keeps this low).
  std::uint64_t connections_opened() const noexcept;
  /// Closes the connections that wait idle for reuse; the next request opens a new one. For a
  /// server about to go away: closing while it still answers leaves no packet to send it later
  /// (to a container's address that the next container may reuse).
  void close_idle_connections() noexcept;

 private:
  std::shared_ptr<detail::ClientState> state_;
};

}  // namespace rex::http
