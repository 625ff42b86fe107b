// Random names and secrets: tokens, ids, names made fresh beside others.
// Threading: any thread.
#pragma once

#include <cstddef>
#include <string>

namespace rex {

/// `bytes` random bytes from the system's secure source, as 2 * bytes lowercase hex digits.
std::string random_hex(std::size_t bytes);

}  // namespace rex
