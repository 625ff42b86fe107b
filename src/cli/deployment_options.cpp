#include "deployment_options.hpp"

#include "stop_signals.hpp"

#include <rex/core/outcome.hpp>
#include <rex/core/timeout.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

namespace rex::cli {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, 10> type_names = {
    "local", "remote",     "docker",  "dummy",   "gateway",
    "e2b",   "kubernetes", "fargate", "daytona", "modal"};

// The config field each flag sets, per deployment type; a flag absent for a type does not apply
// to it.
struct FlagField {
  std::string_view flag, type, field;
};
constexpr FlagField flag_fields[] = {
    {"--image", "docker", "image"},
    {"--image", "kubernetes", "image"},
    {"--image", "fargate", "image"},
    {"--image", "daytona", "image"},
    {"--image", "modal", "image"},
    {"--url", "remote", "host"},
    {"--url", "gateway", "url"},
    {"--url", "e2b", "api_url"},
    {"--url", "daytona", "api_url"},
    {"--url", "modal", "server_url"},
    {"--token", "remote", "auth_token"},
    {"--token", "gateway", "token"},
    {"--token", "e2b", "api_key"},
    {"--token", "daytona", "api_key"},
    {"--port", "remote", "port"},
    {"--port", "docker", "port"},
    {"--port", "e2b", "server_port"},
    {"--port", "kubernetes", "port"},
    {"--port", "fargate", "port"},
    {"--port", "daytona", "port"},
    {"--port", "modal", "port"},
    {"--pull", "docker", "pull"},
    {"--docker-arg", "docker", "docker_args"},
    {"--startup-timeout", "remote", "startup_timeout"},
    {"--startup-timeout", "docker", "startup_timeout"},
    {"--startup-timeout", "gateway", "startup_timeout"},
    {"--startup-timeout", "e2b", "startup_timeout"},
    {"--startup-timeout", "kubernetes", "startup_timeout"},
    {"--startup-timeout", "fargate", "startup_timeout"},
    {"--startup-timeout", "daytona", "startup_timeout"},
    {"--startup-timeout", "modal", "startup_timeout"},
    {"--workdir", "local", "working_dir"},
    {"--workdir", "docker", "working_dir"},
    {"--workdir", "kubernetes", "working_dir"},
    {"--env", "local", "env"},
    {"--env", "docker", "env"},
    {"--env", "gateway", "env"},
    {"--env", "e2b", "env"},
    {"--env", "kubernetes", "env"},
    {"--env", "fargate", "env"},
    {"--env", "daytona", "env"},
    {"--env", "modal", "env"},
    {"--keep", "docker", "remove_container"},
    {"--environment", "gateway", "environment"},
    {"--environment", "e2b", "template"},
    {"--environment", "modal", "environment"},
    {"--namespace", "kubernetes", "namespace"},
    {"--context", "kubernetes", "context"},
};

std::string field_for(std::string_view flag, std::string_view type) {
  std::string types;  // those the flag applies to, for the error
  for (const auto& f : flag_fields) {
    if (f.flag != flag)
      continue;
    if (f.type == type)
      return std::string(f.field);
    types += fmt::format("{}{}", types.empty() ? "" : ", ", f.type);
  }
  if (types.empty())
    throw DeploymentConfigError(fmt::format("{}: unknown deployment flag", flag));
  throw DeploymentConfigError(
      fmt::format("{} does not apply to a {} deployment (only to {})", flag, type, types));
}

json::object base_config(const std::string& deployment) {
  for (auto name : type_names) {
    if (deployment == name)
      return json::object{{"type", name}};
  }
  // Podman serves Docker's API: a docker deployment on Podman's socket.
  if (deployment == "podman")
    return json::object{{"type", "docker"}, {"container_runtime", "podman"}};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(deployment, ec)) {
    throw DeploymentConfigError(fmt::format(
        "--deployment: \"{}\" is neither a deployment type (local, docker, podman, remote, dummy, "
        "gateway, e2b, kubernetes, fargate, daytona, modal) nor a JSON config file",
        deployment));
  }
  return to_json(load_deployment_config(deployment));
}

std::pair<std::string, std::string> split_env(const std::string& item) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    throw DeploymentConfigError(fmt::format("--env: expected KEY=VALUE, got \"{}\"", item));
  return {item.substr(0, eq), item.substr(eq + 1)};
}

}  // namespace

