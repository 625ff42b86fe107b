#include "core/crash_point.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <signal.h>
#include <unistd.h>

namespace rex::detail {

namespace {

struct Armed {
  std::string name;  // empty: no point is armed
  long remaining = 0;
};

Armed read_armed() {
  Armed a;
  const char* spec = std::getenv("REX_CRASH_AT");
  if (spec == nullptr || *spec == '\0')
    return a;
  std::string text(spec);
  a.remaining = 1;
  if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    char* end = nullptr;
    const long n = std::strtol(text.c_str() + colon + 1, &end, 10);
    if (end != nullptr && *end == '\0' && n > 0) {
      a.remaining = n;
      text.resize(colon);
    }
  }
  a.name = std::move(text);
  return a;
}

const Armed& armed() {
  static const Armed a = read_armed();
  return a;
}

std::atomic<long> passes{0};

}  // namespace

void crash_point(std::string_view name) {
  const Armed& a = armed();
  if (a.name.empty() || name != a.name)
    return;
  if (passes.fetch_add(1, std::memory_order_relaxed) + 1 != a.remaining)
    return;
  const std::string line = "crash point " + std::string(name) + " reached: SIGKILL\n";
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, line.data(), line.size());
  ::kill(::getpid(), SIGKILL);
}

}  // namespace rex::detail
