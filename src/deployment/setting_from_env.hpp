// How the cloud deployments read a setting their providers' SDKs also take from the environment
// (API keys, URLs). Internal to the library.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>

namespace rex::detail {

/// `configured` when it is given, else the environment's `variable`, else `fallback`; a variable
/// set to nothing counts as not set.
inline std::string from_env(const std::string& configured, const char* variable,
                            std::string fallback = {}) {
  if (!configured.empty())
    return configured;
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0' ? std::string(v) : std::move(fallback);
}

}  // namespace rex::detail
