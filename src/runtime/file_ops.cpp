#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/file_ops.hpp>
#include <rex/session/output.hpp>

#include "core/file_system.hpp"
#include "core/unique_fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

namespace rex {
namespace {

using detail::copy_fd;
using detail::is_directory;
using detail::join_path;
using detail::list_directory;
using detail::make_dirs;
using detail::normalize_path;
using detail::read_link;
using detail::reject_nul;
using detail::replace_file;
using detail::replace_with_symlink;
using detail::split_path;
using detail::UniqueFd;
using detail::write_all;

std::string read_all(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0)
    throw_os_error(errno, path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw_os_error(errno, path);
  if (S_ISDIR(st.st_mode))
    throw_os_error(EISDIR, path);
  std::string data;
  if (S_ISREG(st.st_mode))
    data.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw_os_error(errno, path);
    }
    if (n == 0)
      break;
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

void copy_file(const std::string& source, const std::string& target, const struct stat& st,
               bool keep_times) {
  UniqueFd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0)
    throw_os_error(errno, source);
  replace_file(target,
               [&](int out) {
                 copy_fd(in.get(), out, source, target);
                 if (keep_times) {
                   const struct timespec times[2] = {st.st_atim, st.st_mtim};
                   if (::futimens(out, times) != 0)
                     throw_os_error(errno, target);
                 }
               },
               {.mode = st.st_mode & 07777});
}

// Gives a copied directory its source's mode and times, once its contents are in place.
void copy_directory_metadata(const std::string& target, const struct stat& st) {
  if (::chmod(target.c_str(), st.st_mode & 07777) != 0)
    throw_os_error(errno, target);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::utimensat(AT_FDCWD, target.c_str(), times, 0) != 0)
    throw_os_error(errno, target);
}

// Copies the entries of directory `source` into the existing directory `target`.
void copy_directory_contents(const std::string& source, const std::string& target) {
  for (const auto& name : list_directory(source)) {
    const std::string from = join_path(source, name);
    const std::string to = join_path(target, name);
    struct stat st {};
    if (::lstat(from.c_str(), &st) != 0)
      throw_os_error(errno, from);
    if (S_ISLNK(st.st_mode)) {
      replace_with_symlink(to, read_link(from));
      // The link keeps its own times, as shutil.copytree(symlinks=True) keeps them.
      const struct timespec times[2] = {st.st_atim, st.st_mtim};
      if (::utimensat(AT_FDCWD, to.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
        throw_os_error(errno, to);
    } else if (S_ISDIR(st.st_mode)) {
      // Owner-only until filled, then the source's mode (which may forbid writing).
      if (::mkdir(to.c_str(), 0700) != 0) {
        const int err = errno;
        if (err != EEXIST || !is_directory(to))
          throw_os_error(err, to);
      }
      copy_directory_contents(from, to);
      copy_directory_metadata(to, st);
    } else if (S_ISREG(st.st_mode)) {
      copy_file(from, to, st, /*keep_times=*/true);
    }
    // Sockets, FIFOs and devices have no content to copy: skipped.
  }
}

void copy_tree(const std::string& source, const std::string& target, const struct stat& st) {
  std::error_code ec1;
  std::error_code ec2;
  const auto from = std::filesystem::weakly_canonical(source, ec1);
  const auto to = std::filesystem::weakly_canonical(target, ec2);
  if (!ec1 && !ec2) {
    const auto relative = to.lexically_relative(from);
    if (!relative.empty() && *relative.begin() != "..") {
      throw ValueError(fmt::format("Cannot copy a directory, {}, into itself, {}",
                                   python_repr(source), python_repr(target)));
    }
  }
  make_dirs(target);
  copy_directory_contents(source, target);
  copy_directory_metadata(target, st);
}

}  // namespace

ReadFileResponse read_file_sync(const ReadFileRequest& request) {
  reject_nul(request.path);
  const std::string path = normalize_path(request.path);
  const std::string bytes = read_all(path);
  const std::string text =
      decode_text(bytes, request.encoding.value_or("utf-8"), request.errors.value_or("strict"));
  return ReadFileResponse{.content = translate_newlines(text)};
}

void write_file_sync(const WriteFileRequest& request) {
  reject_nul(request.path);
  const std::string path = normalize_path(request.path);
  make_dirs(split_path(path).first);
  replace_file(path, [&](int fd) { write_all(fd, request.content, path); }, {});
}

void upload_sync(const UploadRequest& request) {
  reject_nul(request.source_path);
  reject_nul(request.target_path);
  const std::string source = normalize_path(request.source_path);
  const std::string target = normalize_path(request.target_path);
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0)
    throw_os_error(errno, source);
  if (request.unzip) {
    if (S_ISDIR(st.st_mode))
      throw_os_error(EISDIR, source);
    extract_archive(source, target);
  } else if (S_ISDIR(st.st_mode)) {
    copy_tree(source, target, st);
  } else {
    make_dirs(split_path(target).first);
    copy_file(source, target, st, /*keep_times=*/false);
  }
}

}  // namespace rex
