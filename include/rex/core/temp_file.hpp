// TempFile: a file made fresh under a name nobody else holds (O_EXCL), removed when the
// TempFile goes away unless release() kept it. TempDir: the same for a private directory,
// removed with everything in it. For uploads, downloads and atomic replacement
// (fill the file beside the target, then rename it over the target).
//
// Guarantees: the file did not exist before (never a file or link someone else put there); its
// descriptor is close-on-exec and open for writing until close(); the destructor closes it and
// unlinks the name, whatever happened in between, unless released. Move-only.
//
// Threading: one owner; the calls are blocking file-system calls (offload them from an
// io_context thread when the disk may be slow).
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace rex {

class TempFile {
 public:
  /// An empty TempFile: no file.
  TempFile() noexcept = default;
  /// A new empty file in `dir` named `prefix` plus a random suffix. Throws the protocol's
  /// OSError (throw_os_error) naming `dir` when it cannot be made.
  static TempFile create_in(const std::string& dir, std::string_view prefix);
  /// A new empty file beside `path` (in its directory), hidden and named after it:
  /// ".<name>.<tag>-<random>". On failure `error` holds the errno and the result is empty.
  static TempFile create_beside(const std::string& path, std::string_view tag,
                                std::error_code& error);

  TempFile(TempFile&& other) noexcept;
  TempFile& operator=(TempFile&& other) noexcept;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();

  explicit operator bool() const noexcept { return !path_.empty(); }
  /// The open descriptor; -1 after close().
  int fd() const noexcept { return fd_; }
  const std::string& path() const noexcept { return path_; }

  /// Closes the descriptor (the file stays until destruction). Returns close()'s errno, 0 on
  /// success: a write-back error shows up here.
  int close() noexcept;
  /// Keeps the file: closes the descriptor and forgets the name, which is returned.
  std::string release() noexcept;

 private:
  TempFile(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

/// A new private directory (mode 0700, mkdtemp), removed with its contents when the TempDir goes
/// away unless released. Move-only; the removal is a blocking file-system walk.
class TempDir {
 public:
  TempDir() noexcept = default;
  /// A new directory in `dir` named `prefix` plus six random characters. Throws the protocol's
  /// OSError naming `dir` when it cannot be made.
  static TempDir create_in(const std::string& dir, std::string_view prefix);

  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempDir& operator=(TempDir&& other) noexcept {
    std::swap(path_, other.path_);
    return *this;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { remove(); }

  explicit operator bool() const noexcept { return !path_.empty(); }
  const std::string& path() const noexcept { return path_; }
  /// Keeps the directory: forgets the name, which is returned (the caller removes it).
  std::string release() noexcept { return std::exchange(path_, {}); }
  /// Removes the directory and its contents now; the TempDir is empty afterwards.
  void remove() noexcept;

 private:
  std::string path_;
};

}  // namespace rex
