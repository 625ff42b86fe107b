#include <rex/backends/e2b/e2b_deployment.hpp>

#include <rex/core/random.hpp>
#include <rex/core/temp_file.hpp>
#include <rex/core/text.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/http/client.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/connect_envelope.hpp>
#include <rex/http/multipart.hpp>
#include <rex/http/url.hpp>

#include <rex/protocol/exceptions.hpp>

#include "backends/e2b/e2b_calls.hpp"
#include "core/clock.hpp"
#include "deployment/hand_over.hpp"
#include "deployment/service_client.hpp"
#include "deployment/setting_from_env.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

namespace rex {

namespace json = boost::json;

namespace {

constexpr int kEnvdPort = 49983;  // E2B's in-sandbox daemon

using detail::from_env;

// E2B's error shape, {"code", "message"}, as one line; else the status and the body's start.
std::string e2b_error(const http::ClientResponse& r) {
  boost::system::error_code ec;
  const json::value v = json::parse(r.body, ec);
  if (!ec && v.is_object()) {
    if (const auto* m = v.get_object().if_contains("message"); m != nullptr && m->is_string())
      return fmt::format("HTTP {}: {}", r.status, std::string_view(m->get_string()));
  }
  return fmt::format("HTTP {}: {}", r.status, r.body.substr(0, 500));
}

const json::string* string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? &v->get_string() : nullptr;
}

// Thrown from the start stream's body callback once the server has said where it listens: it
// ends the stream (the connection closes; the process runs on, as E2B's background commands
// do).
struct Listening {
  int port;
};

// The port in rex-server's "listening on http://HOST:PORT" line, once `output` holds it whole.
std::optional<int> listening_port(std::string_view output) {
  const auto at = output.find("listening on ");
  if (at == std::string_view::npos)
    return std::nullopt;
  const auto end = output.find_first_of(" \r\n", at + 13);
  if (end == std::string_view::npos)
    return std::nullopt;  // the line is not complete yet
  const std::string_view url = output.substr(at + 13, end - at - 13);
  const auto colon = url.rfind(':');
  if (colon == std::string_view::npos)
    return std::nullopt;
  int port = 0;
  for (const char ch : url.substr(colon + 1)) {
    if (ch < '0' || ch > '9' || port > 65535)
      return std::nullopt;
    port = port * 10 + (ch - '0');
  }
  return port > 0 && port <= 65535 ? std::optional<int>(port) : std::nullopt;
}

// A file only its owner can read, holding `text`.
void write_secret_file(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw_os_error(errno, path);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  ::close(fd);
  if (!ok)
    throw_os_error(err, path);
}

// The control API's client for one call.
http::ClientConfig api_client_config() {
  http::ClientConfig cc;
  cc.timeout = std::chrono::seconds(30);
  return cc;
}

// One sandbox's start: its state while rex-server is put into it and started.
struct E2BSandbox {
  asio::any_io_executor executor;
  E2BDeploymentConfig config;  // resolved: key, URLs and domain filled in
  std::function<void(DeploymentStage, std::string)> report;

  std::string sandbox_id;
  std::string envd_token;
  std::string token;  // rex-server's
  std::string url;    // rex-server's, once it listens
  int server_port = 0;
  std::unique_ptr<RemoteRuntime> runtime;

  void emit(DeploymentStage stage, std::string message) const {
    if (report)
      report(stage, std::move(message));
  }

  std::string port_url(int port) const {
    if (!config.sandbox_url.empty())
      return config.sandbox_url;
    return fmt::format("https://{}-{}.{}", port, sandbox_id, config.domain);
  }

  std::vector<std::pair<std::string, std::string>> port_headers(int port) const {
    std::vector<std::pair<std::string, std::string>> h;
    if (!config.sandbox_url.empty()) {
      h.emplace_back("E2b-Sandbox-Id", sandbox_id);
      h.emplace_back("E2b-Sandbox-Port", std::to_string(port));
    }
    if (!envd_token.empty())
      h.emplace_back(port == kEnvdPort ? "X-Access-Token" : "e2b-traffic-access-token", envd_token);
    return h;
  }

  // For the sandbox's daemon (envd).
  http::ClientConfig envd_client_config() const {
    http::ClientConfig cc;
    cc.timeout = detail::seconds_to_ms(config.startup_timeout);
    cc.headers = port_headers(kEnvdPort);
    return cc;
  }

