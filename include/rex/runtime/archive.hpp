// Archives of files and directory trees: zip, tar and gzip-compressed tar (libarchive).
//
// Used to move whole trees between a client and a sandbox: SWE-ReX's client zips a directory
// with its contents at the archive root and the server extracts it into the target directory;
// rex does the same and also speaks tar. Extraction never writes outside its target directory:
// an archive with any entry that would land outside is refused before anything is written.
//
// The functions block on the file system (callers run them on a thread pool) and are
// thread-safe: none touches process-wide state (working directory, umask, locale).
// Errors are the protocol's exceptions: ValueError (bad arguments, unsafe or invalid archives),
// FileNotFoundError, PermissionError, OSError and the other OSError kinds of throw_os_error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace rex {

enum class ArchiveFormat { zip, tar, tar_gz };

/// "zip" | "tar" | "tar.gz" (also "tgz" and shutil's "gztar") -> the format; anything else is a
/// ValueError naming the value.
ArchiveFormat parse_archive_format(std::string_view name);

/// The canonical name of a format: "zip", "tar" or "tar.gz" (also the usual file extension).
std::string_view archive_format_name(ArchiveFormat format) noexcept;

/// Writes `source` (a file or a directory; a symlink to either is followed) as an archive at
/// `archive_path`, creating its parent directories. A directory's CONTENTS go at the archive
/// root (as `shutil.make_archive(..., root_dir=source)`), in sorted order, each directory
/// before what it holds; a single file goes in under its file name. Entries keep their mode
/// bits and modification time (whole seconds); symlinks inside the tree stay symlinks; sockets,
/// FIFOs and devices are skipped. The archive is written to a temporary file renamed into
/// place, so a failure leaves no partial archive; an archive written inside `source` does not
/// contain itself. File data is streamed, never read whole into memory.
void create_archive(const std::filesystem::path& source, const std::filesystem::path& archive_path,
                    ArchiveFormat format);

/// Extracts a zip, tar or tar.gz archive (recognised from its content, not its name) INTO
/// `target_dir`, which is created with its parents. Files, directories, symlinks and hard links
/// to files extracted before are restored with their mode bits and modification times (the
/// target directory itself keeps its own); existing files are replaced whole; other entry kinds
/// (devices, FIFOs) are skipped.
///
/// Safety: every entry is checked before anything is written. An entry that is absolute,
/// contains "..", would be written through a symlink of the archive, is a symlink pointing
/// outside its reach (absolute, or more ".." than its depth), or is a hard link to anything but
/// a file extracted before it makes the whole archive a ValueError naming the entry
/// (extra_info "entry"). A symlink that already exists inside `target_dir` is never followed:
/// an entry meeting one on its way stops the extraction there with a ValueError.
/// An archive that is not a zip or tar, or is corrupt or truncated, is a ValueError naming the
/// archive (extra_info "path") with libarchive's reason.
///
/// A failure part way (data found corrupt only while extracting, a full disk, a symlink met)
/// removes every file, link and directory the extraction created, `target_dir` and its parents
/// included when it made them; files the archive replaced keep their new content.
void extract_archive(const std::filesystem::path& archive_path,
                     const std::filesystem::path& target_dir);

/// One entry of an archive as read_archive_entries() meets it.
struct ArchiveEntry {
  std::string path;         // as the archive names it
  unsigned mode = 0;        // the file type and permission bits, as st_mode
  std::uint64_t size = 0;   // a file's bytes (0 for the others)
  std::string link_target;  // a symbolic link's target, or the file a hard link names
  bool hard_link = false;
};

/// Calls on_entry for each entry of a zip, tar or tar.gz archive in the archive's order, then
/// on_data with a file's content piece by piece (nothing is written anywhere). The same
/// errors as extract_archive's for an archive that cannot be read.
void read_archive_entries(const std::filesystem::path& archive_path,
                          const std::function<void(const ArchiveEntry&)>& on_entry,
                          const std::function<void(std::string_view)>& on_data);

}  // namespace rex
