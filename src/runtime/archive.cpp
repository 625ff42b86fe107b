#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/file_ops.hpp>
#include <rex/session/output.hpp>

#include "core/file_system.hpp"
#include "core/unique_fd.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace rex {
namespace {

using detail::join_path;
using detail::make_dirs;
using detail::normalize_path;
using detail::reject_nul;
using detail::split_path;
using detail::UniqueFd;

// libarchive reports format problems as EILSEQ (ARCHIVE_ERRNO_FILE_FORMAT), EINVAL or -1;
// other codes are the system's.
bool is_format_error(int err) {
  return err <= 0 || err == EILSEQ || err == EINVAL;
}

std::string archive_message(archive* a, std::string_view fallback) {
  const char* text = archive_error_string(a);
  return text != nullptr ? text : std::string(fallback);
}

// ---------------------------------------------------------------------------------------------
// Reading.

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

[[noreturn]] void throw_read_error(archive* a, const std::string& path) {
  const int err = archive_errno(a);
  if (is_format_error(err)) {
    throw ValueError(fmt::format("{} is not a valid zip, tar or tar.gz archive: {}",
                                 python_repr(path), archive_message(a, "unreadable archive")),
                     {{"path", utf8_backslashreplace(path)}});
  }
  throw_os_error(err, path);
}

void open_for_reading(ArchiveReader& reader, const std::string& path) {
  // Only what the API promises: no external filter programs, no exotic formats.
  archive_read_support_format_zip(reader.a);
  archive_read_support_format_tar(reader.a);
  archive_read_support_filter_gzip(reader.a);
  if (archive_read_open_filename(reader.a, path.c_str(), 1 << 16) != ARCHIVE_OK)
    throw_read_error(reader.a, path);
}

// Advances to the next entry; false at the end.
bool next_entry(ArchiveReader& reader, archive_entry*& entry, const std::string& path) {
  const int rc = archive_read_next_header(reader.a, &entry);
  if (rc == ARCHIVE_EOF)
    return false;
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
    throw_read_error(reader.a, path);
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

std::string entry_hardlink(archive_entry* entry) {
  const char* target = archive_entry_hardlink_utf8(entry);
  if (target == nullptr)
    target = archive_entry_hardlink(entry);
  return target != nullptr ? target : "";
}

[[noreturn]] void refuse_entry(const std::string& name, const std::string& target,
                               std::string_view why) {
  throw ValueError(fmt::format("refusing to extract archive entry {} into {}: {}",
                               python_repr(name), python_repr(target), why),
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

std::string join_components(const std::vector<std::string>& parts, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0)
      out += '/';
    out += parts[i];
  }
  return out;
}

enum class EntryKind { file, directory, symlink, hardlink, skipped };

struct PlannedEntry {
  std::string name;
  std::vector<std::string> parts;  // where it lands, relative to the target directory
  EntryKind kind = EntryKind::skipped;
  std::string link;  // a symlink's target, or the archive path a hard link names

  std::string relative() const { return join_components(parts, parts.size()); }
};

// A path of the archive that names no place outside it: relative, without "..".
std::vector<std::string> checked_components(const std::string& name, const std::string& path,
                                            const std::string& target, std::string_view what) {
  if (!path.empty() && path.front() == '/')
    refuse_entry(name, target, fmt::format("{} is absolute", what));
  std::vector<std::string> parts = split_components(path);
  if (std::find(parts.begin(), parts.end(), "..") != parts.end())
    refuse_entry(name, target, fmt::format("{} contains '..'", what));
  return parts;
}

// Checks one entry on its own, without touching the disk. A symlink may only go up with
// leading "..", no further than its own directory's depth, then down by names: since no entry
// is written through a symlink, such a link resolves inside the target whatever it points at.
PlannedEntry plan_entry(archive_entry* entry, const std::string& target) {
  PlannedEntry out{.name = entry_name(entry), .parts = {}, .kind = EntryKind::skipped, .link = {}};
  const std::string& name = out.name;
  if (name.empty())
    refuse_entry(name, target, "the entry has no name");
  out.parts = checked_components(name, name, target, "its path");
  const mode_t type = archive_entry_filetype(entry);
  if (archive_entry_hardlink(entry) != nullptr) {
    out.kind = EntryKind::hardlink;
    out.link = entry_hardlink(entry);
    const auto link_parts = checked_components(name, out.link, target, "the hard link's target");
    if (link_parts.empty())
      refuse_entry(name, target, "the hard link has no target");
    out.link = join_components(link_parts, link_parts.size());
  } else if (type == AE_IFREG) {
    out.kind = EntryKind::file;
  } else if (type == AE_IFDIR) {
    out.kind = EntryKind::directory;
  } else if (type == AE_IFLNK) {
    out.kind = EntryKind::symlink;
    out.link = entry_symlink(entry);
    const auto points_out = [&] {
      refuse_entry(name, target,
                   fmt::format("the symlink points outside ({})", python_repr(out.link)));
    };
    if (out.link.empty() || out.link.front() == '/')
      points_out();
    std::size_t ups = 0;
    bool descended = false;
    for (const auto& part : split_components(out.link)) {
      if (part != "..") {
        descended = true;
      } else if (descended || ++ups >= out.parts.size()) {
        points_out();
      }
    }
  }
  if (out.parts.empty() && out.kind != EntryKind::directory && out.kind != EntryKind::skipped)
    refuse_entry(name, target, "the entry would replace the target directory");
  return out;
}

// Checks the entries against each other: nothing goes through a symlink of the archive, a
// directory and a non-directory never take the same place, and a hard link names a file
// extracted before it. So the only surprises left at extraction are in the target itself.
void check_plan(const std::vector<PlannedEntry>& entries, const std::string& target) {
  std::set<std::string> symlinks;
  for (const auto& e : entries) {
    if (e.kind == EntryKind::symlink)
      symlinks.insert(e.relative());
  }
  std::map<std::string, EntryKind> latest;  // the kind each place has so far
  for (const auto& e : entries) {
    if (e.kind == EntryKind::skipped)
      continue;
    for (std::size_t n = 1; n < e.parts.size(); ++n) {
      const std::string prefix = join_components(e.parts, n);
      if (symlinks.count(prefix) != 0) {
        refuse_entry(
            e.name, target,
            fmt::format("it would be written through the symlink {}", python_repr(prefix)));
      }
      auto [it, added] = latest.try_emplace(prefix, EntryKind::directory);
      if (!added && it->second != EntryKind::directory) {
        refuse_entry(e.name, target,
                     fmt::format("an earlier entry puts a file at {}", python_repr(prefix)));
      }
    }
    const std::string place = e.relative();
    if (e.kind == EntryKind::hardlink) {
      const auto it = latest.find(e.link);
      if (it == latest.end() || it->second != EntryKind::file) {
        refuse_entry(e.name, target,
                     fmt::format("the hard link's target {} is not a file extracted before it",
                                 python_repr(e.link)));
      }
    }
    const EntryKind kind = e.kind == EntryKind::hardlink ? EntryKind::file : e.kind;
    const auto before = latest.find(place);
    if (before != latest.end() &&
        (before->second == EntryKind::directory) != (kind == EntryKind::directory)) {
      refuse_entry(e.name, target,
                   kind == EntryKind::directory
                       ? std::string("an earlier entry puts a file or symlink there")
                       : std::string("an earlier entry puts a directory there"));
    }
    if (!e.parts.empty())
      latest[place] = kind;
  }
}

// Makes the directories parts[0, count) under `root`, refusing to go through a symlink.
// Appends each directory it creates to `created`.
std::string make_entry_dirs(const std::string& root, const PlannedEntry& entry, std::size_t count,
                            const std::string& target, std::vector<std::string>& created) {
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
    if (::mkdir(path.c_str(), 0777) == 0)
      created.push_back(path);
    else if (!(errno == EEXIST && detail::is_directory(path)))
      throw_os_error(errno, path);
  }
  return path;
}

struct timespec entry_mtime(archive_entry* entry) {
  if (archive_entry_mtime_is_set(entry) == 0)
    return {0, UTIME_OMIT};
  return {static_cast<time_t>(archive_entry_mtime(entry)), archive_entry_mtime_nsec(entry)};
}

// The current entry's data, block by block, each at its offset in the file (a sparse entry's
// blocks leave holes between them).
void for_each_data_block(ArchiveReader& reader, const std::string& archive_path,
                         const std::function<void(std::uint64_t, std::string_view)>& on_block) {
  while (true) {
    const void* block = nullptr;
    std::size_t size = 0;
    la_int64_t offset = 0;
    const int rc = archive_read_data_block(reader.a, &block, &size, &offset);
    if (rc == ARCHIVE_EOF)
      return;
    // A warning here is damaged data (a zip entry whose CRC-32 does not match): refused, as
    // Python's zipfile refuses it, rather than written as if whole.
    if (rc != ARCHIVE_OK)
      throw_read_error(reader.a, archive_path);
    on_block(static_cast<std::uint64_t>(offset),
             std::string_view(static_cast<const char*>(block), size));
  }
}

void extract_file_data(ArchiveReader& reader, archive_entry* entry, int fd,
                       const std::string& archive_path, const std::string& path) {
  for_each_data_block(reader, archive_path, [&](std::uint64_t offset, std::string_view data) {
    // Sparse entries come as blocks at offsets; the holes stay holes.
    if (::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0)
      throw_os_error(errno, path);
    detail::write_all(fd, data, path);
  });
  if (archive_entry_size_is_set(entry) != 0 &&
      ::ftruncate(fd, static_cast<off_t>(archive_entry_size(entry))) != 0) {
    throw_os_error(errno, path);
  }
  const struct timespec times[2] = {{0, UTIME_OMIT}, entry_mtime(entry)};
  if (::futimens(fd, times) != 0)
    throw_os_error(errno, path);
}

// Puts a hard link to the existing file `from` at `path`, replacing a file or link there.
void replace_with_hardlink(const std::string& from, const std::string& path) {
  const auto [dir, base] = split_path(path);
  for (int attempt = 0;; ++attempt) {
    const std::string temp = join_path(dir, fmt::format(".{}.rex-link-{}", base, attempt));
    if (::linkat(AT_FDCWD, from.c_str(), AT_FDCWD, temp.c_str(), 0) == 0) {
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

struct DirectoryMetadata {
  std::string path;
  std::size_t depth;
  mode_t perm;
  struct timespec mtime;
};

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 || errno != ENOENT;
}

// Removes what a failed extraction created, newest first (so a directory's content goes before
// it). Best effort: the extraction's own error is the one reported.
void remove_created(const std::vector<std::string>& created) noexcept {
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    if (::unlink(it->c_str()) != 0 && errno == EISDIR)
      ::rmdir(it->c_str());
  }
}

void extract_checked(const std::string& source, const std::string& target,
                     const std::vector<PlannedEntry>& entries, std::vector<std::string>& created);

void extract(const std::string& source, const std::string& target) {
  // Pass 1: every entry is checked before anything is written.
  std::vector<PlannedEntry> entries;
  {
    ArchiveReader reader;
    open_for_reading(reader, source);
    archive_entry* entry = nullptr;
    while (next_entry(reader, entry, source))
      entries.push_back(plan_entry(entry, target));
  }
  check_plan(entries, target);

  // Pass 2. A failure part way removes every file, link and directory this extraction created
  // (the target and its missing parents among them), so what remains is what was there before,
  // save for files the archive replaced.
  std::vector<std::string> created;
  for (std::string dir = target; !path_exists(dir);) {
    created.insert(created.begin(), dir);
    std::string parent = split_path(dir).first;
    if (parent == dir)
      break;
    dir = std::move(parent);
  }
  try {
    extract_checked(source, target, entries, created);
  } catch (...) {
    remove_created(created);
    throw;
  }
}

// Pass 2: extraction, in archive order. Appends what it creates to `created`.
void extract_checked(const std::string& source, const std::string& target,
                     const std::vector<PlannedEntry>& entries, std::vector<std::string>& created) {
  make_dirs(target);
  std::vector<DirectoryMetadata> directories;
  ArchiveReader reader;
  open_for_reading(reader, source);
  archive_entry* entry = nullptr;
  for (const auto& e : entries) {
    if (!next_entry(reader, entry, source)) {
      throw ValueError(fmt::format("{} changed while it was being extracted", python_repr(source)),
                       {{"path", utf8_backslashreplace(source)}});
    }
    const mode_t perm = archive_entry_perm(entry) & 07777;
    switch (e.kind) {
      case EntryKind::skipped:
        continue;
      case EntryKind::directory: {
        const std::string path = make_entry_dirs(target, e, e.parts.size(), target, created);
        if (!e.parts.empty()) {
          directories.push_back({.path = path,
                                 .depth = e.parts.size(),
                                 .perm = perm != 0 ? perm : mode_t{0755},
                                 .mtime = entry_mtime(entry)});
        }
        continue;
      }
      case EntryKind::file:
      case EntryKind::symlink:
      case EntryKind::hardlink:
        break;
    }
    const std::string dir = make_entry_dirs(target, e, e.parts.size() - 1, target, created);
    const std::string path = join_path(dir, e.parts.back());
    const bool is_new = !path_exists(path);
    if (e.kind == EntryKind::symlink) {
      detail::replace_with_symlink(path, e.link);
      if (is_new)
        created.push_back(path);
      const struct timespec times[2] = {{0, UTIME_OMIT}, entry_mtime(entry)};
      if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
        throw_os_error(errno, path);
    } else if (e.kind == EntryKind::hardlink) {
      // check_plan made sure the link names a file extracted before; a place already in the
      // target that is not one (a symlink put there since) is refused rather than followed.
      const std::string from = join_path(target, e.link);
      struct stat st {};
      if (::lstat(from.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        refuse_entry(e.name, target,
                     fmt::format("the hard link's target {} is not a file", python_repr(e.link)));
      }
      replace_with_hardlink(from, path);
      if (is_new)
        created.push_back(path);
    } else {
      detail::replace_file(path,
                           [&](int fd) { extract_file_data(reader, entry, fd, source, path); },
                           {.mode = perm != 0 ? perm : mode_t{0644}, .through_symlink = false});
      if (is_new)
        created.push_back(path);
    }
  }
  // Directory modes and times last, deepest first: a read-only directory is filled before,
  // and no later write inside a directory changes its time again.
  std::stable_sort(directories.begin(), directories.end(),
                   [](const auto& a, const auto& b) { return a.depth > b.depth; });
  for (const auto& d : directories) {
    if (::chmod(d.path.c_str(), d.perm) != 0)
      throw_os_error(errno, d.path);
    const struct timespec times[2] = {{0, UTIME_OMIT}, d.mtime};
    if (::utimensat(AT_FDCWD, d.path.c_str(), times, 0) != 0)
      throw_os_error(errno, d.path);
  }
}

// ---------------------------------------------------------------------------------------------
// Writing.

struct ArchiveWriter {
  archive* a = nullptr;
  ArchiveWriter() : a(archive_write_new()) {
    if (a == nullptr)
      throw std::bad_alloc();
  }
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;
  ~ArchiveWriter() { archive_write_free(a); }
};

struct EntryHandle {
  archive_entry* e = archive_entry_new();
  EntryHandle() {
    if (e == nullptr)
      throw std::bad_alloc();
  }
  EntryHandle(const EntryHandle&) = delete;
  EntryHandle& operator=(const EntryHandle&) = delete;
  ~EntryHandle() { archive_entry_free(e); }
};

[[noreturn]] void throw_write_error(archive* a, const std::string& path) {
  const int err = archive_errno(a);
  if (is_format_error(err)) {
    throw OSError(fmt::format("cannot write the archive {}: {}", python_repr(path),
                              archive_message(a, "libarchive failed")),
                  {{"path", utf8_backslashreplace(path)}});
  }
  throw_os_error(err, path);
}

// Walks a tree into an open archive writer.
class TreeWriter {
 public:
  TreeWriter(archive* a, std::string archive_path, std::vector<std::pair<dev_t, ino_t>> exclude)
      : a_(a), archive_path_(std::move(archive_path)), exclude_(std::move(exclude)) {}

  void add_directory_contents(const std::string& dir, const std::string& prefix) {
    for (const auto& name : detail::list_directory(dir)) {
      const std::string path = join_path(dir, name);
      const std::string entry_name = prefix + name;
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0)
        throw_os_error(errno, path);
      if (excluded(st))
        continue;
      if (S_ISDIR(st.st_mode)) {
        add_header(entry_name + "/", st, AE_IFDIR);
        add_directory_contents(path, entry_name + "/");
      } else if (S_ISLNK(st.st_mode)) {
        add_symlink(path, entry_name, st);
      } else if (S_ISREG(st.st_mode)) {
        add_file(path, entry_name);
      }
      // Sockets, FIFOs and devices have no content to carry: skipped.
    }
  }

  void add_file(const std::string& path, const std::string& entry_name) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0)
      throw_os_error(errno, path);
    // The header describes the file as opened, so its size matches the data that follows.
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
      throw_os_error(errno, path);
    if (!S_ISREG(st.st_mode))
      return;  // replaced by something else since it was listed
    add_header(entry_name, st, AE_IFREG);
    auto remaining = static_cast<std::size_t>(st.st_size);
    std::vector<char> buffer(1 << 18);
    while (remaining > 0) {
      const ssize_t n = ::read(fd.get(), buffer.data(), std::min(buffer.size(), remaining));
      if (n < 0) {
        if (errno == EINTR)
          continue;
        throw_os_error(errno, path);
      }
      if (n == 0) {
        // The file shrank while being read: pad, so the entry keeps the size announced.
        std::fill(buffer.begin(), buffer.end(), '\0');
        while (remaining > 0) {
          const std::size_t chunk = std::min(buffer.size(), remaining);
          write_data(buffer.data(), chunk);
          remaining -= chunk;
        }
        break;
      }
      write_data(buffer.data(), static_cast<std::size_t>(n));
      remaining -= static_cast<std::size_t>(n);
    }
  }

