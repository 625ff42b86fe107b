// Engine: a client of the Docker Engine HTTP API (v1.41; Podman's compatible API too) for what
// rex needs: images (inspect, pull, remove), containers (create, start, wait, logs, kill,
// remove, list by label), networks (inspect) and copying a tar archive into a container.
//
// Guarantees:
// - Runs on rex::http::Client over the engine's unix socket or TCP (TLS with client
//   certificates for DOCKER_CERT_PATH): connections are kept alive; calls that run at the same
//   time use separate connections, so a wait_container that blocks holds only its own.
// - Ordinary calls are bounded by config.request_timeout. pull_image and wait_container have no
//   limit of their own: the caller bounds them by cancelling (terminal cancellation of the
//   awaiting coroutine), which closes their connection.
// - Every failure the engine reports, and an engine that cannot be reached or does not answer,
//   is an EngineError naming the operation and the image or container, with the engine's
//   message and a hint; what is no failure for the caller (removing what is gone, killing what
//   is not running, starting what runs) is not an error. Connection failures are not retried:
//   a create sent twice would make two containers.
//
// Threading: call every member from the executor given at construction. The Engine must
// outlive the calls in flight.
#pragma once

#include <rex/docker/engine_config.hpp>
#include <rex/docker/engine_error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex::docker {

namespace asio = boost::asio;

/// One line of an image pull's progress.
struct PullProgress {
  std::string status;             // the engine's status line ("Downloading", "Pull complete"...)
  std::string layer;              // layer id, empty for whole-image lines
  std::uint64_t bytes_done = 0;   // downloaded, summed over the layers seen so far
  std::uint64_t bytes_total = 0;  // summed over the layers seen so far (0 = unknown)
  double percent = -1;            // bytes_done / bytes_total * 100, -1 when unknown
};

struct ContainerSummary {
  std::string id;
  std::vector<std::string> names;  // as the engine lists them, with their leading '/'
  std::string image;
  std::string state;  // "running", "exited", "created", ...
  std::map<std::string, std::string> labels;
  std::int64_t created = 0;  // unix seconds
};

/// One image GET /images/json lists.
struct ImageSummary {
  std::string id;  // "sha256:..."
  std::vector<std::string> tags;
  std::map<std::string, std::string> labels;
  std::int64_t created = 0;  // unix seconds
  std::int64_t size = 0;     // bytes
};

/// What GET /containers/{id}/stats says of a container now.
struct ContainerStats {
  double cpu_percent = 0;  // of all its CPUs together since the engine's previous sample, 0-100
  int cpu_count = 0;       // the CPUs it may use
  std::uint64_t memory_used = 0;   // bytes, without the page cache it can give back
  std::uint64_t memory_limit = 0;  // bytes (the machine's when it has no limit)
};

class Engine {
 public:
  /// Throws std::invalid_argument for a config.host it cannot use (another scheme, no host) and
  /// when the TLS files in cert_path cannot be loaded. Makes no connection.
  explicit Engine(asio::any_io_executor executor,
                  EngineConfig config = engine_config_from_environment());
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const noexcept;
  /// True for a unix-socket engine: it runs on this machine, so host paths can be bind-mounted.
  bool is_local() const noexcept;
  /// For messages: "unix:///var/run/docker.sock", "tcp://h:2376".
  std::string endpoint() const;

