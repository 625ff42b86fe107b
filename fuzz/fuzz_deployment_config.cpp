// Deployment configs as JSON, through the backend table's settings codec: the first byte picks
// how the object is read (a whole deployment, or a gateway provider's defaults for the backend
// the second byte picks), the rest is the JSON text.
//
// Properties: a config either decodes or is refused with a DeploymentConfigError that says
// something (nothing else, no crash); what decodes names a backend of the table, writes back to
// JSON that decodes to the same JSON again (the codec is its own inverse), describes itself, and
// takes an image exactly when its backend has --image.
#include <rex/backends/backends.hpp>

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

namespace json = boost::json;
using rex::fuzz::check;

void round_trip(const rex::DeploymentConfig& config) {
  check(rex::find_backend(config.type()) != nullptr, "a decoded config names a table backend");
  const json::object written = rex::to_json(config);
  check(written.contains("type"), "a written config has its type");
  rex::DeploymentConfig again;
  try {
    again = rex::deployment_config_from_json(written);
  } catch (const rex::DeploymentConfigError&) {
    check(false, "a written config decodes again");
  }
  check(json::serialize(rex::to_json(again)) == json::serialize(written),
        "a written config decodes to what was written");
  check(!rex::describe_deployment(config).empty(), "a config describes itself");
  const rex::Backend* backend = rex::find_backend(config.type());
  try {
    const rex::DeploymentConfig imaged = rex::with_image(config, "fuzz:latest");
    check(backend->flag("--image") != nullptr, "only a backend with --image takes an image");
    check(imaged.type() == config.type(), "an image keeps the backend");
  } catch (const rex::DeploymentConfigError&) {
    // A backend without images; or an image its other settings refuse (none today).
  }
}

void deployment(std::string_view text) {
  boost::system::error_code ec;
  const json::value value = json::parse(text, ec);
  if (ec)
    return;
  rex::DeploymentConfig config;
  try {
    config = rex::deployment_config_from_json(value);
  } catch (const rex::DeploymentConfigError& e) {
    check(std::string_view(e.what()).size() > 0, "a refusal says why");
    return;
  }
  round_trip(config);
}

void provider(std::string_view text) {
  if (text.empty())
    return;
  const auto all = rex::backends();
  const rex::Backend& backend = all[static_cast<unsigned char>(text[0]) % all.size()];
  boost::system::error_code ec;
  const json::value value = json::parse(text.substr(1), ec);
  if (ec || !value.is_object())
    return;
  try {
    const rex::DeploymentConfig config = rex::provider_settings(backend, value.as_object());
    check(config.type() == backend.name, "provider settings are of their backend");
  } catch (const rex::DeploymentConfigError& e) {
    check(std::string_view(e.what()).size() > 0, "a refusal says why");
  }
}

using Reader = void (*)(std::string_view);
constexpr Reader kReaders[] = {deployment, provider};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  kReaders[data[0] % std::size(kReaders)](text);
  return 0;
}