 private:
  bool excluded(const struct stat& st) const {
    return std::find(exclude_.begin(), exclude_.end(), std::pair(st.st_dev, st.st_ino)) !=
           exclude_.end();
  }

  void add_symlink(const std::string& path, const std::string& entry_name, const struct stat& st) {
    const std::string link = detail::read_link(path);
    add_header(entry_name, st, AE_IFLNK, link.c_str());
  }

  void add_header(const std::string& name, const struct stat& st, mode_t type,
                  const char* symlink = nullptr) {
    EntryHandle entry;
    archive_entry_copy_pathname(entry.e, name.c_str());
    archive_entry_set_filetype(entry.e, type);
    archive_entry_set_perm(entry.e, st.st_mode & 07777);
    archive_entry_set_mtime(entry.e, st.st_mtim.tv_sec, 0);
    archive_entry_set_uid(entry.e, st.st_uid);
    archive_entry_set_gid(entry.e, st.st_gid);
    archive_entry_set_size(entry.e, type == AE_IFREG ? static_cast<la_int64_t>(st.st_size) : 0);
    if (symlink != nullptr)
      archive_entry_copy_symlink(entry.e, symlink);
    const int rc = archive_write_header(a_, entry.e);
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
      throw_write_error(a_, archive_path_);
  }

