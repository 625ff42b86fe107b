#include <rex/core/temp_file.hpp>

#include <rex/protocol/exceptions.hpp>

#include "core/file_system.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <filesystem>
#include <random>
#include <utility>

namespace rex {
namespace {

constexpr int kAttempts = 100;  // names found taken before giving up with EEXIST

// Opens a new file named `stem` plus a random suffix, trying other suffixes while the name is
// taken. Returns the descriptor, or -1 with errno set.
int open_exclusive(const std::string& stem, std::string& name) {
  for (int attempt = 0;; ++attempt) {
    name = stem + detail::random_suffix();
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST || attempt == kAttempts)
      return fd;
  }
}

}  // namespace

TempFile TempFile::create_in(const std::string& dir, std::string_view prefix) {
  std::string name;
  const int fd = open_exclusive(detail::join_path(dir, prefix), name);
  if (fd < 0)
    throw_os_error(errno, dir);
  return TempFile(fd, std::move(name));
}

TempFile TempFile::create_beside(const std::string& path, std::string_view tag,
                                 std::error_code& error) {
  const auto [dir, base] = detail::split_path(path);
  std::string name;
  const int fd = open_exclusive(detail::join_path(dir, fmt::format(".{}.{}-", base, tag)), name);
  if (fd < 0) {
    error.assign(errno, std::generic_category());
    return TempFile();
  }
  error.clear();
  return TempFile(fd, std::move(name));
}

TempFile::TempFile(TempFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::exchange(other.path_, {})) {}

TempFile& TempFile::operator=(TempFile&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(path_, other.path_);
  return *this;
}

TempFile::~TempFile() {
  close();
  if (!path_.empty())
    ::unlink(path_.c_str());
}

int TempFile::close() noexcept {
  const int fd = std::exchange(fd_, -1);
  return fd >= 0 && ::close(fd) != 0 ? errno : 0;
}

std::string TempFile::release() noexcept {
  close();
  return std::exchange(path_, {});
}

TempDir TempDir::create_in(const std::string& dir, std::string_view prefix) {
  std::string pattern = detail::join_path(dir, fmt::format("{}XXXXXX", prefix));
  if (::mkdtemp(pattern.data()) == nullptr)
    throw_os_error(errno, dir);
  TempDir made;
  made.path_ = std::move(pattern);
  return made;
}

void TempDir::remove() noexcept {
  if (path_.empty())
    return;
  std::error_code ignored;
  std::filesystem::remove_all(std::exchange(path_, {}), ignored);
}

}  // namespace rex
