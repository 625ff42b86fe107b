#include <rex/core/random.hpp>
#include <rex/core/text.hpp>

#include <sys/random.h>

#include <cerrno>
#include <random>
#include <system_error>
#include <vector>

namespace rex {

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw std::system_error(errno, std::generic_category(), "getrandom");
    got += static_cast<std::size_t>(n);
  }
  return hex_of(raw.data(), bytes);
}

namespace {

// A generator of this thread, seeded once from the secure source.
std::mt19937_64& thread_generator() {
  thread_local std::mt19937_64 generator = [] {
    const std::string seed = random_hex(8);
    return std::mt19937_64(std::stoull(seed, nullptr, 16));
  }();
  return generator;
}

}  // namespace

double random_unit() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(thread_generator());
}

std::string unique_hex(std::size_t bytes) {
  std::mt19937_64& generator = thread_generator();
  std::vector<unsigned char> raw(bytes);
  for (std::size_t i = 0; i < bytes; i += 8) {
    const std::uint64_t word = generator();
    for (std::size_t j = 0; j < 8 && i + j < bytes; ++j)
      raw[i + j] = static_cast<unsigned char>(word >> (8 * j));
  }
  return hex_of(raw.data(), bytes);
}

}  // namespace rex
