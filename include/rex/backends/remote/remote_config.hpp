// RemoteDeploymentConfig: a running rex-server or swerex-remote (remote_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace rex {

/// A running rex-server or swerex-remote. host may be a whole base URL (http, https, http+unix);
/// a port, when set, is appended to it.
struct RemoteDeploymentConfig {
  static constexpr std::string_view backend = "remote";
  static constexpr settings::Rule rules[] = {{.member = "port", .min = 1, .max = 65535}};

  std::string auth_token{};
  std::string host = "http://127.0.0.1";
  std::optional<int> port{};
  Seconds timeout{0.15};          // is_alive's timeout, seconds (SWE-ReX's meaning)
  Seconds startup_timeout{10.0};  // start() waits this long for the server to answer
  // stop() closes the server's sessions (SWE-ReX's behaviour). Off for a client that works
  // beside others' sessions and must leave them alone (`rex shell`'s terminal); not in JSON.
  bool close_on_stop = true;
};
BOOST_DESCRIBE_STRUCT(RemoteDeploymentConfig, (),
                      (auth_token, host, port, timeout, startup_timeout))

}  // namespace rex
