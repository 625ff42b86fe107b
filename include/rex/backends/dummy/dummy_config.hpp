// DummyDeploymentConfig: scripted answers, nothing runs (dummy_deployment.hpp).
#pragma once

#include <rex/deployment/settings.hpp>
#include <rex/protocol/actions.hpp>

#include <boost/describe/class.hpp>

#include <string_view>
#include <vector>

namespace rex {

/// Scripted observations for testing agents without running anything (see DummyRuntime).
struct DummyDeploymentConfig {
  static constexpr std::string_view backend = "dummy";

  std::vector<BashObservation> run_in_session_outputs{};
};
BOOST_DESCRIBE_STRUCT(DummyDeploymentConfig, (), ())

}  // namespace rex
