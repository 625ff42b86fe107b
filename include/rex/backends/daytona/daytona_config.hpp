// DaytonaDeploymentConfig: a Daytona sandbox (daytona_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>

#include <map>
#include <string>
#include <string_view>

namespace rex {

// A Daytona sandbox (rex/backends/daytona/daytona_deployment.hpp, docs/daytona.md): SWE-ReX's field
// names where it has them, rex's own after. Empty strings take Daytona's environment variables.
struct DaytonaDeploymentConfig {
  static constexpr std::string_view backend = "daytona";
  static constexpr settings::Rule rules[] = {{.member = "port", .min = 1, .max = 65535},
                                             {.member = "public_preview", .name = "public"}};

  std::string api_key{};              // empty: DAYTONA_API_KEY
  std::string target{};               // the region; empty: DAYTONA_TARGET, else Daytona's default
  int port = 8000;                    // rex-server's port in the sandbox
  Seconds container_timeout{900.0};   // the sandbox's time to live; rex-server's too
  Seconds runtime_timeout{60.0};      // from the server's start to its first answer
  std::string image = "python:3.11";  // the sandbox's image; it needs a POSIX shell
  // rex's own:
  std::string api_url{};          // empty: DAYTONA_API_URL, else https://app.daytona.io/api
  std::string organization_id{};  // X-Daytona-Organization-ID (for a JWT instead of a key)
  std::string snapshot{};         // a Daytona snapshot to start from instead of image
  bool public_preview = false;    // "public": the port's preview needs no token
  std::map<std::string, std::string> env{};     // the sandbox's environment variables
  std::map<std::string, std::string> labels{};  // besides rex's own
  boost::json::object sandbox_args{};  // merged into the create request (cpu, memory, disk, ...)
  std::string server_path{};           // the static rex-server to upload; empty: found as usual
  Seconds startup_timeout{300.0};      // the create, the image's build and the sandbox's start
};
BOOST_DESCRIBE_STRUCT(DaytonaDeploymentConfig, (),
                      (api_key, target, port, container_timeout, runtime_timeout, image, api_url,
                       organization_id, snapshot, public_preview, env, labels, sandbox_args,
                       server_path, startup_timeout))

}  // namespace rex
