// GatewayDeploymentConfig: a session of a rex gateway (gateway_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>

#include <map>
#include <string>
#include <string_view>

namespace rex {

/// A session of a rex gateway (docs/gateway.md).
struct GatewayDeploymentConfig {
  static constexpr std::string_view backend = "gateway";

  std::string url = "http://127.0.0.1:8000";  // the gateway's base URL
  std::string token{};                        // an API key of the gateway (none: no keys there)
  std::string environment = "local";          // one of the gateway's environments
  std::string provider{};                     // empty: the environment's
  std::optional<double> timeout{};            // idle seconds before the gateway ends it
  std::optional<double> max_lifetime{};       // seconds; none: the environment's
  std::map<std::string, std::string> metadata{};
  std::map<std::string, std::string> env{};
  Seconds startup_timeout{120.0};  // the create's answer and the sandbox's first answer
};
BOOST_DESCRIBE_STRUCT(GatewayDeploymentConfig, (),
                      (url, token, environment, provider, timeout, max_lifetime, metadata, env,
                       startup_timeout))

}  // namespace rex