void add_deployment_options(CLI::App& app, DeploymentOptions& o) {
  app.add_option(
         "--deployment", o.deployment,
         "local, docker, podman, remote, dummy, gateway, e2b, kubernetes, fargate, daytona, modal, "
         "or the path of a JSON deployment config")
      ->capture_default_str();
  auto set_string = [&app](const char* name, std::optional<std::string>& target, const char* help) {
    app.add_option_function<std::string>(
        name, [&target](const std::string& v) { target = v; }, help);
  };
  set_string("--image", o.image, "docker, kubernetes, fargate, daytona, modal: the image to start");
  set_string("--namespace", o.namespace_name,
             "kubernetes: the namespace of the pod (default: the context's)");
  set_string("--context", o.context, "kubernetes: the kubeconfig context (default: the current)");
  set_string(
      "--url", o.url,
      "remote: the server's base URL (or host); gateway: its base URL; e2b, daytona: the API's "
      "URL");
  set_string("--token", o.token,
             "remote: the server's auth token; gateway, e2b, daytona: an API key");
  set_string("--environment", o.environment,
             "gateway: the environment of the session; e2b: the template; modal: Modal's "
             "environment");
  app.add_option_function<std::int64_t>(
      "--port", [&o](std::int64_t v) { o.port = v; },
      "remote: the server's port; docker: the host port to publish the server on; kubernetes, "
      "fargate, daytona, modal: the server's port in the pod, task or sandbox");
  set_string("--pull", o.pull, "docker: never, missing or always");
  app.add_option("--docker-arg", o.docker_args,
                 "docker: a docker-run flag (repeat for more, e.g. --docker-arg=--memory=1g)")
      ->allow_extra_args(false);
  app.add_option_function<double>(
      "--startup-timeout", [&o](double v) { o.startup_timeout = v; },
      "remote, docker, kubernetes, fargate, daytona, modal: seconds to wait for the sandbox to "
      "answer");
  set_string("--workdir", o.workdir, "local, docker, kubernetes: the directory sessions start in");
  app.add_option("--env", o.env,
                 "local, docker, kubernetes, fargate, daytona, modal: KEY=VALUE set in sessions "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--keep", o.keep, "docker: keep the container after exit");
  app.add_flag("-q,--quiet", o.quiet, "Print no deployment progress");
}

DeploymentConfig build_deployment_config(const DeploymentOptions& o) {
  json::object config = base_config(o.deployment);
  const std::string type = std::string(config.at("type").as_string());
  if (o.image)
    config[field_for("--image", type)] = *o.image;
  if (o.url)
    config[field_for("--url", type)] = *o.url;
  if (o.token)
    config[field_for("--token", type)] = *o.token;
  if (o.port)
    config[field_for("--port", type)] = *o.port;
  if (o.pull)
    config[field_for("--pull", type)] = *o.pull;
  if (!o.docker_args.empty()) {
    json::value& args = config[field_for("--docker-arg", type)];
    if (!args.is_array())
      args = json::array();
    for (const auto& a : o.docker_args)
      args.as_array().emplace_back(a);
  }
  if (o.startup_timeout)
    config[field_for("--startup-timeout", type)] = *o.startup_timeout;
  if (o.workdir)
    config[field_for("--workdir", type)] = *o.workdir;
  if (!o.env.empty()) {
    json::value& env = config[field_for("--env", type)];
    if (!env.is_object())
      env = json::object();
    for (const auto& item : o.env) {
      auto [key, value] = split_env(item);
      env.as_object()[key] = value;
    }
  }
  if (o.keep)
    config[field_for("--keep", type)] = false;
  if (o.environment)
    config[field_for("--environment", type)] = *o.environment;
  if (o.namespace_name)
    config[field_for("--namespace", type)] = *o.namespace_name;
  if (o.context)
    config[field_for("--context", type)] = *o.context;
  return deployment_config_from_json(config);
}

std::string describe_deployment(const DeploymentConfig& config) {
  if (const auto* remote = std::get_if<RemoteDeploymentConfig>(&config)) {
    return remote->port ? fmt::format("remote {}:{}", remote->host, *remote->port)
                        : "remote " + remote->host;
  }
  if (const auto* docker = std::get_if<DockerDeploymentConfig>(&config))
    return (docker->container_runtime == "podman" ? "podman " : "docker ") + docker->image;
  if (const auto* gateway = std::get_if<GatewayDeploymentConfig>(&config))
    return fmt::format("gateway {} ({})", gateway->url, gateway->environment);
  if (const auto* kube = std::get_if<KubernetesDeploymentConfig>(&config))
    return fmt::format("kubernetes {}{}", kube->image,
                       kube->namespace_name.empty() ? "" : " in " + kube->namespace_name);
  if (const auto* fargate = std::get_if<FargateDeploymentConfig>(&config))
    return fmt::format("fargate {} on {}", fargate->image, fargate->cluster_name);
  if (const auto* daytona = std::get_if<DaytonaDeploymentConfig>(&config))
    return fmt::format("daytona {}",
                       daytona->snapshot.empty() ? daytona->image : daytona->snapshot);
  if (const auto* modal = std::get_if<ModalDeploymentConfig>(&config))
    return "modal " + modal->image;
  if (const auto* e2b = std::get_if<E2BDeploymentConfig>(&config))
    return fmt::format("e2b {}{}", e2b->template_id,
                       e2b->api_url.empty() ? "" : " at " + e2b->api_url);
  return std::string(deployment_type(config));
}

DeploymentHook progress_printer() {
  struct State {
    bool tty = ::isatty(STDERR_FILENO) == 1;
    bool open_line = false;  // a pull percentage waiting to be overwritten
    int last_tenth = -1;
  };
  auto state = std::make_shared<State>();
  return [state](const DeploymentEvent& e) {
    if (e.stage == DeploymentStage::pulling && e.percent >= 0) {
      if (state->tty) {
        fmt::print(stderr, "\r\033[Krex: {}", e.message);
        std::fflush(stderr);
        state->open_line = true;
        return;
      }
      // Not a terminal: a line per tenth, not one per chunk.
      const int tenth = static_cast<int>(e.percent / 10);
      if (tenth == state->last_tenth)
        return;
      state->last_tenth = tenth;
    }
    if (state->open_line) {
      std::fputc('\n', stderr);
      state->open_line = false;
    }
    fmt::print(stderr, "rex: {}\n", e.message);
    std::fflush(stderr);
  };
}

// ---- lifecycle ---------------------------------------------------------------------------

namespace {

namespace asio = boost::asio;

struct Supervisor {
  Deployment& deployment;
  SignalRouting routing;
  StopSignals signals;

  Supervisor(asio::io_context& io, Deployment& d, SignalRouting r)
      : deployment(d), routing(std::move(r)), signals(io) {}
};

bool cancelled(asio::cancellation_type type) {
  return type != asio::cancellation_type::none;
}

asio::awaitable<int> start_deployment(Deployment& deployment) {
  const auto state = co_await asio::this_coro::cancellation_state;
  try {
    co_await deployment.start();
    co_return 0;
  } catch (const std::exception& e) {
    if (!cancelled(state.cancelled()))
      std::cerr << "rex: " << e.what() << '\n';
  }
  co_return exit_failure;
}

asio::awaitable<int> run_body(DeploymentBody& body, Deployment& deployment) {
  const auto state = co_await asio::this_coro::cancellation_state;
  try {
    co_return co_await body(deployment);
  } catch (const std::exception& e) {
    if (!cancelled(state.cancelled()))
      std::cerr << "rex: " << e.what() << '\n';
  }
  co_return exit_failure;
}

asio::awaitable<int> supervise(Supervisor& s, DeploymentBody& body) {
  int status = exit_failure;
  {
    auto starting = start_deployment(s.deployment);
    auto aborted = s.signals.wait();
    auto race = first_of(std::move(starting), std::move(aborted));
    auto started = co_await std::move(race);
    if (started.index() == 0)
      status = std::get<0>(started);
  }
  if (s.signals.signal() == 0 && status == 0) {
    s.signals.route_interrupt(s.routing.on_interrupt);
    auto running = run_body(body, s.deployment);
    auto aborted = s.signals.wait();
    auto race = first_of(std::move(running), std::move(aborted));
    auto ran = co_await std::move(race);
    s.signals.route_interrupt(nullptr);
    if (ran.index() == 0)
      status = std::get<0>(ran);
  }
  if (s.routing.before_stop)
    co_await s.routing.before_stop();
  if (const int signo = s.signals.signal(); signo != 0) {
    std::cerr << "rex: " << signal_name(signo) << ": stopping the deployment\n";
    status = 128 + signo;
  }
  try {
    co_await s.deployment.stop();
  } catch (const std::exception& e) {
    std::cerr << "rex: stopping the deployment failed: " << e.what() << '\n';
    if (status == 0)
      status = exit_failure;
  }
  s.signals.close();
  co_return status;
}

}  // namespace

int run_with_deployment(asio::io_context& io, Deployment& deployment,
                        const DeploymentOptions& options, DeploymentBody body,
                        SignalRouting routing) {
  if (!options.quiet)
    deployment.add_hook(progress_printer());
  Supervisor supervisor(io, deployment, std::move(routing));
  Outcome<int> status;  // neither value nor error while unfinished
  asio::co_spawn(io, supervise(supervisor, body), [&](std::exception_ptr e, int s) {
    status = e ? Outcome<int>::failure(e) : Outcome<int>::success(s);
  });
  io.run();
  // Unfinished: a second signal stopped the io_context.
  return status.error() || status ? status.value() : 128 + supervisor.signals.signal();
}

}  // namespace rex::cli
