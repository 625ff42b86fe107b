#include <rex/backends/daytona/daytona_deployment.hpp>

#include <rex/core/backoff.hpp>
#include <rex/core/object_fields.hpp>
#include <rex/core/random.hpp>
#include <rex/core/retry.hpp>
#include <rex/core/temp_file.hpp>
#include <rex/core/text.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/multipart.hpp>
#include <rex/http/url.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include "backends/daytona/daytona_calls.hpp"
#include "core/clock.hpp"
#include "deployment/cloud_start.hpp"
#include "deployment/hand_over.hpp"
#include "deployment/service_client.hpp"
#include "deployment/setting_from_env.hpp"

#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

namespace rex {

namespace json = boost::json;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kDefaultApiUrl = "https://app.daytona.io/api";

using detail::from_env;

// Daytona's error shape ({"statusCode", "message", "error"} from its API, {"message", "code",
// ...} from the toolbox) as one line; else the status and the body's start.
std::string daytona_error(const http::ClientResponse& r) {
  boost::system::error_code ec;
  const json::value v = json::parse(r.body, ec);
  if (!ec && v.is_object()) {
    const json::object& o = v.get_object();
    std::string message = field_text(o, {"message"});
    if (const json::value* m = o.if_contains("message"); m != nullptr && m->is_array()) {
      for (const auto& part : m->get_array())  // a validation error lists its complaints
        if (part.is_string())
          message += (message.empty() ? "" : "; ") + std::string(part.get_string());
    }
    if (!message.empty())
      return fmt::format("HTTP {}: {}", r.status, message);
  }
  std::string body = r.body.substr(0, 500);
  return fmt::format("HTTP {}{}{}", r.status, body.empty() ? "" : ": ", body);
}

bool retryable(unsigned status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

// 409 answers a delete while the sandbox changes state ("Sandbox state change in progress").
bool retryable_delete(unsigned status) {
  return retryable(status) || status == 409;
}

json::object parse_object(const http::ClientResponse& r, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(r.body, ec);
  if (ec || !v.is_object())
    throw DeploymentStartupError(fmt::format("daytona: {}: the answer is not a JSON object: {}",
                                             what, r.body.substr(0, 300)));
  return std::move(v.get_object());
}

struct DaytonaSandbox {
  asio::any_io_executor executor;
  DaytonaDeploymentConfig config;
  std::string key_source;  // where the API key came from, for a refused key's message
  std::function<void(DeploymentStage, std::string)> report;

  std::string id = random_hex(8);  // the deployment's, in the sandbox's labels
  std::string token;               // rex-server's
  std::string sandbox_id;
  std::string toolbox_url;  // the sandbox's toolbox API: toolboxProxyUrl/ID
  std::string session_id;
  std::string command_id;  // the server's command in that session
  std::string url;         // the server's: the port's preview URL
  std::string preview_token;
  std::unique_ptr<http::Client> api;
  std::unique_ptr<http::Client> toolbox;
  std::unique_ptr<RemoteRuntime> runtime;
  bool deleted = false;  // the sandbox is deleted (or was never made)

  void emit(DeploymentStage stage, std::string message) const {
    if (report)
      report(stage, std::move(message));
  }

  std::chrono::milliseconds step_timeout() const {
    return detail::seconds_to_ms(std::min(config.startup_timeout, Seconds(120)));
  }

  http::Client& client_for(std::unique_ptr<http::Client>& c, const std::string& base) {
    if (!c) {
      http::ClientConfig cc;
      cc.timeout = step_timeout();
      cc.user_agent = "rex-daytona";
      cc.headers.emplace_back("Authorization", "Bearer " + config.api_key);
      if (!config.organization_id.empty())
        cc.headers.emplace_back("X-Daytona-Organization-ID", config.organization_id);
      cc.headers.emplace_back("X-Daytona-Source", "rex");
      c = std::make_unique<http::Client>(executor, base, std::move(cc));
    }
    return *c;
  }

  // One call, with Daytona's throttling and transient failures tried again; any other answer
  // is returned as it is, except a refused key, which throws at once.
  asio::awaitable<http::ClientResponse> call(http::Client& client, http::ClientRequest request,
                                             std::string what,
                                             bool (*again)(unsigned) = retryable) {
    auto attempt = [&](unsigned,
                       bool last) -> asio::awaitable<std::optional<http::ClientResponse>> {
      http::ClientResponse got;
      try {
        auto sending = client.request(request);
        got = co_await std::move(sending);
      } catch (const http::ConnectionError& e) {
        if (last)
          throw DeploymentStartupError(fmt::format("daytona: {}: {}", what, e.what()));
        co_return std::nullopt;
      }
      if (got.status == 401 || got.status == 403)
        throw DeploymentStartupError(fmt::format("daytona: {}: the API key from {} was refused: {}",
                                                 what, key_source, daytona_error(got)));
      if (!again(got.status) || last)
        co_return got;
      co_return std::nullopt;
    };
    auto calling = retrying<http::ClientResponse>(executor, RetryLoop{}, std::move(attempt));
    co_return co_await std::move(calling);
  }

  // A JSON call that must succeed (2xx); DeploymentStartupError naming it otherwise.
  asio::awaitable<http::ClientResponse> checked(http::Client& client, std::string method,
                                                std::string target, std::string what,
                                                std::optional<json::object> body = {}) {
    http::ClientRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    if (body) {
      r.body = json::serialize(*body);
      r.headers.emplace_back("Content-Type", "application/json");
    }
    auto calling = call(client, std::move(r), what);
    http::ClientResponse got = co_await std::move(calling);
    if (got.status / 100 != 2)
      throw DeploymentStartupError(fmt::format("daytona: {}: {}", what, daytona_error(got)));
    co_return got;
  }

  http::Client& api_client() { return client_for(api, config.api_url); }

  std::string sandbox_path() const { return "/sandbox/" + http::url_encode(sandbox_id); }

  json::object labels() const {
    std::map<std::string, std::string> l = config.labels;
    for (auto& [k, v] : owner_labels())
      l[k] = v;
    l[std::string(labels::managed)] = "1";
    l[std::string(labels::deployment)] = id;
    const auto now = rex::detail::unix_seconds();
    l[std::string(labels::expires)] =
        std::to_string(now + static_cast<std::int64_t>(config.container_timeout.count()) + 60);
    return detail::json_string_map(l);
  }

  json::object create_body() const {
    json::object body{{"env", detail::json_string_map(config.env)},
                      {"labels", labels()},
                      {"public", config.public_preview},
                      // Daytona deletes the sandbox at this age whatever happens here.
                      {"ttlMinutes", static_cast<std::int64_t>(
                                         std::ceil(config.container_timeout.count() / 60.0))}};
    if (!config.snapshot.empty())
      body["snapshot"] = config.snapshot;
    else  // an image, as Daytona's SDKs send one: a Dockerfile of one line
      body["buildInfo"] = json::object{{"dockerfileContent", "FROM " + config.image + "\n"}};
    if (!config.target.empty())
      body["target"] = config.target;
    for (const auto& [k, v] : config.sandbox_args)
      body[k] = v;
    return body;
  }

  static std::string state_of(const json::object& sandbox) {
    return field_text(sandbox, {"state"});
  }

  static std::string reason_of(const json::object& sandbox) {
    std::string reason = field_text(sandbox, {"errorReason"});
    return reason.empty() ? std::string("no reason given") : reason;
  }

  asio::awaitable<json::object> get_sandbox() {
    auto getting = checked(api_client(), "GET", sandbox_path(), "GET " + sandbox_path());
    const http::ClientResponse got = co_await std::move(getting);
    co_return parse_object(got, "GET " + sandbox_path());
  }

  asio::awaitable<json::object> create_sandbox() {
    emit(DeploymentStage::creating,
         fmt::format("creating a Daytona sandbox from {} at {}",
                     config.snapshot.empty() ? config.image : "snapshot " + config.snapshot,
                     config.api_url));
    auto creating = checked(api_client(), "POST", "/sandbox", "POST /sandbox", create_body());
    const http::ClientResponse got = co_await std::move(creating);
    json::object sandbox = parse_object(got, "POST /sandbox");
    sandbox_id = field_text(sandbox, {"id"});
    if (sandbox_id.empty())
      throw DeploymentStartupError("daytona: POST /sandbox answered without an id: " +
                                   got.body.substr(0, 300));
    co_return sandbox;
  }

  // GET /sandbox/{id} until `started`; a build or start that fails ends the wait.
  asio::awaitable<json::object> wait_until_started(json::object sandbox) {
    emit(DeploymentStage::waiting, fmt::format("waiting for the sandbox {} to start", sandbox_id));
    const auto until = Clock::now() + detail::seconds_to_ms(config.startup_timeout);
    const Backoff poll{std::chrono::milliseconds(200), std::chrono::seconds(2), 1.5, 0.0};
    asio::steady_timer pause(executor);
    for (unsigned attempt = 1;; ++attempt) {
      const std::string state = state_of(sandbox);
      if (state == "started")
        co_return sandbox;
      if (state == "error" || state == "build_failed" || state == "destroyed" ||
          state == "destroying")
        throw DeploymentStartupError(fmt::format("daytona: the sandbox {} is {}: {}", sandbox_id,
                                                 state, reason_of(sandbox)));
      if (Clock::now() > until)
        throw DeploymentStartupError(fmt::format(
            "daytona: the sandbox {} was not started after {:g} s (state {})", sandbox_id,
            config.startup_timeout.count(), state.empty() ? "unknown" : state));
      pause.expires_after(
          std::chrono::duration_cast<Clock::duration>(backoff_delay(poll, attempt, 0.0)));
      co_await pause.async_wait(asio::use_awaitable);
      auto looking = get_sandbox();
      sandbox = co_await std::move(looking);
    }
  }

  asio::awaitable<void> open_toolbox(json::object sandbox) {
    std::string base = field_text(sandbox, {"toolboxProxyUrl"});
    if (base.empty()) {
      const std::string target = sandbox_path() + "/toolbox-proxy-url";
      auto asking = checked(api_client(), "GET", target, "GET " + target);
      const http::ClientResponse got = co_await std::move(asking);
      base = field_text(parse_object(got, "GET " + target), {"url"});
    }
    while (base.ends_with('/'))
      base.pop_back();
    if (base.empty())
      throw DeploymentStartupError("daytona: the sandbox " + sandbox_id + " has no toolbox URL");
    toolbox_url = base + "/" + http::url_encode(sandbox_id);
    try {
      (void)http::parse_url(toolbox_url);
    } catch (const http::InvalidUrlError& e) {
      throw DeploymentStartupError(
          fmt::format("daytona: the toolbox URL {}: {}", toolbox_url, e.what()));
    }
  }

  http::Client& toolbox_client() { return client_for(toolbox, toolbox_url); }

  // POST /files/upload-v2?path=, one file as multipart/form-data (field "file").
  asio::awaitable<void> upload(std::string local, std::string remote) {
    TempDir scratch =
        TempDir::create_in(std::filesystem::temp_directory_path().string(), "rex-daytona-");
    http::MultipartFile file;
    file.name = "file";
    file.filename = std::filesystem::path(remote).filename().string();
    file.path = local;
    const std::string body = scratch.path() + "/body";
    const std::string content_type = http::write_multipart_body(body, {}, file);
    http::ClientRequest r;
    r.method = "POST";
    r.target = "/files/upload-v2?path=" + http::url_encode(remote);
    r.body_file = body;
    r.headers.emplace_back("Content-Type", content_type);
    const std::string what = "uploading " + remote;
    auto sending = call(toolbox_client(), std::move(r), what);
    const http::ClientResponse got = co_await std::move(sending);
    if (got.status / 100 != 2)
      throw DeploymentStartupError(fmt::format("daytona: {}: {}", what, daytona_error(got)));
  }

  // The server's output so far, for a start that failed.
  asio::awaitable<std::string> server_output() {
    if (session_id.empty() || command_id.empty())
      co_return std::string();
    try {
      const std::string target =
          fmt::format("/process/session/{}/command/{}/logs", http::url_encode(session_id),
                      http::url_encode(command_id));
      auto asking = checked(toolbox_client(), "GET", target, "GET " + target);
      const http::ClientResponse got = co_await std::move(asking);
      boost::system::error_code ec;
      const json::value v = json::parse(got.body, ec);
      if (!ec && v.is_object())
        co_return field_text(v.get_object(), {"output"});
      co_return got.body;
    } catch (const std::exception& e) {
      co_return std::string("(its output could not be read: ") + e.what() + ")";
    }
  }

  asio::awaitable<void> start_server(std::string local_server) {
    const std::string name = "rex-server-" + random_hex(4);
    emit(DeploymentStage::starting, fmt::format("sandbox {}: uploading rex-server", sandbox_id));
    {
      auto uploading = upload(local_server, name);
      co_await std::move(uploading);
    }
    {
      // The token travels in a file removed at once: a session's command is logged and shown.
      TempDir scratch =
          TempDir::create_in(std::filesystem::temp_directory_path().string(), "rex-daytona-");
      const std::string token_file = scratch.path() + "/token";
      {
        std::ofstream out(token_file, std::ios::binary);
        out << token;
      }
      std::filesystem::permissions(
          token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
      auto uploading = upload(token_file, name + ".token");
      co_await std::move(uploading);
    }
    emit(DeploymentStage::starting, fmt::format("sandbox {}: starting rex-server", sandbox_id));
    session_id = "rex-server-" + random_hex(4);
    {
      auto making = checked(toolbox_client(), "POST", "/process/session", "POST /process/session",
                            json::object{{"sessionId", session_id}});
      co_await std::move(making);
    }
    const auto lifetime = static_cast<std::int64_t>(std::ceil(config.container_timeout.count()));
    const std::string command = fmt::format(
        "chmod 700 ./{0} && REX_AUTH_TOKEN=$(cat ./{0}.token) && rm -f ./{0}.token && "
        "export REX_AUTH_TOKEN && exec ./{0} --host 0.0.0.0 --port {1} --max-lifetime {2}",
        name, config.port, lifetime);
    const std::string target = "/process/session/" + http::url_encode(session_id) + "/exec";
    auto running =
        checked(toolbox_client(), "POST", target, "POST " + target,
                json::object{{"command", "sh -c " + shell_quote(command)}, {"runAsync", true}});
    const http::ClientResponse got = co_await std::move(running);
    command_id = field_text(parse_object(got, "POST " + target), {"cmdId"});
  }

  asio::awaitable<void> open_preview() {
    const std::string target = fmt::format("{}/ports/{}/preview-url", sandbox_path(), config.port);
    auto asking = checked(api_client(), "GET", target, "GET " + target);
    const http::ClientResponse got = co_await std::move(asking);
    const json::object preview = parse_object(got, "GET " + target);
    url = detail::checked_base_url(field_text(preview, {"url"}), "daytona: the preview URL");
    preview_token = field_text(preview, {"token"});
    RemoteRuntimeConfig rc;
    rc.url = url;
    rc.auth_token = token;
    if (!preview_token.empty())
      rc.client.headers.emplace_back("x-daytona-preview-token", preview_token);
    // The preview proxy shows browsers a warning page first; a program skips it.
    rc.client.headers.emplace_back("X-Daytona-Skip-Preview-Warning", "true");
    runtime = std::make_unique<RemoteRuntime>(executor, std::move(rc));
  }

  asio::awaitable<void> start() {
    const std::string local_server = find_rex_server(config.server_path);
    token = random_hex(16);
    auto creating = create_sandbox();
    json::object sandbox = co_await std::move(creating);
    auto waiting = wait_until_started(std::move(sandbox));
    sandbox = co_await std::move(waiting);
    auto opening = open_toolbox(sandbox);
    co_await std::move(opening);
    auto starting = start_server(local_server);
    co_await std::move(starting);
    auto previewing = open_preview();
    co_await std::move(previewing);
    emit(DeploymentStage::waiting, "waiting for rex-server at " + url);
    std::string failure;
    try {
      co_await runtime->wait_until_alive(detail::seconds_to_ms(config.runtime_timeout));
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      auto reading = server_output();
      const std::string output = co_await std::move(reading);
      throw DeploymentStartupError(fmt::format(
          "daytona: rex-server at {} (sandbox {}) did not answer within {:g} s: {}; its output: {}",
          url, sandbox_id, config.runtime_timeout.count(), failure,
          output.empty() ? std::string("(none)") : output.substr(0, 2000)));
    }
  }

  // DELETE /sandbox/{id}; a sandbox already gone is fine.
  asio::awaitable<void> delete_sandbox() {
    if (sandbox_id.empty() || deleted)
      co_return;
    http::ClientRequest r;
    r.method = "DELETE";
    r.target = sandbox_path();
    auto deleting = call(api_client(), std::move(r), "DELETE " + sandbox_path(), retryable_delete);
    const http::ClientResponse got = co_await std::move(deleting);
    if (got.status / 100 != 2 && got.status != 404)
      throw DeploymentStartupError(
          fmt::format("daytona: DELETE {}: {}", sandbox_path(), daytona_error(got)));
    deleted = true;
  }
};

// `config` with the environment's values filled in and checked; `key_source` says where its key
// came from.
DaytonaDeploymentConfig resolved(DaytonaDeploymentConfig config, std::string* key_source) {
  if (key_source != nullptr)
    *key_source = config.api_key.empty() ? "DAYTONA_API_KEY" : "the config's api_key";
  config.api_key = from_env(config.api_key, "DAYTONA_API_KEY");
  if (config.api_key.empty())
    throw DeploymentConfigError(
        "daytona: no API key: set api_key in the config or DAYTONA_API_KEY");
  std::string api_url = from_env(config.api_url, "DAYTONA_API_URL");
  config.api_url = detail::checked_base_url(
      api_url.empty() ? std::string(kDefaultApiUrl) : std::move(api_url), "daytona.api_url");
  config.target = from_env(config.target, "DAYTONA_TARGET");
  if (config.port <= 0 || config.port > 65535)
    throw DeploymentConfigError(fmt::format("daytona.port: {} is not a TCP port", config.port));
  if (!(config.container_timeout.count() >= 60))
    throw DeploymentConfigError("daytona.container_timeout: must be at least 60 seconds");
  return config;
}

std::shared_ptr<DaytonaSandbox> make_sandbox(asio::any_io_executor executor,
                                             DaytonaDeploymentConfig config) {
  auto s = std::make_shared<DaytonaSandbox>();
  s->config = resolved(std::move(config), &s->key_source);
  s->executor = std::move(executor);
  return s;
}

}  // namespace

DaytonaDeploymentConfig resolve_daytona_config(DaytonaDeploymentConfig config) {
  return resolved(std::move(config), nullptr);
}

asio::awaitable<StartedSandbox> create_daytona_sandbox(asio::any_io_executor executor,
                                                       DaytonaDeploymentConfig config,
                                                       std::string working_dir,
                                                       std::string deployment_id,
                                                       SandboxProgress progress) {
  auto s = make_sandbox(std::move(executor), std::move(config));
  if (!deployment_id.empty())
    s->id = std::move(deployment_id);
  // Nothing is left behind: a sandbox this start made is deleted.
  return detail::start_cloud_sandbox("daytona", std::move(s), &DaytonaSandbox::delete_sandbox,
                                     "deleting", std::move(working_dir), std::move(progress));
}

asio::awaitable<std::optional<std::string>> daytona_sandbox_lost(asio::any_io_executor executor,
                                                                 DaytonaDeploymentConfig config,
                                                                 std::string sandbox_id) {
  auto s = make_sandbox(std::move(executor), std::move(config));
  s->sandbox_id = std::move(sandbox_id);
  http::ClientRequest get;
  get.target = s->sandbox_path();
  auto looking = s->call(s->api_client(), std::move(get), "GET " + s->sandbox_path());
  const http::ClientResponse got = co_await std::move(looking);
  if (got.status == 404)
    co_return fmt::format("the sandbox {} no longer exists (it was deleted)", s->sandbox_id);
  if (got.status / 100 != 2)
    throw DeploymentStartupError(
        fmt::format("daytona: GET {}: {}", s->sandbox_path(), daytona_error(got)));
  const json::object sandbox = parse_object(got, "GET " + s->sandbox_path());
  const std::string state = DaytonaSandbox::state_of(sandbox);
  if (state == "started")
    co_return std::nullopt;
  co_return fmt::format("the sandbox {} is {}: {}", s->sandbox_id, state,
                        DaytonaSandbox::reason_of(sandbox));
}

DaytonaDeployment::DaytonaDeployment(asio::any_io_executor executor, DaytonaDeploymentConfig config)
    : SandboxDeployment(executor, open_daytona_backend(executor, config), SandboxRequest{}),
      config_(resolve_daytona_config(std::move(config))) {}

asio::awaitable<void> delete_daytona_sandbox(asio::any_io_executor executor,
                                             DaytonaDeploymentConfig config,
                                             std::string sandbox_id) {
  auto s = make_sandbox(std::move(executor), std::move(config));
  s->sandbox_id = std::move(sandbox_id);
  auto deleting = s->delete_sandbox();
  co_await std::move(deleting);
}

asio::awaitable<json::array> list_daytona_sandboxes(asio::any_io_executor executor,
                                                    DaytonaDeploymentConfig config,
                                                    std::map<std::string, std::string> labels) {
  auto s = make_sandbox(std::move(executor), std::move(config));
  const std::string filter = http::url_encode(json::serialize(detail::json_string_map(labels)));
  json::array out;
  std::string cursor;
  for (int page = 0; page < 100; ++page) {
    const std::string target = "/sandbox?limit=100&labels=" + filter +
                               (cursor.empty() ? "" : "&cursor=" + http::url_encode(cursor));
    auto listing = s->checked(s->api_client(), "GET", target, "GET /sandbox");
    const http::ClientResponse got = co_await std::move(listing);
    boost::system::error_code ec;
    json::value v = json::parse(got.body, ec);
    // Daytona's paginated answer ({items, nextCursor}); a plain array from older servers.
    json::array* items = ec ? nullptr : v.if_array();
    if (items == nullptr && !ec && v.is_object()) {
      if (json::value* i = v.get_object().if_contains("items"))
        items = i->if_array();
    }
    if (items == nullptr)
      throw DeploymentStartupError("daytona: GET /sandbox: not a list of sandboxes: " +
                                   got.body.substr(0, 300));
    for (auto& item : *items) {
      const json::object* o = item.if_object();
      const json::object* l = o && o->if_contains("labels") ? o->at("labels").if_object() : nullptr;
      bool all = l != nullptr;
      for (const auto& [k, want] : labels)  // the filter is the server's; this checks it
        all = all && l->if_contains(k) && l->at(k).is_string() && l->at(k).get_string() == want;
      if (all)
        out.push_back(std::move(item));
    }
    cursor = v.is_object() ? field_text(v.get_object(), {"nextCursor"}) : std::string();
    if (cursor.empty())
      break;
  }
  co_return out;
}

}  // namespace rex
