// The Engine: each call is one HTTP exchange through rex::http::Client; this file maps the
// engine's answers to results, and failures to EngineError with a hint.
#include <rex/core/text.hpp>
#include <rex/docker/engine.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "docker/engine_logic.hpp"

namespace rex::docker {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// Pulls and waits end when the caller cancels; the client needs some deadline, so a far one.
constexpr auto kNoLimit = std::chrono::hours(24 * 365);

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string home_directory() {
  std::string home = env("HOME");
  if (home.empty()) {
    if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_dir != nullptr)
      home = pw->pw_dir;
  }
  return home;
}

// What a call does, for messages: "inspecting image 'x'".
struct Operation {
  std::string what;
};

}  // namespace

EngineError::EngineError(std::string what, unsigned status, std::string engine_message)
    : std::runtime_error(std::move(what)),
      status_(status),
      engine_message_(std::move(engine_message)) {}

EngineConfig engine_config_from_environment(std::string_view container_runtime) {
  EngineConfig config;
  if (container_runtime == "docker") {
    config.runtime = "docker";
    config.host = env("DOCKER_HOST");
    if (!env("DOCKER_TLS_VERIFY").empty()) {
      config.tls = true;
      config.tls_verify = true;
    } else if (!env("DOCKER_TLS").empty()) {
      config.tls = true;
      config.tls_verify = false;
    }
    config.cert_path = env("DOCKER_CERT_PATH");
    if (config.cert_path.empty()) {
      const std::string home = home_directory();
      if (!home.empty())
        config.cert_path = home + "/.docker";
    }
    if (const std::string version = env("DOCKER_API_VERSION"); !version.empty())
      config.api_version = version;
    return config;
  }
  if (container_runtime == "podman") {
    config.runtime = "podman";
    config.host = env("CONTAINER_HOST");
    if (config.host.empty()) {
      if (::geteuid() != 0) {
        std::string runtime_dir = env("XDG_RUNTIME_DIR");
        if (runtime_dir.empty())
          runtime_dir = fmt::format("/run/user/{}", ::geteuid());
        config.host = "unix://" + runtime_dir + "/podman/podman.sock";
      } else {
        config.host = "unix:///run/podman/podman.sock";
      }
    }
    return config;
  }
  throw std::invalid_argument(fmt::format(
      "unknown container runtime '{}': expected 'docker' or 'podman'", container_runtime));
}

struct Engine::Impl {
  Impl(asio::any_io_executor executor, EngineConfig cfg)
      : config(std::move(cfg)),
        address(detail::engine_address(config)),
        prefix("/v" + config.api_version),
        client(std::move(executor), address.base_url, detail::engine_client_config(config)) {}

  // Where to point the user when the engine cannot be reached.
  std::string unreachable_hint(const std::string& error) const {
    if (error.find("ermission denied") != std::string::npos) {
      return fmt::format(
          "may this user use {}? run as root, or join the group that owns the socket (docker)",
          address.socket_path);
    }
    const bool podman = config.runtime == "podman";
    if (address.local && podman) {
      return fmt::format(
          "is the Podman API service running? start it with `podman system service --time=0 "
          "unix://{}`, or set CONTAINER_HOST",
          address.socket_path);
    }
    if (address.local)
      return "is dockerd running? start it, or set DOCKER_HOST";
    if (podman)
      return "is the engine listening there? check CONTAINER_HOST";
    return "is the engine listening there? check DOCKER_HOST (and DOCKER_TLS_VERIFY, "
           "DOCKER_CERT_PATH for TLS)";
  }

