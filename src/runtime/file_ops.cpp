#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/file_ops.hpp>
#include <rex/session/output.hpp>

#include "detail/unique_fd.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
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
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace rex {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// ---------------------------------------------------------------------------------------------
// UTF-8 scanning with Python's error ranges ("maximal subparts").

struct Utf8Step {
  std::size_t length;  // bytes of the valid sequence, or of the invalid subpart
  const char* error;   // null when valid, else Python's reason
};

Utf8Step utf8_step(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80)
    return {1, nullptr};
  std::size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0)
      lo = 0xA0;  // no overlong forms
    if (b0 == 0xED)
      hi = 0x9F;  // no UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0)
      lo = 0x90;
    if (b0 == 0xF4)
      hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, "invalid start byte"};
  }
  for (std::size_t k = 1; k < need; ++k) {
    if (i + k >= s.size())
      return {k, "unexpected end of data"};
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
      return {k, "invalid continuation byte"};
    }
  }
  return {need, nullptr};
}

char32_t utf8_code_point(std::string_view s, std::size_t i, std::size_t n) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void append_hex_escape(std::string& out, char kind, char32_t cp, int digits) {
  out += '\\';
  out += kind;
  for (int d = digits - 1; d >= 0; --d)
    out += kHex[(cp >> (4 * d)) & 0xF];
}

// ---------------------------------------------------------------------------------------------
// Codecs and error handlers.

enum class Codec { kUtf8, kLatin1, kAscii };
enum class ErrorMode { kStrict, kReplace, kIgnore, kBackslashReplace };

// Python's codec-name normalisation: lower case, every run of characters other than letters,
// digits and '.' becomes one '_' (encodings.normalize_encoding).
std::string normalize_codec_name(std::string_view name) {
  std::string out;
  bool punct = false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '.') {
      if (punct && !out.empty())
        out += '_';
      out += static_cast<char>(std::tolower(u));
      punct = false;
    } else {
      punct = true;
    }
  }
  return out;
}

Codec find_codec(std::string_view name) {
  static const std::pair<Codec, std::vector<std::string_view>> kAliases[] = {
      {Codec::kUtf8, {"utf_8", "utf8", "u8", "utf", "utf8_ucs2", "utf8_ucs4", "cp65001"}},
      {Codec::kLatin1,
       {"latin_1", "latin1", "latin", "l1", "iso_8859_1", "iso8859_1", "iso8859", "8859", "cp819",
        "ibm819", "csisolatin1", "iso_ir_100", "iso_8859_1_1987"}},
      {Codec::kAscii,
       {"ascii", "us_ascii", "us", "646", "cp367", "ibm367", "csascii", "iso646_us", "iso_ir_6",
        "ansi_x3.4_1968", "ansi_x3_4_1968", "ansi_x3.4_1986", "iso_646.irv_1991"}},
  };
  const std::string normalized = normalize_codec_name(name);
  for (const auto& [codec, aliases] : kAliases) {
    if (std::find(aliases.begin(), aliases.end(), normalized) != aliases.end())
      return codec;
  }
  throw ValueError(fmt::format("unknown encoding: {}", name),
                   {{"encoding", utf8_backslashreplace(name)}});
}

ErrorMode find_error_mode(std::string_view name) {
  if (name == "strict")
    return ErrorMode::kStrict;
  if (name == "replace")
    return ErrorMode::kReplace;
  if (name == "ignore")
    return ErrorMode::kIgnore;
  if (name == "backslashreplace")
    return ErrorMode::kBackslashReplace;
  if (name == "surrogateescape" || name == "surrogatepass" || name == "xmlcharrefreplace" ||
      name == "namereplace") {
    throw ValueError(
        fmt::format("error handler {} cannot produce text for the protocol", python_repr(name)),
        {{"errors", std::string(name)}});
  }
  throw ValueError(fmt::format("unknown error handler name {}", python_repr(name)),
                   {{"errors", utf8_backslashreplace(name)}});
}

