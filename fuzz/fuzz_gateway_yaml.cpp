// The gateway's files: environment files, the --config file, the registry's YAML data and
// --api-key flags. The first byte picks the parser, the rest is the text.
//
// Properties: parsing either succeeds or throws GatewayConfigError naming the source (nothing
// else, no crash, no hang on aliases or nesting); what parses is what the checks accept (an
// environment's name and numbers, a config that validate() passes); data converts to JSON that
// serializes and parses back; an accepted --api-key is found again by tenant_of_key.
#include <rex/gateway/gateway_config.hpp>
#include <rex/gateway/registry.hpp>

#include <boost/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

namespace json = boost::json;
using rex::fuzz::check;
using namespace rex::gateway;

constexpr std::string_view kSource = "<fuzz>";

bool non_negative(double value) {
  return std::isfinite(value) && value >= 0;
}

void environment(std::string_view text) {
  const Environment env = parse_environment(text, kSource, "fuzz");
  check(!env.name.empty() && env.name.size() <= 63, "an environment's name has 1 to 63 bytes");
  check(non_negative(env.idle_timeout) && non_negative(env.max_lifetime),
        "an environment's lifetimes are finite and not negative");
  check(!env.cpus || (non_negative(*env.cpus) && *env.cpus > 0), "cpus are above 0");
  const std::string wire = json::serialize(env.to_json());
  check(json::parse(wire).as_object().at("name").as_string() == env.name,
        "an environment's JSON parses back");
}

void gateway_config(std::string_view text) {
  const GatewayConfig config = parse_gateway_config(text, kSource);
  try {
    validate(config);
  } catch (const GatewayConfigError&) {
    check(false, "a parsed config passes validate()");
  }
  for (const TenantConfig& tenant : config.tenants) {
    for (const std::string& key : tenant.keys)
      check(tenant_of_key(config, key) == &tenant, "each key finds its own tenant");
  }
}

void data(std::string_view text) {
  const json::value value = parse_data_file(text, kSource, ".yaml");
  const std::string wire = json::serialize(value);
  boost::system::error_code ec;
  json::parse(wire, ec);
  check(!ec, "converted data serializes to JSON that parses");
}

void api_key(std::string_view flag) {
  rex::gateway::GatewayConfig config;
  add_api_key(config, "other=fixed-key");
  add_api_key(config, flag);
  const auto eq = flag.find('=');
  const std::string_view key = eq == std::string_view::npos ? flag : flag.substr(eq + 1);
  check(tenant_of_key(config, key) != nullptr, "an added key belongs to a tenant");
  try {
    validate(config);
  } catch (const GatewayConfigError&) {
    check(false, "keys added by flags pass validate()");
  }
}

using Parser = void (*)(std::string_view);
constexpr Parser kParsers[] = {environment, gateway_config, data, api_key};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  constexpr std::size_t kCount = sizeof kParsers / sizeof kParsers[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t which = data[0] % kCount;
  try {
    kParsers[which](text);
  } catch (const GatewayConfigError& e) {
    // Parsers name their source; a refused flag names the flag.
    const std::string_view message = e.what();
    check(message.starts_with(which == 3 ? "--api-key: " : kSource),
          "a refusal names where it comes from");
  }
  return 0;
}
