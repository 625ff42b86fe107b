// What the fuzz targets share: a failed property aborts with a message (libFuzzer then saves
// the input as a crash), and a private temporary directory for the targets that touch files.
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace rex::fuzz {

/// Aborts, naming the property that does not hold, when `ok` is false.
inline void check(bool ok, std::string_view what) {
  if (ok)
    return;
  std::fprintf(stderr, "fuzz property violated: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::abort();
}

/// A directory of its own under the system's temporary directory, made once per process and
/// removed with everything in it at exit.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      std::string pattern = (std::filesystem::temp_directory_path() / "rex-fuzz-XXXXXX").string();
      check(::mkdtemp(pattern.data()) != nullptr, "mkdtemp for the scratch directory");
      path = std::filesystem::canonical(pattern);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

}  // namespace rex::fuzz