  // Sends one request; an engine that cannot be reached or does not answer in time becomes
  // EngineError (status 0). Any HTTP answer is returned for the caller to judge.
  asio::awaitable<http::ClientResponse> send(http::ClientRequest request, const Operation& op) {
    request.target = prefix + request.target;
    std::string failure;
    std::string hint;
    try {
      http::ClientResponse response = co_await client.request(std::move(request));
      libpod = response.header("Libpod-Api-Version").has_value();
      co_return response;
    } catch (const http::ConnectionError& e) {
      // The client's message reads "METHOD URL: failed STAGE: ERROR (N attempts)".
      const auto* error = e.extra_info().if_contains("error");
      const std::string why = error != nullptr && error->is_string()
                                  ? std::string(error->get_string())
                                  : std::string(e.what());
      const std::string text = e.what();
      std::string stage;
      if (const auto at = text.find(": failed "); at != std::string::npos) {
        const auto stage_end = text.find(": ", at + 9);
        if (stage_end != std::string::npos)
          stage = text.substr(at + 9, stage_end - at - 9);
      }
      if (stage.empty() || stage == "connecting") {
        failure =
            fmt::format("cannot reach the container engine at {} (connect: {})", endpoint(), why);
        hint = unreachable_hint(why);
      } else if (stage.find("TLS") != std::string::npos) {
        failure = fmt::format("the TLS handshake with the container engine at {} failed ({})",
                              endpoint(), why);
        hint =
            "check the certificates in the cert path (ca.pem, cert.pem, key.pem; "
            "DOCKER_CERT_PATH) and whether the engine expects TLS (DOCKER_TLS_VERIFY)";
      } else {
        failure = fmt::format("lost the connection to the container engine at {} ({}: {})",
                              endpoint(), stage, why);
        hint = "the engine may have stopped or restarted: check its log";
      }
    } catch (const http::RequestTimeoutError&) {
      failure = fmt::format("the container engine at {} did not answer within {}", endpoint(),
                            seconds_text(config.request_timeout));
      hint = "it may be overloaded or hung: check its log, or raise request_timeout";
    }
    throw EngineError(fmt::format("{} failed: {}: {}", op.what, failure, hint), 0, "");
  }

  std::string endpoint() const { return address.endpoint; }

  // The engine answered with an error status.
  [[noreturn]] static void fail(const Operation& op, const http::ClientResponse& response,
                                std::string_view hint = {}) {
    std::string message = detail::engine_message_of(response.body);
    std::string text = fmt::format("{} failed: {} (HTTP {})", op.what,
                                   message.empty() ? "no message" : message, response.status);
    // Podman cannot apply its default ulimits in some sandboxes.
    if (hint.empty() && message.find("rlimit") != std::string::npos) {
      hint =
          "set HostConfig.Ulimits (e.g. nofile and nproc) in the container settings: the "
          "engine's defaults cannot be applied here";
    }
    if (!hint.empty())
      text += fmt::format(": {}", hint);
    throw EngineError(std::move(text), response.status, std::move(message));
  }

  static json::value parse_json(const Operation& op, const http::ClientResponse& response) {
    boost::system::error_code ec;
    json::value value = json::parse(response.body, ec);
    if (ec) {
      throw EngineError(fmt::format("{} failed: the engine's answer is not JSON ({}): {}", op.what,
                                    ec.message(), response.body.substr(0, 200)),
                        response.status, "");
    }
    return value;
  }

  static json::object parse_object(const Operation& op, const http::ClientResponse& response) {
    json::value value = parse_json(op, response);
    if (!value.is_object()) {
      throw EngineError(fmt::format("{} failed: the engine's answer is not a JSON object: {}",
                                    op.what, response.body.substr(0, 200)),
                        response.status, "");
    }
    return std::move(value.get_object());
  }

  EngineConfig config;
  detail::EngineAddress address;
  std::string prefix;
  http::Client client;
  // Whether the engine is Podman (its answers carry Libpod-Api-Version); unknown until it has
  // answered once.
  std::optional<bool> libpod{};
};

