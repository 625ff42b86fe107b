#pragma once
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
namespace rex::docker {
namespace asio = boost::asio;
struct EngineConfig {
  std::string host{};
  bool tls = false;
  bool tls_verify = true;
  std::string cert_path{};
  std::string api_version = "1.41";
  std::chrono::milliseconds request_timeout = std::chrono::seconds(60);
};
EngineConfig engine_config_from_environment(std::string_view container_runtime = "docker");
class EngineError : public std::runtime_error {
 public:
  EngineError(std::string w, unsigned s, std::string m);
  unsigned status() const noexcept;

 private:
  unsigned s_;
};
struct PullProgress {
  std::string status;
  std::string layer;
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  double percent = -1;
};
struct ContainerSummary {
  std::string id;
  std::vector<std::string> names;
  std::string image;
  std::string state;
  std::map<std::string, std::string> labels;
  std::int64_t created = 0;
};
class Engine {
 public:
  explicit Engine(asio::any_io_executor executor,
                  EngineConfig config = engine_config_from_environment());
  ~Engine();
  bool is_local() const noexcept;
  std::string endpoint() const;
  asio::awaitable<std::optional<boost::json::object>> inspect_image(std::string name);
  asio::awaitable<void> pull_image(std::string name, std::string platform,
                                   std::function<void(const PullProgress&)> on_progress);
  asio::awaitable<std::string> create_container(boost::json::object body, std::string name = {},
                                                std::string platform = {});
  asio::awaitable<void> start_container(std::string id);
  asio::awaitable<boost::json::object> inspect_container(std::string id);
  asio::awaitable<std::int64_t> wait_container(std::string id);
  asio::awaitable<std::string> container_logs(std::string id, int tail);
  asio::awaitable<void> kill_container(std::string id, std::string signal = "KILL");
  asio::awaitable<void> remove_container(std::string id, bool force = true);
  asio::awaitable<std::vector<ContainerSummary>> list_containers(
      std::vector<std::string> label_filters, bool all = true);
  asio::awaitable<void> put_archive(std::string id, std::string path_in_container,
                                    std::string tar_file);
  asio::awaitable<void> remove_image(std::string name, bool force = false);
};
}  // namespace rex::docker
