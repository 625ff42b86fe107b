// `rex gateway`: the stateful sandbox service (rex/gateway/gateway.hpp) as a command.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace rex::cli {

struct GatewayOptions {
  std::string config_file;  // --config: YAML; flags given too override it
  std::string listen;
  std::string storage;
  std::string registry;
  std::string python_image;
  std::vector<std::string> api_keys;  // --api-key [TENANT=]KEY
  std::size_t max_sessions = 0;
  bool max_sessions_set = false;
  std::string log_level = "info";
};

void add_gateway_options(CLI::App& app, GatewayOptions& options);

/// Serves until SIGINT or SIGTERM, then drains and returns the exit status; sessions keep
/// running for the next start to adopt.
int gateway_command(const GatewayOptions& options);

}  // namespace rex::cli
