// Blocking file-system helpers shared by the file operations and the archive code. Internal to
// the library. Paths are plain strings (what POSIX calls take); errors are the protocol's
// exceptions, thrown through throw_os_error with Python's messages.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::detail {

/// Twelve random hex digits, for names made fresh beside others (temporary files and links).
std::string random_suffix();

/// pathlib's normal form: no empty or "." components, no trailing slash; "" becomes ".".
std::string normalize_path(std::string_view path);

/// Splits a normalized path into its directory and its last component.
std::pair<std::string, std::string> split_path(const std::string& path);

std::string join_path(const std::string& dir, std::string_view name);

/// Python's ValueError("embedded null byte") for a path that cannot reach a system call whole.
void reject_nul(std::string_view value);

/// True when `path` is a directory or a symlink to one.
bool is_directory(const std::string& path);

/// Writes all of `data` to `fd`; `name` is the file named in the error.
void write_all(int fd, std::string_view data, const std::string& name);

/// pathlib's mkdir(parents=True, exist_ok=True).
void make_dirs(const std::string& dir);

/// Copies everything readable from `in` to `out`.
void copy_fd(int in, int out, const std::string& source, const std::string& target);

using FillFile = std::function<void(int fd)>;

struct ReplaceOptions {
  std::optional<mode_t> mode{};  // else an existing file's mode and owner, or 0666 & ~umask
  bool through_symlink = true;   // write to a symlink's target (open()) or replace the link
};

/// Writes a file as a whole: a temporary file beside it is filled, then renamed over it, so
/// readers see the old or the new content, never a part. `fill` is called once at most.
void replace_file(const std::string& path, const FillFile& fill, const ReplaceOptions& opts);

/// Puts a symlink at `path`, replacing a file or link there (never a directory).
void replace_with_symlink(const std::string& path, const std::string& target);

std::string read_link(const std::string& path);

/// The names in a directory, without "." and "..", sorted.
std::vector<std::string> list_directory(const std::string& path);

}  // namespace rex::detail
