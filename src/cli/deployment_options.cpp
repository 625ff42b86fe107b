#include "deployment_options.hpp"

#include "stop_signals.hpp"

#include <rex/backends/backends.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/timeout.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

namespace rex::cli {

namespace json = boost::json;

namespace {

json::object base_config(const std::string& deployment) {
  if (auto config = backend_base_config(deployment))
    return std::move(*config);
  for (const MissingBackend& m : missing_backends()) {
    if (deployment == m.name)
      throw DeploymentConfigError(
          fmt::format("--deployment {}: the {} backend is not in this build: {}", deployment,
                      m.name, m.reason));
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(deployment, ec)) {
    throw DeploymentConfigError(
        fmt::format("--deployment: \"{}\" is neither a deployment type ({}) nor a JSON config file",
                    deployment, backend_names()));
  }
  return to_json(load_deployment_config(deployment));
}

std::pair<std::string, std::string> split_pair(std::string_view flag, const std::string& item) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    throw DeploymentConfigError(fmt::format("{}: expected KEY=VALUE, got \"{}\"", flag, item));
  return {item.substr(0, eq), item.substr(eq + 1)};
}

}  // namespace

void add_backend_flags(CLI::App& app, DeploymentOptions& o) {
  for (const BackendFlag* f : deployment_flags()) {
    const std::string name(f->flag);
    const std::string help = backend_flag_help(f->flag);
    auto add = [&o, name](const std::string& v) { o.flags.emplace_back(name, v); };
    switch (f->kind) {
      case FlagKind::off:
        app.add_flag_callback(
            name, [add] { add(""); }, help);
        break;
      case FlagKind::integer:
        app.add_option_function<std::int64_t>(
            name, [add](std::int64_t v) { add(std::to_string(v)); }, help);
        break;
      case FlagKind::number:
        app.add_option_function<double>(
            name, [add](double v) { add(json::serialize(json::value(v))); }, help);
        break;
      case FlagKind::list:
      case FlagKind::map:
        app.add_option_function<std::vector<std::string>>(
               name,
               [add](const std::vector<std::string>& values) {
                 for (const auto& v : values)
                   add(v);
               },
               help)
            ->allow_extra_args(false);
        break;
      case FlagKind::text:
        app.add_option_function<std::string>(name, add, help);
        break;
    }
  }
}

void add_deployment_options(CLI::App& app, DeploymentOptions& o) {
  app.add_option("--deployment", o.deployment,
                 fmt::format("{}, or the path of a JSON deployment config", backend_names()))
      ->capture_default_str();
  add_backend_flags(app, o);
  app.add_flag("-q,--quiet", o.quiet, "Print no deployment progress");
}

DeploymentConfig build_deployment_config(const DeploymentOptions& o) {
  json::object config = base_config(o.deployment);
  const std::string type = std::string(config.at("type").as_string());
  for (const auto& [flag, text] : o.flags) {
    const BackendFlag& f = backend_flag(flag, type);
    json::value& field = config[f.field];
    switch (f.kind) {
      case FlagKind::off:
        field = false;
        break;
      case FlagKind::integer:
        field = std::stoll(text);
        break;
      case FlagKind::number:
        field = json::parse(text);
        break;
      case FlagKind::list:  // repeatable: added to what the config has
        if (!field.is_array())
          field = json::array();
        field.as_array().emplace_back(text);
        break;
      case FlagKind::map: {
        if (!field.is_object())
          field = json::object();
        auto [key, value] = split_pair(flag, text);
        field.as_object()[key] = value;
        break;
      }
      case FlagKind::text:
        field = text;
        break;
    }
  }
  return deployment_config_from_json(config);
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