  /// GET /version.
  asio::awaitable<boost::json::object> version();
  /// GET /images/{name}/json; nullopt when the engine does not have the image.
  asio::awaitable<std::optional<boost::json::object>> inspect_image(std::string name);
  /// POST /images/create?fromImage=..&tag=..[&platform=..]: each progress line the engine
  /// streams goes to on_progress (may be empty; an exception it throws ends the pull). A
  /// refusal, or an error line in the stream (then status() is the answer's 200), becomes
  /// EngineError. No time limit: cancel to give up.
  asio::awaitable<void> pull_image(std::string name, std::string platform,
                                   std::function<void(const PullProgress&)> on_progress);
  /// POST /containers/create[?name=..&platform=..] with `body` (the engine's container config);
  /// returns the new container's id. 404 (no such image), 409 (name in use) and 400 (bad field)
  /// become EngineError with the engine's message.
  asio::awaitable<std::string> create_container(boost::json::object body, std::string name = {},
                                                std::string platform = {});
  /// POST /containers/{id}/start; a container that already runs (304) is fine.
  asio::awaitable<void> start_container(std::string id);
  /// GET /containers/{id}/json.
  asio::awaitable<boost::json::object> inspect_container(std::string id);
  /// POST /containers/{id}/wait (condition not-running): returns the exit code once the
  /// container is not running; call it after start (a container never started, or stopped
  /// already, returns at once). On its own connection, with no time limit: cancel to give up.
  asio::awaitable<std::int64_t> wait_container(std::string id);
  /// The last `tail` lines (all for a negative tail) of stdout and stderr, interleaved in the
  /// order written: a non-TTY container's multiplexed frames are decoded, a TTY container's
  /// raw stream kept as it is.
  asio::awaitable<std::string> container_logs(std::string id, int tail);
  /// POST /containers/{id}/kill?signal=..; a container that is not running or gone: no error.
  asio::awaitable<void> kill_container(std::string id, std::string signal = "KILL");
  /// DELETE /containers/{id}?force=..&v=1 (anonymous volumes go too); gone already: no error.
  asio::awaitable<void> remove_container(std::string id, bool force = true);
  /// GET /containers/json?all=..&filters={"label":[...]}; each filter "key" or "key=value", all
  /// must match.
  asio::awaitable<std::vector<ContainerSummary>> list_containers(
      std::vector<std::string> label_filters, bool all = true);
  /// PUT /containers/{id}/archive?path=..: extracts the tar file (streamed from disk) into the
  /// container at path_in_container, which must exist there.
  asio::awaitable<void> put_archive(std::string id, std::string path_in_container,
                                    std::string tar_file);
  /// GET /networks/{name}; nullopt when the engine has no such network.
  asio::awaitable<std::optional<boost::json::object>> inspect_network(std::string name);
  /// DELETE /images/{name}[?force=1]; an image that is not there: no error.
  asio::awaitable<void> remove_image(std::string name, bool force = false);
  /// GET /images/json?filters={"label":[...]}: the images that carry every label filter.
  asio::awaitable<std::vector<ImageSummary>> list_images(std::vector<std::string> label_filters);
  /// POST /commit?container=..&repo=..&tag=..&pause=1: the container's file system (its changes
  /// over its image) as a new image tagged repo:tag, with its configuration and `labels` over
  /// the container's own; the container is frozen while it is written. Returns the image's id.
  asio::awaitable<std::string> commit_container(std::string id, std::string repo, std::string tag,
                                                std::map<std::string, std::string> labels);
  /// POST /build?t=..&labels=..&rm=1&forcerm=1 with the build context (a tar file streamed from
  /// disk, its Dockerfile at `dockerfile`): each line of the build's output, as the engine
  /// streams it ("Step 2/5 : RUN ...", the commands' own output), goes to on_line (may be empty).
  /// Returns the image's id. A failed step or a refusal becomes EngineError with the engine's
  /// message (the failing command and its exit code). No time limit: cancel to give up.
  asio::awaitable<std::string> build_image(std::string context_tar, std::string dockerfile,
                                           std::string tag,
                                           std::map<std::string, std::string> labels,
                                           std::function<void(std::string_view)> on_line);
  /// POST /containers/{id}/pause and /unpause: every process of the container frozen (cgroup
  /// freezer) or thawed. Pausing a paused container, or unpausing a running one, is no error.
  asio::awaitable<void> pause_container(std::string id);
  asio::awaitable<void> unpause_container(std::string id);
  /// GET /containers/{id}/stats?stream=0: its CPU and memory use now (the engine samples twice,
  /// about a second apart, for the CPU).
  asio::awaitable<ContainerStats> container_stats(std::string id);
  /// GET /containers/{id}/json?size=1: the bytes its own layer holds (SizeRw) and its whole file
  /// system (SizeRootFs).
  asio::awaitable<std::pair<std::int64_t, std::int64_t>> container_size(std::string id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rex::docker
