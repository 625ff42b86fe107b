// Random names and secrets: tokens, ids, names made fresh beside others.
// Threading: any thread.
#pragma once

#include <cstddef>
#include <string>

namespace rex {

/// `bytes` random bytes from the system's secure source, as 2 * bytes lowercase hex digits.
std::string random_hex(std::size_t bytes);

/// `bytes` bytes of a generator seeded once per thread from the secure source, as hex: for
/// names that must not repeat but need not be secret (request ids), without a system call.
std::string unique_hex(std::size_t bytes);

/// A number drawn uniformly from [0, 1) from that generator: a backoff's jitter.
double random_unit();

}  // namespace rex