namespace {

http::ClientRequest make_request(std::string method, std::string target) {
  http::ClientRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

bool success(const http::ClientResponse& r) {
  return r.status / 100 == 2;
}

std::string image_path(const std::string& name) {
  // Image names keep their '/' (repository paths) and ':' and '@' (tags, digests).
  return detail::url_encode(name, "/:@");
}

constexpr std::string_view kNoImageHint =
    "the image is not on the engine: pull it or build it, or change the pull policy";
constexpr std::string_view kNoContainerHint = "the container is gone (removed, or never created)";

}  // namespace

Engine::Engine(asio::any_io_executor executor, EngineConfig config)
    : impl_(std::make_unique<Impl>(std::move(executor), std::move(config))) {}

Engine::~Engine() = default;

const EngineConfig& Engine::config() const noexcept {
  return impl_->config;
}

bool Engine::is_local() const noexcept {
  return impl_->address.local;
}

std::string Engine::endpoint() const {
  return impl_->endpoint();
}

asio::awaitable<json::object> Engine::version() {
  const Operation op{
      fmt::format("asking the container engine at {} for its version", impl_->endpoint())};
  auto request = make_request("GET", "/version");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (!success(response))
    Impl::fail(op, response);
  co_return Impl::parse_object(op, response);
}

asio::awaitable<std::optional<json::object>> Engine::inspect_image(std::string name) {
  const Operation op{fmt::format("inspecting image '{}'", name)};
  auto request = make_request("GET", "/images/" + image_path(name) + "/json");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    co_return std::nullopt;
  if (!success(response))
    Impl::fail(op, response);
  co_return Impl::parse_object(op, response);
}

asio::awaitable<void> Engine::pull_image(std::string name, std::string platform,
                                         std::function<void(const PullProgress&)> on_progress) {
  const Operation op{fmt::format("pulling image '{}'", name)};
  const std::string_view hint =
      "check the image name and tag, and that the engine can reach the registry (network, "
      "proxy, login); or build the image locally and use a pull policy that does not pull";
  const detail::ImageReference ref = detail::split_image_reference(name);
  std::string target = "/images/create?fromImage=" + detail::url_encode(ref.from_image);
  if (!ref.tag.empty())
    target += "&tag=" + detail::url_encode(ref.tag);
  if (!platform.empty())
    target += "&platform=" + detail::url_encode(platform);
  auto request = make_request("POST", std::move(target));
  request.timeout = kNoLimit;

  detail::PullProgressTracker tracker;
  detail::LineSplitter splitter;
  std::optional<std::string> unreadable;
  const std::function<void(std::string_view)> on_line = [&](std::string_view line) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos || unreadable || tracker.error())
      return;
    boost::system::error_code ec;
    const json::value value = json::parse(line, ec);
    if (ec || !value.is_object()) {
      unreadable = std::string(line.substr(0, 200));
      return;
    }
    const PullProgress progress = tracker.update(value.get_object());
    if (on_progress && !tracker.error())
      on_progress(progress);
  };
  request.on_body = [&](std::string_view piece) { splitter.feed(piece, on_line); };
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (!success(response))
    Impl::fail(op, response, hint);
  splitter.finish(on_line);
  if (tracker.error()) {
    throw EngineError(fmt::format("{} failed: {}: {}", op.what, *tracker.error(), hint),
                      response.status, *tracker.error());
  }
  if (unreadable) {
    throw EngineError(
        fmt::format("{} failed: the engine's progress line is not JSON: {}", op.what, *unreadable),
        response.status, "");
  }
}