  asio::awaitable<void> create_sandbox();
  asio::awaitable<void> upload(const std::string& local, const std::string& remote);
  asio::awaitable<int> start_server(const std::string& server, const std::string& token_file);
  asio::awaitable<void> start();
  asio::awaitable<void> remove();
};

asio::awaitable<void> E2BSandbox::create_sandbox() {
  // rex's labels (gc.hpp) among the metadata, by which `rex gc --deployment e2b` finds and
  // judges the sandbox: the owner, and the end of the sandbox's timeout (and the deployment's
  // id, in config.metadata when one was given).
  std::map<std::string, std::string> metadata = config.metadata;
  for (auto& [k, v] : owner_labels())
    metadata[k] = v;
  metadata[std::string(labels::managed)] = "1";
  metadata[std::string(labels::expires)] =
      std::to_string(rex::detail::unix_seconds() +
                     static_cast<std::int64_t>(std::ceil(config.timeout.count())) + 60);
  json::object body{{"templateID", config.template_id},
                    {"timeout", static_cast<std::int64_t>(std::ceil(config.timeout.count()))},
                    {"metadata", detail::json_string_map(metadata)},
                    {"envVars", detail::json_string_map(config.env)}};
  http::ClientConfig cc;
  cc.timeout = detail::seconds_to_ms(config.startup_timeout);
  http::Client client(executor, config.api_url, cc);
  http::ClientRequest create;
  create.method = "POST";
  create.target = "/sandboxes";
  create.body = json::serialize(body);
  create.headers.emplace_back("Content-Type", "application/json");
  create.headers.emplace_back("X-API-KEY", config.api_key);
  http::ClientResponse answer;
  try {
    answer = co_await client.request(std::move(create));
  } catch (const std::exception& e) {
    throw DeploymentStartupError(
        fmt::format("cannot reach E2B's API at {}: {}", config.api_url, e.what()));
  }
  if (answer.status != 201 && answer.status != 200)
    throw DeploymentStartupError(fmt::format("E2B's API at {} refused the sandbox ({}): {}",
                                             config.api_url, config.template_id,
                                             e2b_error(answer)));
  boost::system::error_code ec;
  const json::value created = json::parse(answer.body, ec);
  const json::object* o = ec ? nullptr : created.if_object();
  const json::string* id = o ? string_at(*o, "sandboxID") : nullptr;
  if (id == nullptr || id->empty())
    throw DeploymentStartupError(fmt::format("E2B's API at {} answered without a sandboxID: {}",
                                             config.api_url, answer.body.substr(0, 500)));
  sandbox_id = std::string(*id);
  if (const json::string* token = string_at(*o, "envdAccessToken"))
    envd_token = std::string(*token);
  if (const json::string* domain = string_at(*o, "domain"); domain && !domain->empty())
    config.domain = std::string(*domain);
}

asio::awaitable<void> E2BSandbox::upload(const std::string& local, const std::string& remote) {
  TempDir scratch = TempDir::create_in(std::filesystem::temp_directory_path().string(), "rex-e2b-");
  http::MultipartFile file;
  file.name = "file";
  file.filename = remote;
  file.path = local;
  const std::string body = scratch.path() + "/body";
  const std::string content_type = http::write_multipart_body(body, {}, file);
  http::Client client(executor, port_url(kEnvdPort), envd_client_config());
  http::ClientRequest upload;
  upload.method = "POST";
  upload.target = "/files?path=" + http::url_encode(remote);
  upload.body_file = body;
  upload.headers.emplace_back("Content-Type", content_type);
  const http::ClientResponse answer = co_await client.request(std::move(upload));
  if (answer.status / 100 != 2)
    throw std::runtime_error(fmt::format("the upload was refused: {}", e2b_error(answer)));
}

asio::awaitable<int> E2BSandbox::start_server(const std::string& server,
                                              const std::string& token_file) {
  const auto lifetime = static_cast<std::int64_t>(std::ceil(config.timeout.count()));
  // The token comes from a file that is removed at once: a command line or an environment
  // given to the start call may be logged on the way (a gateway's transcript records them).
  // An uploaded server is made executable first; one of the template's is used as it is.
  const std::string chmod =
      config.template_server_path.empty() ? fmt::format("chmod 700 {} && ", server) : "";
  const std::string script = fmt::format(
      "{0}REX_AUTH_TOKEN=$(cat {2}) && rm -f {2} && "
      "export REX_AUTH_TOKEN && exec {1} --host 0.0.0.0 --port {3} --max-lifetime {4}",
      chmod, server, token_file, config.server_port, lifetime);
  json::object process{{"cmd", "/bin/sh"}, {"args", json::array{"-c", script}}};
  http::Client client(executor, port_url(kEnvdPort), envd_client_config());
  http::ClientRequest start;
  start.method = "POST";
  start.target = "/process.Process/Start";
  start.body = http::connect_envelope(0, json::serialize(json::object{{"process", process}}));
  start.headers.emplace_back("Content-Type", "application/connect+json");
  start.headers.emplace_back("Connect-Protocol-Version", "1");
  http::ConnectEnvelopeReader reader;
  std::string output;  // the server's stdout and stderr, for its port or for an error
  std::string ended;   // how the process or the stream ended, if it did
  start.on_body = [&](std::string_view piece) {
    reader.feed(piece);
    while (auto e = reader.next()) {
      boost::system::error_code ec;
      const json::value v = json::parse(e->payload, ec);
      const json::object* o = ec ? nullptr : v.if_object();
      if (o == nullptr)
        throw std::runtime_error("the start stream sent a message that is not a JSON object");
      if (e->flags & http::kConnectEndStream) {
        ended = o->contains("error") ? "the stream ended with " + json::serialize(o->at("error"))
                                     : (ended.empty() ? "the stream ended" : ended);
        continue;
      }
      const json::value* event = o->if_contains("event");
      const json::object* ev = event ? event->if_object() : nullptr;
      if (ev == nullptr)
        continue;
      if (const json::value* data = ev->if_contains("data"); data && data->is_object()) {
        for (const char* stream : {"stdout", "stderr"}) {
          if (const json::string* b64 = string_at(data->get_object(), stream))
            output += base64_decode(std::string_view(*b64)).bytes;
        }
        if (const auto port = listening_port(output))
          throw Listening{*port};
      } else if (const json::value* end = ev->if_contains("end"); end && end->is_object()) {
        const json::string* status = string_at(end->get_object(), "status");
        ended = fmt::format("the process ended ({})",
                            status ? std::string_view(*status) : std::string_view("no status"));
      }
    }
  };
  try {
    const http::ClientResponse answer = co_await client.request(std::move(start));
    if (answer.status / 100 != 2)
      throw std::runtime_error(fmt::format("the start was refused: {}", e2b_error(answer)));
  } catch (const Listening& l) {
    co_return l.port;
  }
  throw std::runtime_error(fmt::format(
      "rex-server did not start: {}; its output: {}", ended.empty() ? "no port was printed" : ended,
      output.empty() ? std::string("(none)") : output.substr(0, 2000)));
}

asio::awaitable<void> E2BSandbox::start() {
  // A server in the template is started where it is; else the local one is uploaded.
  const std::string local_server =
      config.template_server_path.empty() ? find_rex_server(config.server_path) : std::string();
  token = random_hex(16);
  emit(DeploymentStage::creating, fmt::format("creating an E2B sandbox from template {} at {}",
                                              config.template_id, config.api_url));
  {
    auto creating = create_sandbox();
    co_await std::move(creating);
  }

  std::string step;
  std::exception_ptr failure;
  try {
    const std::string name = "rex-server-" + random_hex(4);
    std::string server = shell_quote(config.template_server_path);
    if (local_server.empty()) {
      step = "uploading the token";
    } else {
      step = "uploading rex-server";
      server = "./" + name;
      emit(DeploymentStage::starting, fmt::format("sandbox {}: {}", sandbox_id, step));
      co_await upload(local_server, name);
    }
    {
      TempDir scratch =
          TempDir::create_in(std::filesystem::temp_directory_path().string(), "rex-e2b-");
      const std::string token_file = scratch.path() + "/token";
      write_secret_file(token_file, token);
      co_await upload(token_file, name + ".token");
    }
    step = "starting rex-server";
    emit(DeploymentStage::starting, fmt::format("sandbox {}: {}", sandbox_id, step));
    server_port = co_await start_server(server, "./" + name + ".token");

    RemoteRuntimeConfig rc;
    rc.url = port_url(server_port);
    rc.auth_token = token;
    rc.client.headers = port_headers(server_port);
    url = rc.url;
    runtime = std::make_unique<RemoteRuntime>(executor, rc);
    step = fmt::format("waiting for rex-server on port {}", server_port);
    emit(DeploymentStage::waiting, fmt::format("sandbox {}: {}", sandbox_id, step));
    co_await runtime->wait_until_alive(detail::seconds_to_ms(config.startup_timeout));
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      throw DeploymentStartupError(
          fmt::format("E2B sandbox {} at {}: {}: {}", sandbox_id, config.api_url, step, e.what()));
    }
  }
}