  void write_data(const char* data, std::size_t size) {
    const la_ssize_t n = archive_write_data(a_, data, size);
    if (n < 0 || static_cast<std::size_t>(n) != size)
      throw_write_error(a_, archive_path_);
  }

  archive* a_;
  std::string archive_path_;
  std::vector<std::pair<dev_t, ino_t>> exclude_;
};

void set_format(ArchiveWriter& writer, ArchiveFormat format, const std::string& path) {
  int rc = ARCHIVE_OK;
  switch (format) {
    case ArchiveFormat::zip:
      rc = archive_write_set_format_zip(writer.a);
      break;
    case ArchiveFormat::tar:
      // ustar headers, with pax extensions only for what ustar cannot hold (long names).
      rc = archive_write_set_format_pax_restricted(writer.a);
      break;
    case ArchiveFormat::tar_gz:
      rc = archive_write_set_format_pax_restricted(writer.a);
      if (rc == ARCHIVE_OK)
        rc = archive_write_add_filter_gzip(writer.a);
      break;
  }
  if (rc != ARCHIVE_OK)
    throw_write_error(writer.a, path);
}

std::string path_string(const std::filesystem::path& path) {
  reject_nul(path.native());
  return normalize_path(path.native());
}

}  // namespace

ArchiveFormat parse_archive_format(std::string_view name) {
  if (name == "zip")
    return ArchiveFormat::zip;
  if (name == "tar")
    return ArchiveFormat::tar;
  if (name == "tar.gz" || name == "tgz" || name == "gztar")
    return ArchiveFormat::tar_gz;
  throw ValueError(fmt::format("unknown archive format {} (expected 'zip', 'tar' or 'tar.gz')",
                               python_repr(name)),
                   {{"format", utf8_backslashreplace(name)}});
}

