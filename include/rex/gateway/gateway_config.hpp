// GatewayConfig: the settings of `rex gateway` (shared/GATEWAY.md): where it listens and keeps
// its state, its registry, its tenants with their API keys and quotas, and the timings of its
// lifecycle. A plain aggregate with defaults; the top-level keys of a --config YAML file and the
// command line's flags map onto its fields one to one.
//
// Reading is strict: an unknown key, a value of the wrong type or out of range is a
// GatewayConfigError naming the file, the line and the field, never a silent default. API keys
// never appear in a message (a message may end up in a log).
//
// Threading: pure functions and plain data; call them from anywhere.
#pragma once

#include <rex/deployment/config.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex::gateway {

/// A gateway configuration, environment file or registry that cannot be used. The message says
/// where and what: `registry/environments/py.yaml:3: idle_timeout: expected a number of
/// seconds, got "soon"` (1-based line; no line when the problem has none).
class GatewayConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A tenant: whoever holds one of its keys, with its own quotas. A quota left unset takes the
/// GatewayConfig's default.
struct TenantConfig {
  std::string name;               // [A-Za-z0-9][A-Za-z0-9._-]{0,62}
  std::vector<std::string> keys;  // API keys: non-empty, no whitespace or control characters
  std::optional<std::size_t> max_sessions;         // concurrent sessions
  std::optional<double> creates_per_minute;        // creates in any 60 seconds
  std::optional<std::uint64_t> max_storage_bytes;  // logs + artifacts
};

struct GatewayConfig {
  std::string listen = "127.0.0.1:8000";  // HOST:PORT ([::1]:PORT), or unix:/path.sock
  std::string storage = "./storage";
  std::string registry;  // a registry directory; "": the built-in environments only
  std::string python_image = "rex-python:3.11";  // the built-in Python3 environment's image
  std::vector<TenantConfig> tenants;
  // Quotas for tenants that leave one unset; 0 means unlimited.
  std::size_t max_sessions = 0;
  double creates_per_minute = 0;
  std::uint64_t max_storage_bytes = 0;
  double idle_timeout = 600;  // seconds; for sessions whose environment and request say none
  // Seconds: the most any session may live (requests and environments are clamped to it).
  double max_lifetime = 86400;
  double orphan_grace = 60;      // seconds before a labelled sandbox with no record is removed
  double sweep_interval = 0.25;  // seconds between the sweeper's passes
  double drift_interval = 10;    // seconds between checks of what the providers run
  std::string docker_engine;     // DOCKER_HOST form; "": the environment's
  std::string podman_engine;     // likewise, for podman
  // The providers besides local, docker and podman, each from a section named after a backend
  // that can hold sandboxes (e2b, daytona, modal, fargate, kubernetes; `rex backends`). A section
  // holds any fields of that backend's settings, as a deployment config does
  // (rex/backends/<name>/<name>_config.hpp): the defaults of every sandbox of the provider, each
  // environment giving the rest (its image). Read by the backend table's codec, so a section
  // refuses what a deployment config refuses. A backend whose own variable is set (E2B_API_KEY,
  // DAYTONA_API_KEY, MODAL_TOKEN_ID) is a provider without a section too.
  std::map<std::string, DeploymentConfig, std::less<>> providers;
};

/// Parses a --config file's YAML text: the top-level keys are GatewayConfig's fields, `tenants`
/// a list of {name, keys, max_sessions, creates_per_minute, max_storage_bytes}, where a quota
/// may be null (unset). Sizes in bytes may also be written as "10g" (binary units). An empty
/// document is the defaults. Everything validate() checks is checked here too, with the line;
/// `source` names the text in messages.
GatewayConfig parse_gateway_config(std::string_view yaml_text, std::string_view source);

/// Reads `file` and parses it; an unreadable file is a GatewayConfigError naming it.
GatewayConfig load_gateway_config(const std::filesystem::path& file);

/// Applies one `--api-key [TENANT=]KEY` flag: adds KEY to TENANT, which is created when new
/// ("default" without TENANT=). The text before the first '=' is the tenant, so a key with a '='
/// in it (base64 padding) is given as TENANT=KEY, such as default=KEY. Adding a key its tenant
/// already has changes nothing. Errors: a key of another tenant, an invalid tenant name, a key
/// that is empty (`--api-key ci=$UNSET`), only '=' characters, or has whitespace.
void add_api_key(GatewayConfig& config, std::string_view flag);

/// Checks the whole configuration, as the gateway is about to use it (after the file and the
/// flags): tenant names valid and unique, every key valid and held by one tenant only, numbers
/// finite and in range (max_lifetime, sweep_interval and drift_interval above 0), storage and
/// python_image set, listen of a form the gateway can bind.
void validate(const GatewayConfig& config);

/// The tenant holding `key`, or null. A plain comparison: making it constant-time is the
/// caller's business.
const TenantConfig* tenant_of_key(const GatewayConfig& config, std::string_view key);

}  // namespace rex::gateway
