// The process's environment behind a function, so that code which reads variables (credentials,
// settings files) can be given a map instead in tests.
#pragma once

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

namespace rex {

/// Reads an environment variable: std::getenv by default, a map in tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

/// The process's own environment.
inline EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name.c_str()))
      return std::string(v);
    return std::nullopt;
  };
}

}  // namespace rex
