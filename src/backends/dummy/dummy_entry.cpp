// The dummy backend's entry in the backend table.
#include <rex/backends/dummy/dummy_config.hpp>
#include <rex/backends/dummy/dummy_deployment.hpp>
#include <rex/deployment/registry.hpp>
#include <rex/protocol/json.hpp>

#include <boost/json/array.hpp>

namespace rex::modules {

namespace {

namespace json = boost::json;

void check(DummyDeploymentConfig& c, settings::Reader& r) {
  if (const json::value* v = r.raw("run_in_session_outputs")) {
    // SWE-ReX's DummyRuntime takes one observation or a list of them.
    try {
      if (v->is_array()) {
        for (const auto& item : v->as_array())
          c.run_in_session_outputs.push_back(from_json<BashObservation>(item));
      } else {
        c.run_in_session_outputs.push_back(from_json<BashObservation>(*v));
      }
    } catch (const ProtocolError& e) {
      r.fail("run_in_session_outputs", e.what());
    }
  }
}

json::object encode(const DeploymentConfig& config) {
  json::array outputs;
  for (const auto& obs : config.get<DummyDeploymentConfig>().run_in_session_outputs)
    outputs.push_back(rex::to_json(obs));
  return json::object{{"type", "dummy"}, {"run_in_session_outputs", std::move(outputs)}};
}

}  // namespace

Backend dummy_entry() {
  Backend b = make_backend<DummyDeploymentConfig, DummyDeployment, check>(
      "scripted answers, nothing runs", {});
  b.encode = encode;
  return b;
}

}  // namespace rex::modules