asio::awaitable<std::string> Engine::create_container(json::object body, std::string name,
                                                      std::string platform) {
  const auto* image_field = body.if_contains("Image");
  const std::string image = image_field != nullptr && image_field->is_string()
                                ? std::string(image_field->get_string())
                                : std::string();
  const Operation op{name.empty()
                         ? fmt::format("creating a container from image '{}'", image)
                         : fmt::format("creating container '{}' from image '{}'", name, image)};
  std::string target = "/containers/create";
  std::string separator = "?";
  if (!name.empty()) {
    target += separator + "name=" + detail::url_encode(name);
    separator = "&";
  }
  if (!platform.empty())
    target += separator + "platform=" + detail::url_encode(platform);
  auto request = make_request("POST", std::move(target));
  request.headers.emplace_back("Content-Type", "application/json");
  request.body = json::serialize(body);
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    Impl::fail(op, response, kNoImageHint);
  // Podman answers a taken name with 500.
  if (response.status == 409 ||
      detail::engine_message_of(response.body).find("already in use") != std::string::npos)
    Impl::fail(op, response, "the name is taken: remove that container, or choose another name");
  if (response.status == 400)
    Impl::fail(op, response, "check the container settings: the engine names what it refused");
  if (!success(response))
    Impl::fail(op, response);
  const json::object answer = Impl::parse_object(op, response);
  const auto* id = answer.if_contains("Id");
  if (id == nullptr || !id->is_string() || id->get_string().empty()) {
    throw EngineError(fmt::format("{} failed: the engine's answer has no container id: {}", op.what,
                                  response.body.substr(0, 200)),
                      response.status, "");
  }
  co_return std::string(id->get_string());
}

asio::awaitable<void> Engine::start_container(std::string id) {
  const Operation op{fmt::format("starting container '{}'", id)};
  auto request = make_request("POST", "/containers/" + detail::url_encode(id) + "/start");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 304 || success(response))
    co_return;
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  Impl::fail(op, response);
}

asio::awaitable<json::object> Engine::inspect_container(std::string id) {
  const Operation op{fmt::format("inspecting container '{}'", id)};
  auto request = make_request("GET", "/containers/" + detail::url_encode(id) + "/json");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  if (!success(response))
    Impl::fail(op, response);
  co_return Impl::parse_object(op, response);
}

asio::awaitable<std::int64_t> Engine::wait_container(std::string id) {
  const Operation op{fmt::format("waiting for container '{}' to stop", id)};
  auto request =
      make_request("POST", "/containers/" + detail::url_encode(id) + "/wait?condition=not-running");
  request.timeout = kNoLimit;
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  if (!success(response))
    Impl::fail(op, response);
  const json::object answer = Impl::parse_object(op, response);
  if (const auto* error = answer.if_contains("Error"); error && error->is_object()) {
    const auto* message = error->get_object().if_contains("Message");
    if (message != nullptr && message->is_string() && !message->get_string().empty()) {
      std::string text(message->get_string());
      throw EngineError(fmt::format("{} failed: {}", op.what, text), response.status, text);
    }
  }
  const auto* code = answer.if_contains("StatusCode");
  if (code == nullptr || !(code->is_int64() || code->is_uint64())) {
    throw EngineError(fmt::format("{} failed: the engine's answer has no StatusCode: {}", op.what,
                                  response.body.substr(0, 200)),
                      response.status, "");
  }
  co_return code->to_number<std::int64_t>();
}

asio::awaitable<std::string> Engine::container_logs(std::string id, int tail) {
  const Operation op{fmt::format("reading the log of container '{}'", id)};
  // Podman 4's tail=N drops or misplaces a line that its monitor stored in two pieces (a
  // partial record, e.g. a terminal line read before its "\r\n"): ask it for the whole log
  // and cut the tail here.
  if (tail >= 0 && !impl_->libpod)
    co_await version();
  const bool cut_here = tail >= 0 && impl_->libpod.value_or(false);
  const std::string tail_value = tail < 0 || cut_here ? std::string("all") : std::to_string(tail);
  auto request = make_request("GET", "/containers/" + detail::url_encode(id) +
                                         "/logs?stdout=1&stderr=1&tail=" + tail_value);
  http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  if (!success(response))
    Impl::fail(op, response);
  // Else a TTY container's log: one raw stream.
  std::string text = detail::demultiplex_logs(response.body).value_or(std::move(response.body));
  if (cut_here)
    text = detail::last_lines(text, static_cast<std::size_t>(tail));
  co_return text;
}

