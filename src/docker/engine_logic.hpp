// The Engine's pure logic, kept apart from I/O so it can be tested with plain inputs: engine
// addresses, URL encoding, the engine's error bodies, log frames, pull progress, image
// references and container lists.
#pragma once

#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex::docker::detail {

struct EngineAddress {
  std::string base_url;     // for http::Client: http+unix://ENCODED, http(s)://HOST:PORT[/PREFIX]
  std::string endpoint;     // for messages: unix:///path or tcp://HOST:PORT[/PREFIX]
  std::string socket_path;  // unix only
  bool local = false;       // a unix socket: the engine runs on this machine
};

inline constexpr std::string_view kDefaultSocket = "/var/run/docker.sock";

/// Where config.host points. Throws std::invalid_argument naming the host for anything but
/// unix:///PATH and tcp://HOST[:PORT][/PREFIX] (ssh://, npipe://, fd:// are not supported).
EngineAddress engine_address(const EngineConfig& config);

/// The HTTP client settings for an engine: config.request_timeout; no retries (a POST sent twice
/// could create two containers); with TLS, verification per tls_verify against cert_path/ca.pem,
/// and cert_path/cert.pem + key.pem as the client certificate when both exist.
http::ClientConfig engine_client_config(const EngineConfig& config);

using http::url_encode;

/// The engine's message from an error body: Docker's {"message": ...}; Podman's "cause" is
/// added when the message does not already say it. A body that is not such JSON is returned
/// trimmed (at most 1000 bytes).
std::string engine_message_of(std::string_view body);

/// A non-TTY container's log stream: frames of [stream, 0, 0, 0, size (u32 big-endian)] then
/// size bytes. Returns the payloads joined in order, or nullopt when `raw` is not such a stream
/// (a TTY container's raw output).
std::optional<std::string> demultiplex_logs(std::string_view raw);

/// The last `count` lines of a log (a line ends with '\n'; an unterminated end counts as one):
/// what the engine's own `tail=count` would answer.
std::string last_lines(std::string_view text, std::size_t count);

/// fromImage and tag for POST /images/create: "busybox" -> busybox, latest; "reg:5000/a/b:1"
/// -> reg:5000/a/b, 1; a digest reference ("a@sha256:...") goes whole with no tag.
struct ImageReference {
  std::string from_image;
  std::string tag;
};
ImageReference split_image_reference(std::string_view name);

/// Turns the JSON lines of a pull into PullProgress, summing bytes over the layers. Each
/// layer's count only grows: a download the engine retries after a broken connection (a full
/// bar, "Retrying in N seconds", then counts from 0 towards the rest) continues where it was.
class PullProgressTracker {
 public:
  /// The progress after one line. An error line ({"error": ...}) is remembered in error() and
  /// reported as a progress line whose status is the error.
  PullProgress update(const boost::json::object& line);
  /// The first error line's message, if any.
  const std::optional<std::string>& error() const noexcept { return error_; }

 private:
  struct Layer {
    std::uint64_t current = 0;
    std::uint64_t total = 0;  // the layer's size from its first report; 0: not known yet
  };
  std::map<std::string, Layer> layers_;
  std::optional<std::string> error_;
};

/// Splits a byte stream that arrives in arbitrary pieces into lines (without the '\n').
class LineSplitter {
 public:
  void feed(std::string_view piece, const std::function<void(std::string_view)>& on_line);
  /// The last line when it had no '\n'.
  void finish(const std::function<void(std::string_view)>& on_line);

 private:
  std::string pending_;
};

/// The answer of GET /containers/json. Throws std::invalid_argument when it is not a list.
std::vector<ContainerSummary> parse_container_list(const boost::json::value& answer);

/// A string member of a JSON object; empty when absent or of another type.
std::string string_field_of(const boost::json::object& o, std::string_view key);

/// The answer of GET /images/json. Throws std::invalid_argument when it is not a list.
std::vector<ImageSummary> parse_image_list(const boost::json::value& answer);

/// The answer of GET /containers/{id}/stats?stream=0 (Docker's shape; Podman's compatible API
/// gives the same). Missing fields count as 0.
ContainerStats parse_container_stats(const boost::json::object& answer);

/// The filters query value for label filters: {"label":["a","b=c"]}.
std::string label_filters_json(const std::vector<std::string>& label_filters);

}  // namespace rex::docker::detail