std::string_view archive_format_name(ArchiveFormat format) noexcept {
  switch (format) {
    case ArchiveFormat::zip:
      return "zip";
    case ArchiveFormat::tar:
      return "tar";
    case ArchiveFormat::tar_gz:
      return "tar.gz";
  }
  return "zip";
}

void create_archive(const std::filesystem::path& source, const std::filesystem::path& archive_path,
                    ArchiveFormat format) {
  const std::string from = path_string(source);
  const std::string out = path_string(archive_path);
  struct stat st {};
  if (::stat(from.c_str(), &st) != 0)
    throw_os_error(errno, from);
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    throw ValueError(fmt::format("cannot archive {}: it is neither a regular file nor a directory",
                                 python_repr(from)),
                     {{"path", utf8_backslashreplace(from)}});
  }
  make_dirs(split_path(out).first);
  std::vector<std::pair<dev_t, ino_t>> exclude;
  struct stat old {};
  if (::stat(out.c_str(), &old) == 0)
    exclude.emplace_back(old.st_dev, old.st_ino);
  detail::replace_file(out,
                       [&](int fd) {
                         struct stat self {};
                         if (::fstat(fd, &self) != 0)
                           throw_os_error(errno, out);
                         exclude.emplace_back(self.st_dev, self.st_ino);
                         ArchiveWriter writer;
                         set_format(writer, format, out);
                         if (archive_write_open_fd(writer.a, fd) != ARCHIVE_OK)
                           throw_write_error(writer.a, out);
                         TreeWriter tree(writer.a, out, exclude);
                         if (S_ISDIR(st.st_mode)) {
                           tree.add_directory_contents(from, "");
                         } else {
                           tree.add_file(from, split_path(from).second);
                         }
                         if (archive_write_close(writer.a) != ARCHIVE_OK)
                           throw_write_error(writer.a, out);
                       },
                       {});
}

