// find_rex_server(): the rex-server a backend puts into its sandboxes.
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/version.hpp>

#include "deployment/server_binary.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace rex {

namespace fs = std::filesystem;

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

namespace detail {

std::vector<ServerCandidate> rex_server_candidates(const char* env, const std::string& self_exe,
                                                   const std::string& build_path) {
  std::vector<ServerCandidate> out;
  if (env && *env)
    out.push_back({env, "REX_SERVER_PATH"});
  if (!self_exe.empty()) {
    out.push_back({(std::filesystem::path(self_exe).parent_path() / "rex-server").string(),
                   "beside this program"});
  }
  if (!build_path.empty())
    out.push_back({build_path, "build directory"});
  return out;
}

std::string no_rex_server_message(const std::vector<ServerCandidate>& tried) {
  std::string list;
  for (const auto& t : tried)
    list += fmt::format("\n  {} ({})", t.path, t.source);
  return "cannot find the rex-server executable to put into the container; tried:" + list +
         "\nset server_path in the deployment config or REX_SERVER_PATH";
}

}  // namespace detail

std::string find_rex_server(const std::string& configured) {
  if (!configured.empty()) {
    if (is_executable_file(configured))
      return configured;
    throw DeploymentStartupError(
        fmt::format("server_path '{}' is not an executable file; build rex-server or fix the path",
                    configured));
  }
  // A path given in the environment is as binding as one in the config: another server found
  // in its place would run in the sandbox without anyone knowing.
  const char* env_path = std::getenv("REX_SERVER_PATH");
  if (env_path != nullptr && *env_path != '\0' && !is_executable_file(env_path))
    throw DeploymentStartupError(fmt::format(
        "REX_SERVER_PATH '{}' is not an executable file; build rex-server or fix the path",
        env_path));
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const auto candidates = detail::rex_server_candidates(
      env_path, ec ? std::string() : self.string(), REX_SERVER_BUILD_PATH);
  for (const auto& candidate : candidates) {
    if (is_executable_file(candidate.path))
      return candidate.path;
  }
  throw DeploymentStartupError(detail::no_rex_server_message(candidates));
}

std::string default_server_image() {
  return fmt::format("rex.local/rex-server:{}", version());
}

}  // namespace rex
