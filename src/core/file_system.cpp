#include "core/file_system.hpp"

#include <rex/core/random.hpp>
#include <rex/core/temp_file.hpp>
#include <rex/protocol/exceptions.hpp>

#include "core/unique_fd.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace rex::detail {
namespace {

// Fills the file at `path` itself, truncating it: for what cannot be replaced by a rename.
void rewrite_in_place(const std::string& path, const FillFile& fill, const ReplaceOptions& opts) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (fd.get() < 0)
    throw_os_error(errno, path);
  fill(fd.get());
  if (opts.mode && ::fchmod(fd.get(), *opts.mode) != 0)
    throw_os_error(errno, path);
  if (const int err = fd.close())
    throw_os_error(err, path);
}

// Copies the complete file `from` over `path` in place (for when a rename cannot replace it).
void copy_in_place(const std::string& from, const std::string& path, const ReplaceOptions& opts) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0)
    throw_os_error(errno, path);
  rewrite_in_place(
      path, [&](int out) { copy_fd(in.get(), out, path, path); }, opts);
}
}  // namespace

std::string random_suffix() {
  return random_hex(6);
}

// pathlib's normal form: no empty or "." components, no trailing slash; "" becomes ".".
std::string normalize_path(std::string_view path) {
  std::string out = !path.empty() && path.front() == '/' ? "/" : "";
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos)
      j = path.size();
    const std::string_view part = path.substr(i, j - i);
    if (!part.empty() && part != ".") {
      if (!out.empty() && out.back() != '/')
        out += '/';
      out += part;
    }
    i = j + 1;
  }
  return out.empty() ? "." : out;
}

// Splits a normalized path into its directory and its last component.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string join_path(const std::string& dir, std::string_view name) {
  if (dir.empty() || dir.back() == '/')
    return dir + std::string(name);
  return dir + "/" + std::string(name);
}

void reject_nul(std::string_view value) {
  if (value.find('\0') != std::string_view::npos)
    throw ValueError("embedded null byte");
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void write_all(int fd, std::string_view data, const std::string& name) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw_os_error(errno, name);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// pathlib's mkdir(parents=True, exist_ok=True).
void make_dirs(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0777) == 0)
    return;
  int err = errno;
  if (err == ENOENT) {
    const auto parent = split_path(dir).first;
    if (parent == dir)
      throw_os_error(err, dir);
    make_dirs(parent);
    if (::mkdir(dir.c_str(), 0777) == 0)
      return;
    err = errno;
  }
  if (!is_directory(dir))
    throw_os_error(err, dir);
}

void copy_fd(int in, int out, const std::string& source, const std::string& target) {
  std::vector<char> buffer(1 << 18);
  while (true) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw_os_error(errno, source);
    }
    if (n == 0)
      return;
    write_all(out, std::string_view(buffer.data(), static_cast<std::size_t>(n)), target);
  }
}

// Writes a file as a whole: a temporary file beside it is filled, then renamed over it, so
// readers see the old or the new content, never a part. `fill` is called once at most.
void replace_file(const std::string& path, const FillFile& fill, const ReplaceOptions& opts) {
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT)
    throw_os_error(errno, path);
  if (exists && S_ISDIR(st.st_mode))
    throw_os_error(EISDIR, path);
  if (exists && !S_ISREG(st.st_mode) && opts.through_symlink) {
    if (S_ISLNK(st.st_mode)) {
      // Write to what the link names, as open() would; replace that file as a whole.
      if (char* real = ::realpath(path.c_str(), nullptr)) {
        const std::string resolved = real;
        std::free(real);
        if (is_directory(resolved))
          throw_os_error(EISDIR, path);
        replace_file(resolved, fill, opts);
        return;
      }
    }
    // A dangling link, a FIFO, a device: open() it and write.
    rewrite_in_place(path, fill, opts);
    return;
  }
  const bool existing_file = exists && S_ISREG(st.st_mode);

  std::error_code create_error;
  TempFile temp = TempFile::create_beside(path, "rex", create_error);
  if (!temp) {
    // A read-only directory can still hold a writable file: rewrite that one in place.
    const int err = create_error.value();
    if (existing_file && (err == EACCES || err == EPERM || err == EROFS)) {
      rewrite_in_place(path, fill, opts);
      return;
    }
    throw_os_error(err, path);
  }
  const int fd = temp.fd();
  fill(fd);
  if (existing_file && (st.st_uid != ::geteuid() || st.st_gid != ::getegid())) {
    if (::fchown(fd, st.st_uid, st.st_gid) != 0) {
      // Not permitted: the file becomes ours; its content is what matters.
    }
  }
  const std::optional<mode_t> mode =
      opts.mode ? opts.mode
                : (existing_file ? std::optional<mode_t>(st.st_mode & 07777) : std::nullopt);
  if (mode && ::fchmod(fd, *mode) != 0)
    throw_os_error(errno, path);
  if (const int err = temp.close())
    throw_os_error(err, path);
  if (::rename(temp.path().c_str(), path.c_str()) != 0) {
    const int err = errno;
    // A bind-mounted file (Docker's /etc/hosts) cannot be renamed over: copy the finished
    // temporary file into it.
    if (existing_file && (err == EBUSY || err == EXDEV)) {
      copy_in_place(temp.path(), path, opts);
      return;
    }
    throw_os_error(err, path);
  }
  temp.release();  // renamed: the temporary name no longer exists
}

// Puts a symlink at `path`, replacing a file or link there (never a directory).
void replace_with_symlink(const std::string& path, const std::string& target) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw_os_error(EISDIR, path);
  const auto [dir, base] = split_path(path);
  for (int attempt = 0;; ++attempt) {
    const std::string temp = join_path(dir, "." + base + ".rex-" + random_suffix());
    if (::symlink(target.c_str(), temp.c_str()) == 0) {
      if (::rename(temp.c_str(), path.c_str()) == 0)
        return;
      const int err = errno;
      ::unlink(temp.c_str());
      throw_os_error(err, path);
    }
    if (errno != EEXIST || attempt == 100)
      throw_os_error(errno, path);
  }
}

std::string read_link(const std::string& path) {
  std::vector<char> buffer(256);
  while (true) {
    const ssize_t n = ::readlink(path.c_str(), buffer.data(), buffer.size());
    if (n < 0)
      throw_os_error(errno, path);
    if (static_cast<std::size_t>(n) < buffer.size()) {
      return std::string(buffer.data(), static_cast<std::size_t>(n));
    }
    buffer.resize(buffer.size() * 2);
  }
}

std::vector<std::string> list_directory(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr)
    throw_os_error(errno, path);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..")
      names.emplace_back(name);
    errno = 0;
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0)
    throw_os_error(err, path);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace rex::detail