// DELETE /sandboxes/ID: the sandbox this start made, when it failed.
asio::awaitable<void> E2BSandbox::remove() {
  if (sandbox_id.empty())
    co_return;
  auto killing = kill_e2b_sandbox(executor, config, sandbox_id);
  co_await std::move(killing);
}

}  // namespace

E2BDeploymentConfig resolve_e2b_config(E2BDeploymentConfig config) {
  config.api_key = from_env(config.api_key, "E2B_API_KEY");
  if (config.api_key.empty())
    throw DeploymentConfigError("e2b: no API key: set api_key in the config or E2B_API_KEY");
  config.domain = from_env(config.domain, "E2B_DOMAIN", "e2b.app");
  config.api_url = detail::checked_base_url(
      from_env(config.api_url, "E2B_API_URL", "https://api." + config.domain), "e2b.api_url");
  config.sandbox_url = from_env(config.sandbox_url, "E2B_SANDBOX_URL");
  if (!config.sandbox_url.empty())
    config.sandbox_url = detail::checked_base_url(config.sandbox_url, "e2b.sandbox_url");
  if (!(config.timeout.count() > 0))
    throw DeploymentConfigError("e2b.timeout: must be a positive number of seconds");
  return config;
}

asio::awaitable<StartedSandbox> create_e2b_sandbox(asio::any_io_executor executor,
                                                   E2BDeploymentConfig config,
                                                   std::string working_dir,
                                                   std::string deployment_id,
                                                   SandboxProgress progress) {
  auto s = std::make_shared<E2BSandbox>();
  s->executor = std::move(executor);
  s->config = resolve_e2b_config(std::move(config));
  if (!deployment_id.empty())
    s->config.metadata[std::string(labels::deployment)] = std::move(deployment_id);
  // Nothing is left behind: a sandbox this start made is killed. Sessions work where the
  // sandbox starts processes, else in the home of E2B's default user.
  return detail::start_cloud_sandbox("e2b", std::move(s), &E2BSandbox::remove, "killing",
                                     std::move(working_dir), std::move(progress), "/home/user");
}

