// LocalDeploymentConfig: bash sessions on this machine (local_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>

#include <boost/describe/class.hpp>

#include <map>
#include <string>
#include <string_view>

namespace rex {

/// A LocalRuntime in this process: bash sessions on this machine.
struct LocalDeploymentConfig {
  static constexpr std::string_view backend = "local";

  std::string working_dir{};  // sessions start here (created when missing); empty: current dir
  std::map<std::string, std::string> env{};  // added to every session's environment
};
BOOST_DESCRIBE_STRUCT(LocalDeploymentConfig, (), (working_dir, env))

}  // namespace rex