// Handles the undecodable bytes s[start, end) under `mode`.
void on_decode_error(std::string& out, std::string_view s, std::size_t start, std::size_t end,
                     ErrorMode mode, std::string_view codec, const char* reason) {
  switch (mode) {
    case ErrorMode::kStrict: {
      const std::string where = end == start + 1
                                    ? fmt::format("byte 0x{:02x} in position {}",
                                                  static_cast<unsigned char>(s[start]), start)
                                    : fmt::format("bytes in position {}-{}", start, end - 1);
      throw ValueError(fmt::format("'{}' codec can't decode {}: {}", codec, where, reason),
                       {{"encoding", codec}, {"start", start}, {"end", end}, {"reason", reason}});
    }
    case ErrorMode::kReplace:
      out += "\xEF\xBF\xBD";  // one U+FFFD per error range, as Python
      return;
    case ErrorMode::kIgnore:
      return;
    case ErrorMode::kBackslashReplace:
      for (std::size_t k = start; k < end; ++k) {
        append_hex_escape(out, 'x', static_cast<unsigned char>(s[k]), 2);
      }
      return;
  }
}

// Approximates Python's str.isprintable() for non-ASCII code points: separators (other than
// ' '), controls, format characters, private use and non-characters are not printable.
bool is_printable(char32_t cp) {
  if (cp < 0xA0)
    return cp >= 0x20 && cp < 0x7F;
  if (cp == 0xA0 || cp == 0xAD || cp == 0x1680 || cp == 0x180E)
    return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F))
    return false;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF)
    return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || (cp >= 0xFFF9 && cp <= 0xFFFB))
    return false;
  if ((cp & 0xFFFE) == 0xFFFE || cp >= 0xF0000)
    return false;
  if (cp >= 0xE0000 && cp <= 0xE0FFF)
    return false;  // tags and variation selectors
  return true;
}

// ---------------------------------------------------------------------------------------------
// Paths and small POSIX helpers.

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

using detail::UniqueFd;

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

std::string random_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:012x}", rng() & 0xFFFFFFFFFFFFull);
}

struct TempFile {
  std::string name;
  UniqueFd fd;
  int error = 0;  // errno when it could not be created
};

// Creates a fresh file (mode 0666 less the umask) beside `path`.
TempFile create_temp_beside(const std::string& path) {
  const auto [dir, base] = split_path(path);
  for (int attempt = 0;; ++attempt) {
    std::string name = join_path(dir, "." + base + ".rex-" + random_suffix());
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0)
      return {std::move(name), UniqueFd(fd)};
    if (errno != EEXIST || attempt == 100)
      return {{}, UniqueFd(), errno};
  }
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

using FillFile = std::function<void(int fd)>;

struct ReplaceOptions {
  std::optional<mode_t> mode{};  // else an existing file's mode and owner, or 0666 & ~umask
  bool through_symlink = true;   // write to a symlink's target (open()) or replace the link
};

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

  auto [temp, fd, create_error] = create_temp_beside(path);
  if (fd.get() < 0) {
    // A read-only directory can still hold a writable file: rewrite that one in place.
    if (existing_file &&
        (create_error == EACCES || create_error == EPERM || create_error == EROFS)) {
      rewrite_in_place(path, fill, opts);
      return;
    }
    throw_os_error(create_error, path);
  }
  struct TempGuard {
    const std::string* name;
    ~TempGuard() {
      if (name != nullptr)
        ::unlink(name->c_str());
    }
  } guard{&temp};
  fill(fd.get());
  if (existing_file && (st.st_uid != ::geteuid() || st.st_gid != ::getegid())) {
    if (::fchown(fd.get(), st.st_uid, st.st_gid) != 0) {
      // Not permitted: the file becomes ours; its content is what matters.
    }
  }
  const std::optional<mode_t> mode =
      opts.mode ? opts.mode
                : (existing_file ? std::optional<mode_t>(st.st_mode & 07777) : std::nullopt);
  if (mode && ::fchmod(fd.get(), *mode) != 0)
    throw_os_error(errno, path);
  if (const int err = fd.close())
    throw_os_error(err, path);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    // A bind-mounted file (Docker's /etc/hosts) cannot be renamed over: copy the finished
    // temporary file into it.
    if (existing_file && (err == EBUSY || err == EXDEV)) {
      copy_in_place(temp, path, opts);
      return;
    }
    throw_os_error(err, path);
  }
  guard.name = nullptr;  // renamed: the temporary name no longer exists
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