void extract_archive(const std::filesystem::path& archive_path,
                     const std::filesystem::path& target_dir) {
  const std::string source = path_string(archive_path);
  const std::string target = path_string(target_dir);
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0)
    throw_os_error(errno, source);
  if (S_ISDIR(st.st_mode))
    throw_os_error(EISDIR, source);
  extract(source, target);
}

void read_archive_entries(const std::filesystem::path& archive_path,
                          const std::function<void(const ArchiveEntry&)>& on_entry,
                          const std::function<void(std::string_view)>& on_data) {
  const std::string path = archive_path.string();
  ArchiveReader reader;
  open_for_reading(reader, path);
  archive_entry* entry = nullptr;
  while (next_entry(reader, entry, path)) {
    ArchiveEntry e;
    e.path = entry_name(entry);
    e.mode = static_cast<unsigned>(archive_entry_filetype(entry)) |
             static_cast<unsigned>(archive_entry_perm(entry) & 07777);
    e.hard_link = !entry_hardlink(entry).empty();
    e.link_target = e.hard_link ? entry_hardlink(entry) : entry_symlink(entry);
    if (archive_entry_filetype(entry) == AE_IFREG && !e.hard_link &&
        archive_entry_size_is_set(entry) != 0)
      e.size = static_cast<std::uint64_t>(archive_entry_size(entry));
    on_entry(e);
    if (archive_entry_filetype(entry) != AE_IFREG || e.hard_link)
      continue;
    // A sparse entry's holes are its zeros.
    std::uint64_t at = 0;
    auto zeros_to = [&](std::uint64_t end) {
      static constexpr char kZeros[4096] = {};
      for (; at < end; at += std::min<std::uint64_t>(end - at, sizeof kZeros))
        on_data(std::string_view(kZeros, std::min<std::uint64_t>(end - at, sizeof kZeros)));
    };
    for_each_data_block(reader, path, [&](std::uint64_t offset, std::string_view data) {
      zeros_to(offset);
      on_data(data);
      at = offset + data.size();
    });
    zeros_to(e.size);
  }
}

}  // namespace rex

// libarchive keeps one small internal helper of its tar, pax and zip writers in the object file
// that also holds its table of every writer, xar among them, which needs libxml2 and ICU: 34 MB
// more in a static executable. Defining the helper here keeps that object out of the link.
// A libarchive that moves the helper elsewhere makes the link fail loudly (duplicate symbol);
// the fix is then to delete this definition.
namespace {
constexpr int EFTYPE_UNSUPPORTED = EINVAL;  // libarchive uses EINVAL for an unsupported type
}

extern "C" void __archive_write_entry_filetype_unsupported(archive* a, archive_entry* entry,
                                                           const char* format) {
  const char* path = archive_entry_pathname(entry);
  archive_set_error(a, EFTYPE_UNSUPPORTED, "%s: %s format cannot archive this file type",
                    path != nullptr ? path : "(unnamed entry)", format);
}
