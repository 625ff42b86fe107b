// Placeholder until the Engine API client lands: every call fails with EngineError.
#include <rex/docker/engine.hpp>

namespace rex::docker {

namespace {
[[noreturn]] void missing() {
  throw EngineError("the Docker Engine client is not built into this version", 0, "");
}
}  // namespace

EngineConfig engine_config_from_environment(std::string_view) {
  return {};
}
EngineError::EngineError(std::string w, unsigned s, std::string) : std::runtime_error(w), s_(s) {}
unsigned EngineError::status() const noexcept {
  return s_;
}
Engine::Engine(asio::any_io_executor, EngineConfig) {}
Engine::~Engine() = default;
bool Engine::is_local() const noexcept {
  return true;
}
std::string Engine::endpoint() const {
  return "unix:///var/run/docker.sock";
}
asio::awaitable<std::optional<boost::json::object>> Engine::inspect_image(std::string) {
  missing();
}
asio::awaitable<void> Engine::pull_image(std::string, std::string,
                                         std::function<void(const PullProgress&)>) {
  missing();
}
asio::awaitable<std::string> Engine::create_container(boost::json::object, std::string,
                                                      std::string) {
  missing();
}
asio::awaitable<void> Engine::start_container(std::string) {
  missing();
}
asio::awaitable<boost::json::object> Engine::inspect_container(std::string) {
  missing();
}
asio::awaitable<std::int64_t> Engine::wait_container(std::string) {
  missing();
}
asio::awaitable<std::string> Engine::container_logs(std::string, int) {
  missing();
}
asio::awaitable<void> Engine::kill_container(std::string, std::string) {
  missing();
}
asio::awaitable<void> Engine::remove_container(std::string, bool) {
  missing();
}
asio::awaitable<std::vector<ContainerSummary>> Engine::list_containers(std::vector<std::string>,
                                                                       bool) {
  missing();
}
asio::awaitable<void> Engine::put_archive(std::string, std::string, std::string) {
  missing();
}
asio::awaitable<void> Engine::remove_image(std::string, bool) {
  missing();
}

}  // namespace rex::docker