// ---------------------------------------------------------------------------------------------
// Zip extraction with libarchive.

struct ArchiveReader {
  archive* a = nullptr;
  ArchiveReader() : a(archive_read_new()) {
    if (a == nullptr)
      throw std::bad_alloc();
  }
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;
  ~ArchiveReader() { archive_read_free(a); }
};

[[noreturn]] void throw_archive_error(archive* a, const std::string& path) {
  const int err = archive_errno(a);
  const char* text = archive_error_string(a);
  const std::string detail = text != nullptr ? text : "unreadable archive";
  // libarchive reports format problems as EILSEQ, EINVAL or -1; other codes are the system's.
  if (err <= 0 || err == EILSEQ || err == EINVAL) {
    throw ValueError(fmt::format("{} is not a valid zip archive: {}", python_repr(path), detail),
                     {{"path", utf8_backslashreplace(path)}});
  }
  throw_os_error(err, path);
}

void open_zip(ArchiveReader& reader, const std::string& path) {
  archive_read_support_format_zip(reader.a);
  if (archive_read_open_filename(reader.a, path.c_str(), 1 << 16) != ARCHIVE_OK) {
    throw_archive_error(reader.a, path);
  }
}

// Advances to the next entry; false at the end.
bool next_entry(ArchiveReader& reader, archive_entry*& entry, const std::string& path) {
  const int rc = archive_read_next_header(reader.a, &entry);
  if (rc == ARCHIVE_EOF)
    return false;
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
    throw_archive_error(reader.a, path);
  return true;
}

std::string entry_name(archive_entry* entry) {
  const char* name = archive_entry_pathname_utf8(entry);
  if (name == nullptr)
    name = archive_entry_pathname(entry);
  return name != nullptr ? name : "";
}

std::string entry_symlink(archive_entry* entry) {
  const char* target = archive_entry_symlink_utf8(entry);
  if (target == nullptr)
    target = archive_entry_symlink(entry);
  return target != nullptr ? target : "";
}

[[noreturn]] void refuse_entry(const std::string& name, const std::string& target,
                               std::string_view why) {
  throw ValueError(fmt::format("refusing to extract zip entry {} into {}: {}", python_repr(name),
                               python_repr(target), why),
                   {{"entry", utf8_backslashreplace(name)}});
}

// The components of a path inside the archive ('.' and empty ones dropped).
std::vector<std::string> split_components(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos)
      j = path.size();
    const std::string_view part = path.substr(i, j - i);
    if (!part.empty() && part != ".")
      parts.emplace_back(part);
    i = j + 1;
  }
  return parts;
}

struct ZipEntry {
  std::string name;
  std::vector<std::string> parts;  // where it lands, relative to the target directory
  mode_t type = 0;                 // AE_IFREG, AE_IFDIR, AE_IFLNK
};

std::string join_components(const std::vector<std::string>& parts, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0)
      out += '/';
    out += parts[i];
  }
  return out;
}

// Checks one entry without touching the disk. A symlink may only go up with leading "..",
// no further than its own directory's depth, then down by names: since no entry is written
// through a symlink, such a link resolves inside the target whatever it points at.
ZipEntry check_entry(archive_entry* entry, const std::string& target) {
  ZipEntry out{.name = entry_name(entry), .parts = {}, .type = archive_entry_filetype(entry)};
  const std::string& name = out.name;
  if (name.empty())
    refuse_entry(name, target, "the entry has no name");
  if (name.front() == '/')
    refuse_entry(name, target, "absolute paths are not allowed");
  out.parts = split_components(name);
  if (std::find(out.parts.begin(), out.parts.end(), "..") != out.parts.end()) {
    refuse_entry(name, target, "'..' would leave the target directory");
  }
  if (archive_entry_hardlink(entry) != nullptr) {
    refuse_entry(name, target, "hard links are not supported");
  }
  if (out.type == AE_IFLNK) {
    const std::string link = entry_symlink(entry);
    if (link.empty() || link.front() == '/') {
      refuse_entry(name, target, fmt::format("the symlink points outside ({})", python_repr(link)));
    }
    std::size_t ups = 0;
    bool descended = false;
    for (const auto& part : split_components(link)) {
      if (part != "..") {
        descended = true;
      } else if (descended || ++ups >= out.parts.size()) {
        refuse_entry(name, target,
                     fmt::format("the symlink points outside ({})", python_repr(link)));
      }
    }
  }
  if (out.parts.empty() && out.type != AE_IFDIR) {
    refuse_entry(name, target, "the entry would replace the target directory");
  }
  return out;
}