asio::awaitable<void> Engine::kill_container(std::string id, std::string signal) {
  const Operation op{fmt::format("killing container '{}' with {}", id, signal)};
  auto request = make_request("POST", "/containers/" + detail::url_encode(id) +
                                          "/kill?signal=" + detail::url_encode(signal));
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  // 404: gone; 409: not running (Podman: 500, "container state improper"). Either way nothing
  // is left to kill.
  if (success(response) || response.status == 404 || response.status == 409)
    co_return;
  if (response.status == 500 &&
      detail::engine_message_of(response.body).find("can only kill running containers") !=
          std::string::npos)
    co_return;
  Impl::fail(op, response);
}

asio::awaitable<void> Engine::remove_container(std::string id, bool force) {
  const Operation op{fmt::format("removing container '{}'", id)};
  auto request = make_request(
      "DELETE", "/containers/" + detail::url_encode(id) + "?v=1" + (force ? "&force=1" : ""));
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (success(response) || response.status == 404)
    co_return;
  // Another removal of the same container is under way: it will be gone.
  if (response.status == 409 &&
      detail::engine_message_of(response.body).find("already in progress") != std::string::npos)
    co_return;
  if (response.status == 409 && !force)
    Impl::fail(op, response, "it is running: stop it first, or remove it with force");
  Impl::fail(op, response);
}

asio::awaitable<std::vector<ContainerSummary>> Engine::list_containers(
    std::vector<std::string> label_filters, bool all) {
  const Operation op{label_filters.empty()
                         ? std::string("listing containers")
                         : fmt::format("listing containers labelled {}",
                                       detail::label_filters_json(label_filters))};
  std::string target = std::string("/containers/json?all=") + (all ? "1" : "0");
  if (!label_filters.empty())
    target += "&filters=" + detail::url_encode(detail::label_filters_json(label_filters));
  auto request = make_request("GET", std::move(target));
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (!success(response))
    Impl::fail(op, response);
  const json::value answer = Impl::parse_json(op, response);
  if (!answer.is_array()) {
    throw EngineError(fmt::format("{} failed: the engine's answer is not a JSON array: {}", op.what,
                                  response.body.substr(0, 200)),
                      response.status, "");
  }
  co_return detail::parse_container_list(answer);
}

asio::awaitable<void> Engine::put_archive(std::string id, std::string path_in_container,
                                          std::string tar_file) {
  const Operation op{
      fmt::format("copying '{}' into container '{}' at '{}'", tar_file, id, path_in_container)};
  auto request = make_request("PUT", "/containers/" + detail::url_encode(id) +
                                         "/archive?path=" + detail::url_encode(path_in_container));
  request.headers.emplace_back("Content-Type", "application/x-tar");
  if (::access(tar_file.c_str(), R_OK) != 0) {
    const int err = errno;
    throw std::invalid_argument(
        fmt::format("{} failed: cannot read the tar file: {}", op.what, std::strerror(err)));
  }
  request.body_file = std::move(tar_file);
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (success(response))
    co_return;
  if (response.status == 404)
    Impl::fail(op, response, "the container and the directory in it must both exist");
  if (response.status == 403)
    Impl::fail(op, response, "that place in the container is read-only");
  if (response.status == 400)
    Impl::fail(op, response, "the body must be a tar archive and the path absolute");
  Impl::fail(op, response);
}

asio::awaitable<std::optional<json::object>> Engine::inspect_network(std::string name) {
  const Operation op{fmt::format("inspecting network '{}'", name)};
  auto request = make_request("GET", "/networks/" + detail::url_encode(name));
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    co_return std::nullopt;
  if (!success(response))
    Impl::fail(op, response);
  co_return Impl::parse_object(op, response);
}

