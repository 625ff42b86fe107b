// Sizes as Docker writes them, for the memory settings of every backend and the gateway's
// environments. Threading: pure functions; call them from anywhere.
#pragma once

#include <rex/deployment/settings.hpp>

#include <cstdint>
#include <string_view>

namespace rex {

/// Parses a docker size ("512m", "2g", "1.5GB", "1048576"; binary units) into bytes.
/// DeploymentConfigError naming `what` for anything else.
std::int64_t parse_size(std::string_view text, std::string_view what);

}  // namespace rex