asio::awaitable<void> kill_e2b_sandbox(asio::any_io_executor executor, E2BDeploymentConfig config,
                                       std::string sandbox_id) {
  http::Client client(executor, config.api_url, api_client_config());
  http::ClientRequest kill;
  kill.method = "DELETE";
  kill.target = "/sandboxes/" + http::url_encode(sandbox_id);
  kill.headers.emplace_back("X-API-KEY", config.api_key);
  auto killing = client.request(std::move(kill));
  const http::ClientResponse answer = co_await std::move(killing);
  // 404: a sandbox already gone is killed.
  if (answer.status / 100 != 2 && answer.status != 404)
    throw DeploymentStartupError(fmt::format("e2b: cannot kill sandbox {} at {}: {}", sandbox_id,
                                             config.api_url, e2b_error(answer)));
}

asio::awaitable<std::optional<std::string>> e2b_sandbox_lost(asio::any_io_executor executor,
                                                             E2BDeploymentConfig config,
                                                             std::string sandbox_id) {
  http::Client client(executor, config.api_url, api_client_config());
  http::ClientRequest get;
  get.target = "/sandboxes/" + http::url_encode(sandbox_id);
  get.headers.emplace_back("X-API-KEY", config.api_key);
  auto asking = client.request(std::move(get));
  const http::ClientResponse answer = co_await std::move(asking);
  if (answer.status == 404)
    co_return fmt::format("the sandbox {} is gone: {}", sandbox_id, e2b_error(answer));
  if (answer.status != 200)
    throw DeploymentStartupError(fmt::format("e2b: GET /sandboxes/{} at {}: {}", sandbox_id,
                                             config.api_url, e2b_error(answer)));
  boost::system::error_code ec;
  const json::value v = json::parse(answer.body, ec);
  const json::string* state = !ec && v.is_object() ? string_at(v.get_object(), "state") : nullptr;
  if (state == nullptr || *state == "running")
    co_return std::nullopt;
  co_return fmt::format("the sandbox {} is {}", sandbox_id, std::string_view(*state));
}

int e2b_server_port(const StartedSandbox& sandbox) {
  for (const auto& [name, value] : sandbox.headers) {
    if (name == "E2b-Sandbox-Port")
      return std::atoi(value.c_str());
  }
  // https://PORT-SANDBOX.DOMAIN
  const auto host = sandbox.url.find("://");
  return host == std::string::npos ? 0 : std::atoi(sandbox.url.c_str() + host + 3);
}

E2BDeployment::E2BDeployment(asio::any_io_executor executor, E2BDeploymentConfig config)
    : SandboxDeployment(executor, open_e2b_backend(executor, config), SandboxRequest{}),
      config_(resolve_e2b_config(std::move(config))) {}

int E2BDeployment::server_port() const noexcept {
  return started() ? e2b_server_port(sandbox()) : 0;
}

}  // namespace rex
