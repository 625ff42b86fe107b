#include "kubernetes/small_file.hpp"

#include <rex/kubernetes/kubeconfig.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace rex::kubernetes::detail {

namespace {
constexpr std::size_t kLargestFile = 4 << 20;
}

std::string read_small_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw KubeconfigError(fmt::format("{}: cannot read {}: {}", what, path, std::strerror(errno)));
  std::string out(kLargestFile + 1, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  if (in.bad())
    throw KubeconfigError(fmt::format("{}: cannot read {}", what, path));
  out.resize(static_cast<std::size_t>(in.gcount()));
  if (out.size() > kLargestFile)
    throw KubeconfigError(fmt::format("{}: {} is larger than {} bytes", what, path, kLargestFile));
  return out;
}

std::string without_trailing_space(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  return text;
}

}  // namespace rex::kubernetes::detail