asio::awaitable<std::vector<ImageSummary>> Engine::list_images(
    std::vector<std::string> label_filters) {
  const Operation op{
      label_filters.empty()
          ? std::string("listing images")
          : fmt::format("listing images labelled {}", detail::label_filters_json(label_filters))};
  std::string target = "/images/json";
  if (!label_filters.empty())
    target += "?filters=" + detail::url_encode(detail::label_filters_json(label_filters));
  auto request = make_request("GET", std::move(target));
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (!success(response))
    Impl::fail(op, response);
  const json::value answer = Impl::parse_json(op, response);
  if (!answer.is_array()) {
    throw EngineError(fmt::format("{} failed: the engine's answer is not a JSON array: {}", op.what,
                                  response.body.substr(0, 200)),
                      response.status, "");
  }
  co_return detail::parse_image_list(answer);
}

asio::awaitable<std::string> Engine::build_image(std::string context_tar, std::string dockerfile,
                                                 std::string tag,
                                                 std::map<std::string, std::string> labels,
                                                 std::function<void(std::string_view)> on_line) {
  const Operation op{fmt::format("building image '{}'", tag)};
  if (::access(context_tar.c_str(), R_OK) != 0) {
    const int err = errno;
    throw std::invalid_argument(fmt::format("{} failed: cannot read the build context {}: {}",
                                            op.what, context_tar, std::strerror(err)));
  }
  json::object label_object;
  for (const auto& [key, value] : labels)
    label_object[key] = value;
  std::string target =
      "/build?t=" + detail::url_encode(tag) + "&dockerfile=" + detail::url_encode(dockerfile) +
      "&rm=1&forcerm=1&labels=" + detail::url_encode(json::serialize(label_object));
  auto request = make_request("POST", std::move(target));
  request.headers.emplace_back("Content-Type", "application/x-tar");
  request.body_file = std::move(context_tar);
  request.timeout = kNoLimit;

  detail::LineSplitter splitter;
  std::string image;
  std::optional<std::string> error;
  std::string partial;  // a "stream" piece not yet ended by a newline
  const std::function<void(std::string_view)> emit = [&](std::string_view text) {
    partial += text;
    for (std::size_t nl; (nl = partial.find('\n')) != std::string::npos;) {
      std::string line = partial.substr(0, nl);
      partial.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      if (on_line)
        on_line(line);
    }
  };
  const std::function<void(std::string_view)> on_json = [&](std::string_view line) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos)
      return;
    boost::system::error_code ec;
    const json::value value = json::parse(line, ec);
    if (ec || !value.is_object()) {
      emit(line);
      emit("\n");
      return;
    }
    const json::object& o = value.get_object();
    if (const auto* text = o.if_contains("stream"); text != nullptr && text->is_string())
      emit(text->get_string());
    if (const auto* e = o.if_contains("error"); e != nullptr && e->is_string() && !error)
      error = std::string(e->get_string());
    if (const auto* aux = o.if_contains("aux"); aux != nullptr && aux->is_object()) {
      const std::string id = detail::string_field_of(aux->get_object(), "ID");
      if (!id.empty())
        image = id;
    }
  };
  request.on_body = [&](std::string_view piece) { splitter.feed(piece, on_json); };
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (!success(response))
    Impl::fail(op, response, "the build context must be a tar archive holding the Dockerfile");
  splitter.finish(on_json);
  if (!partial.empty())
    emit("\n");
  if (error)
    throw EngineError(fmt::format("{} failed: {}", op.what, *error), response.status, *error);
  if (image.empty()) {
    // An engine that names the image only in its last line of output.
    const auto found = co_await inspect_image(tag);
    if (found)
      image = detail::string_field_of(*found, "Id");
  }
  if (image.empty())
    throw EngineError(fmt::format("{} failed: the engine did not say which image it made", op.what),
                      response.status, "");
  co_return image;
}

