#include "gateway_command.hpp"

#include <rex/core/log.hpp>
#include <rex/gateway/gateway.hpp>
#include <rex/version.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "deployment_options.hpp"
#include "server_command.hpp"

namespace rex::cli {

namespace asio = boost::asio;

void add_gateway_options(CLI::App& app, GatewayOptions& o) {
  app.add_option("--config", o.config_file,
                 "YAML configuration: tenants, keys, quotas, lifetimes, providers");
  app.add_option("--listen", o.listen, "HOST:PORT or unix:PATH (default 127.0.0.1:8000)");
  app.add_option("--storage", o.storage,
                 "Folder of the database, transcripts, artifacts and local sandboxes "
                 "(default ./storage)");
  app.add_option("--registry", o.registry,
                 "Folder of environments/*.yaml (and agents/, tools/, prompts/)");
  app.add_option("--python-image", o.python_image,
                 "The image of the built-in Python3 environment on docker and podman");
  app.add_option("--api-key", o.api_keys,
                 "[TENANT=]KEY: a key of TENANT (default: tenant \"default\"); repeatable. "
                 "Without any key the gateway serves loopback only");
  app.add_option_function<std::size_t>(
      "--max-sessions",
      [&o](std::size_t n) {
        o.max_sessions = n;
        o.max_sessions_set = true;
      },
      "Concurrent sessions per tenant (0: unlimited)");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

namespace {

bool loopback_listener(const std::string& listen) {
  if (listen.starts_with("unix:"))
    return true;
  std::string_view host = std::string_view(listen).substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return is_loopback(host);
}

std::string own_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw std::runtime_error("cannot find this program's path (/proc/self/exe): " + ec.message());
  return path.string();
}

}  // namespace

int gateway_command(const GatewayOptions& o) {
  logging::set_level(logging::parse_level(o.log_level).value_or(logging::Level::info));
  gateway::GatewayConfig config;
  try {
    if (!o.config_file.empty())
      config = gateway::load_gateway_config(o.config_file);
    if (!o.listen.empty())
      config.listen = o.listen;
    if (!o.storage.empty())
      config.storage = o.storage;
    if (!o.registry.empty())
      config.registry = o.registry;
    if (!o.python_image.empty())
      config.python_image = o.python_image;
    for (const auto& key : o.api_keys)
      gateway::add_api_key(config, key);
    if (o.max_sessions_set)
      config.max_sessions = o.max_sessions;
    gateway::validate(config);
  } catch (const std::exception& e) {
    std::cerr << "rex gateway: " << e.what() << '\n';
    return exit_usage;
  }
  bool any_key = false;
  for (const auto& t : config.tenants)
    any_key = any_key || !t.keys.empty();
  if (!any_key && !loopback_listener(config.listen)) {
    std::cerr << "rex gateway: listening on " << config.listen
              << " needs API keys (--api-key or the config's tenants): without keys the "
                 "gateway serves loopback only\n";
    return exit_usage;
  }

  asio::io_context io;
  std::unique_ptr<gateway::Gateway> gw;
  try {
    gateway::Registry registry =
        config.registry.empty() ? gateway::Registry(config.python_image)
                                : gateway::Registry::load(config.registry, config.python_image);
    gw = std::make_unique<gateway::Gateway>(io.get_executor(), config, std::move(registry),
                                            own_executable());
    gw->listen();
  } catch (const std::exception& e) {
    std::cerr << "rex gateway: " << e.what() << '\n';
    return exit_usage;
  }
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec)
      return;
    logging::info("rex gateway: {}; draining (sessions keep running)",
                  signo == SIGINT ? "SIGINT" : "SIGTERM");
    gw->stop();
  });
  logging::info("rex gateway {} (id {}) listening on {}{}", rex::version(), gw->id(), gw->url(),
                any_key ? "" : " without keys (loopback only)");
  std::exception_ptr failure;
  asio::co_spawn(io, gw->run(), [&](std::exception_ptr e) {
    failure = e;
    // Drained: what is still pending (idle connections to sandboxes, timers) is dropped; the
    // sandboxes themselves run on.
    io.stop();
  });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::cerr << "rex gateway: " << e.what() << '\n';
      return exit_failure;
    }
  }
  return 0;
}

}  // namespace rex::cli