// Makes the directories parts[0, count) under `root`, refusing to go through a symlink.
std::string make_entry_dirs(const std::string& root, const ZipEntry& entry, std::size_t count,
                            const std::string& target) {
  std::string path = root;
  for (std::size_t i = 0; i < count; ++i) {
    path = join_path(path, entry.parts[i]);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode))
        continue;
      if (S_ISLNK(st.st_mode)) {
        refuse_entry(
            entry.name, target,
            fmt::format("{} is a symlink", python_repr(join_components(entry.parts, i + 1))));
      }
      throw_os_error(ENOTDIR, path);
    }
    if (errno != ENOENT)
      throw_os_error(errno, path);
    if (::mkdir(path.c_str(), 0777) != 0 && !(errno == EEXIST && is_directory(path))) {
      throw_os_error(errno, path);
    }
  }
  return path;
}

void extract_file_data(ArchiveReader& reader, int fd, const std::string& archive_path,
                       const std::string& path) {
  while (true) {
    const void* block = nullptr;
    std::size_t size = 0;
    la_int64_t offset = 0;
    const int rc = archive_read_data_block(reader.a, &block, &size, &offset);
    if (rc == ARCHIVE_EOF)
      return;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
      throw_archive_error(reader.a, archive_path);
    if (::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0)
      throw_os_error(errno, path);
    write_all(fd, std::string_view(static_cast<const char*>(block), size), path);
  }
}

void extract_zip(const std::string& source, const std::string& target) {
  // Pass 1: every entry is checked before anything is written.
  std::vector<ZipEntry> entries;
  {
    ArchiveReader reader;
    open_zip(reader, source);
    archive_entry* entry = nullptr;
    while (next_entry(reader, entry, source))
      entries.push_back(check_entry(entry, target));
  }
  std::set<std::string> symlinks;
  for (const auto& e : entries) {
    if (e.type == AE_IFLNK)
      symlinks.insert(join_components(e.parts, e.parts.size()));
  }
  for (const auto& e : entries) {
    for (std::size_t n = 1; n < e.parts.size(); ++n) {
      const std::string prefix = join_components(e.parts, n);
      if (symlinks.count(prefix) != 0) {
        refuse_entry(
            e.name, target,
            fmt::format("it would be written through the symlink {}", python_repr(prefix)));
      }
    }
  }

  // Pass 2: extraction, in archive order.
  make_dirs(target);
  std::vector<std::pair<std::string, mode_t>> directory_modes;
  ArchiveReader reader;
  open_zip(reader, source);
  archive_entry* entry = nullptr;
  for (const auto& e : entries) {
    if (!next_entry(reader, entry, source))
      break;
    const mode_t perm = archive_entry_perm(entry) & 0777;
    if (e.type == AE_IFDIR) {
      const std::string path = make_entry_dirs(target, e, e.parts.size(), target);
      if (!e.parts.empty() && perm != 0)
        directory_modes.emplace_back(path, perm);
      continue;
    }
    if (e.type != AE_IFREG && e.type != AE_IFLNK)
      continue;  // zip has no other kinds
    const std::string dir = make_entry_dirs(target, e, e.parts.size() - 1, target);
    const std::string path = join_path(dir, e.parts.back());
    if (e.type == AE_IFLNK) {
      replace_with_symlink(path, entry_symlink(entry));
      continue;
    }
    replace_file(path, [&](int fd) { extract_file_data(reader, fd, source, path); },
                 {.mode = perm != 0 ? perm : mode_t{0644}, .through_symlink = false});
  }
  // Directory modes last, deepest first, so a read-only directory is filled before.
  for (auto it = directory_modes.rbegin(); it != directory_modes.rend(); ++it) {
    if (::chmod(it->first.c_str(), it->second) != 0)
      throw_os_error(errno, it->first);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string decode_text(std::string_view bytes, std::string_view encoding,
                        std::string_view errors) {
  const Codec codec = find_codec(encoding);
  const ErrorMode mode = find_error_mode(errors);
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    switch (codec) {
      case Codec::kLatin1:
        append_utf8(out, b);
        ++i;
        break;
      case Codec::kAscii:
        on_decode_error(out, bytes, i, i + 1, mode, "ascii", "ordinal not in range(128)");
        ++i;
        break;
      case Codec::kUtf8: {
        const Utf8Step step = utf8_step(bytes, i);
        if (step.error == nullptr) {
          out.append(bytes.data() + i, step.length);
        } else {
          on_decode_error(out, bytes, i, i + step.length, mode, "utf-8", step.error);
        }
        i += step.length;
        break;
      }
    }
  }
  return out;
}

std::string translate_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      out += text[i];
      continue;
    }
    out += '\n';
    if (i + 1 < text.size() && text[i + 1] == '\n')
      ++i;
  }
  return out;
}

