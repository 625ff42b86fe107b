// The places find_rex_server() looks at, and its message when none holds rex-server (pure, for
// the tests). Internal to the library.
#pragma once

#include <string>
#include <vector>

namespace rex::detail {

/// A place find_rex_server() may find rex-server at, and where that place comes from.
struct ServerCandidate {
  std::string path;
  std::string source;  // "REX_SERVER_PATH", "beside this program", "build directory"
};

/// The places to look for rex-server when server_path is not set, in order: $REX_SERVER_PATH,
/// rex-server beside this executable (`self_exe`, empty when unknown), the build directory's.
/// Empty places are left out.
std::vector<ServerCandidate> rex_server_candidates(const char* env, const std::string& self_exe,
                                                   const std::string& build_path);

/// The error for no rex-server at any of `tried`, listing them.
std::string no_rex_server_message(const std::vector<ServerCandidate>& tried);

}  // namespace rex::detail