asio::awaitable<std::string> Engine::commit_container(std::string id, std::string repo,
                                                      std::string tag,
                                                      std::map<std::string, std::string> labels) {
  const Operation op{fmt::format("committing container '{}' as '{}:{}'", id, repo, tag)};
  std::string target = "/commit?container=" + detail::url_encode(id) +
                       "&repo=" + detail::url_encode(repo) + "&tag=" + detail::url_encode(tag) +
                       "&pause=1";
  // Labels as Dockerfile LABEL changes: both engines apply those (Podman's compatible API
  // ignores a config body's labels).
  for (const auto& [key, value] : labels) {
    json::string quoted(value);
    target += "&changes=" + detail::url_encode(fmt::format("LABEL {}={}", key,
                                                           json::serialize(json::value(quoted))));
  }
  auto request = make_request("POST", std::move(target));
  request.headers.emplace_back("Content-Type", "application/json");
  request.body = "{}";
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  if (!success(response))
    Impl::fail(op, response);
  const json::object answer = Impl::parse_object(op, response);
  std::string image = detail::string_field_of(answer, "Id");
  if (image.empty()) {
    throw EngineError(fmt::format("{} failed: the engine's answer has no image id: {}", op.what,
                                  response.body.substr(0, 200)),
                      response.status, "");
  }
  co_return image;
}

asio::awaitable<void> Engine::pause_container(std::string id) {
  const Operation op{fmt::format("pausing container '{}'", id)};
  auto request = make_request("POST", "/containers/" + detail::url_encode(id) + "/pause");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (success(response))
    co_return;
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  const std::string message = detail::engine_message_of(response.body);
  if (message.find("already paused") != std::string::npos)
    co_return;
  Impl::fail(op, response);
}

asio::awaitable<void> Engine::unpause_container(std::string id) {
  const Operation op{fmt::format("unpausing container '{}'", id)};
  auto request = make_request("POST", "/containers/" + detail::url_encode(id) + "/unpause");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (success(response))
    co_return;
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  const std::string message = detail::engine_message_of(response.body);
  if (message.find("is not paused") != std::string::npos ||
      message.find("not paused") != std::string::npos)
    co_return;
  Impl::fail(op, response);
}

asio::awaitable<ContainerStats> Engine::container_stats(std::string id) {
  const Operation op{fmt::format("reading the use of container '{}'", id)};
  auto request = make_request("GET", "/containers/" + detail::url_encode(id) + "/stats?stream=0");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  if (!success(response))
    Impl::fail(op, response);
  co_return detail::parse_container_stats(Impl::parse_object(op, response));
}

asio::awaitable<std::pair<std::int64_t, std::int64_t>> Engine::container_size(std::string id) {
  const Operation op{fmt::format("measuring container '{}'", id)};
  auto request = make_request("GET", "/containers/" + detail::url_encode(id) + "/json?size=1");
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (response.status == 404)
    Impl::fail(op, response, kNoContainerHint);
  if (!success(response))
    Impl::fail(op, response);
  const json::object answer = Impl::parse_object(op, response);
  auto number = [&answer](std::string_view key) -> std::int64_t {
    const auto* v = answer.if_contains(key);
    return v != nullptr && (v->is_int64() || v->is_uint64()) ? v->to_number<std::int64_t>() : 0;
  };
  co_return std::pair{number("SizeRw"), number("SizeRootFs")};
}

asio::awaitable<void> Engine::remove_image(std::string name, bool force) {
  const Operation op{fmt::format("removing image '{}'", name)};
  auto request = make_request("DELETE", "/images/" + image_path(name) + (force ? "?force=1" : ""));
  const http::ClientResponse response = co_await impl_->send(std::move(request), op);
  if (success(response) || response.status == 404)
    co_return;
  if (response.status == 409)
    Impl::fail(op, response, "a container uses it: remove the container first, or force");
  Impl::fail(op, response);
}

}  // namespace rex::docker