std::string python_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(text.size() + 2);
  out += quote;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b == static_cast<unsigned char>(quote) || b == '\\') {
        out += '\\';
        out += static_cast<char>(b);
      } else if (b == '\t') {
        out += "\\t";
      } else if (b == '\n') {
        out += "\\n";
      } else if (b == '\r') {
        out += "\\r";
      } else if (b < 0x20 || b == 0x7F) {
        append_hex_escape(out, 'x', b, 2);
      } else {
        out += static_cast<char>(b);
      }
      ++i;
      continue;
    }
    const Utf8Step step = utf8_step(text, i);
    if (step.error != nullptr) {
      append_hex_escape(out, 'u', 0xDC00 + b, 4);  // surrogateescape, as for file names
      ++i;
      continue;
    }
    const char32_t cp = utf8_code_point(text, i, step.length);
    if (is_printable(cp)) {
      out.append(text.data() + i, step.length);
    } else if (cp <= 0xFF) {
      append_hex_escape(out, 'x', cp, 2);
    } else if (cp <= 0xFFFF) {
      append_hex_escape(out, 'u', cp, 4);
    } else {
      append_hex_escape(out, 'U', cp, 8);
    }
    i += step.length;
  }
  out += quote;
  return out;
}

std::string python_float_repr(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_not_of("-0123456789") == std::string::npos)
    text += ".0";
  return text;
}

namespace {

[[noreturn]] void throw_os_error_impl(int err, std::optional<std::string_view> filename) {
  const char* description = ::strerrordesc_np(err);
  const std::string strerror =
      description != nullptr ? description : fmt::format("Unknown error {}", err);
  std::string message = fmt::format("[Errno {}] {}", err, strerror);
  boost::json::object info{{"errno", err}, {"strerror", strerror}};
  if (filename) {
    message += ": " + python_repr(*filename);
    info["filename"] = utf8_backslashreplace(*filename);
  }
  switch (err) {
    case ENOENT:
      throw FileNotFoundError(message, std::move(info));
    case EISDIR:
      throw IsADirectoryError(message, std::move(info));
    case ENOTDIR:
      throw NotADirectoryError(message, std::move(info));
    case EACCES:
    case EPERM:
      throw PermissionError(message, std::move(info));
    default:
      throw OSError(message, std::move(info));
  }
}

}  // namespace

void throw_os_error(int err) {
  throw_os_error_impl(err, std::nullopt);
}

void throw_os_error(int err, std::string_view filename) {
  throw_os_error_impl(err, filename);
}

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
    extract_zip(source, target);
  } else if (S_ISDIR(st.st_mode)) {
    copy_tree(source, target, st);
  } else {
    make_dirs(split_path(target).first);
    copy_file(source, target, st, /*keep_times=*/false);
  }
}

}  // namespace rex
