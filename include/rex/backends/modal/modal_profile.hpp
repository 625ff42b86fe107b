// Modal's own settings file, read as Modal's client reads it: `~/.modal.toml` (or the file
// MODAL_CONFIG_PATH names), written by `modal token new` and `modal token set`, one TOML table
// per profile:
//
//   [default]
//   token_id = "ak-..."
//   token_secret = "as-..."
//   active = true
//
// The profile: MODAL_PROFILE, else the one marked `active = true`, else "default". As Modal's
// client does, a file with several profiles and none active (and no MODAL_PROFILE) is refused,
// and so is one with more than one active; MODAL_IS_REMOTE=1 (inside a Modal container) skips
// the file. A setting's value comes from the deployment's config first, then from its
// MODAL_<KEY> environment variable, then from the profile.
//
// Guarantees: what cannot be used is refused here with a DeploymentConfigError naming the file
// and, for a file that does not parse, its line. rex reads the TOML this file holds: tables of
// bare or quoted names, and keys with strings, booleans and numbers (arrays, inline tables,
// multi-line strings, dates and dotted names are refused by name).
#pragma once

#include <rex/backends/modal/modal_config.hpp>
#include <rex/core/environment.hpp>
#include <rex/deployment/config.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace rex {

/// One value of a profile: a string (unescaped), a boolean, or a number (its text).
struct ModalTomlValue {
  enum class Kind { string, boolean, number };
  Kind kind = Kind::string;
  std::string text;   // the string, the number's text, or "true"/"false"
  bool flag = false;  // a boolean's value
};

/// The file: profile -> key -> value.
using ModalToml = std::map<std::string, std::map<std::string, ModalTomlValue>>;

/// Parses the file's text; DeploymentConfigError "FILE, line N: ..." for anything else.
ModalToml parse_modal_toml(std::string_view text, std::string_view file);

/// The chosen profile of the settings file: its name, the file, and its string settings.
struct ModalProfile {
  std::string name;
  std::string file;
  std::map<std::string, std::string> settings;  // token_id, token_secret, server_url, ...
};

/// The profile Modal's client would use, or nothing when there is no settings file (or inside
/// a Modal container). DeploymentConfigError for a file that cannot be read or used.
std::optional<ModalProfile> find_modal_profile(const EnvLookup& env = process_environment());

}  // namespace rex
