// File operations of the local runtime (`/read_file`, `/write_file`, `/upload`, PROTOCOL.md)
// with SWE-ReX's semantics, which are Python's: the same codecs, error handlers and error
// messages ("[Errno 2] No such file or directory: 'x'").
//
// The *_sync functions block on the file system: a runtime runs them off its io threads. They
// are thread-safe: none touches process-wide state (working directory, umask).
// Errors are the protocol's exceptions: FileNotFoundError, IsADirectoryError,
// NotADirectoryError, PermissionError, OSError (any other errno) and ValueError (bad
// arguments, undecodable text, unsafe archives).
#pragma once

#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/files.hpp>
#include <rex/protocol/python_text.hpp>

#include <string>
#include <string_view>

namespace rex {

/// Python's `Path(path).read_text(encoding, errors)`: the file decoded (encoding null = utf-8,
/// errors null = strict) and, as in Python's text mode, "\r\n" and lone "\r" read as "\n".
ReadFileResponse read_file_sync(const ReadFileRequest& request);

/// Creates the parent directories, then replaces the file with the content (UTF-8, as is).
/// The bytes go to a temporary file in the same directory that is renamed over the target, so
/// a failure never leaves a partial file. An existing file keeps its mode and owner; a symlink
/// is written through. Files on read-only directories or bind mounts are rewritten in place.
void write_file_sync(const WriteFileRequest& request);

/// Copies source_path to target_path:
/// - a file: to exactly target_path (parents created, replaced atomically, mode copied);
/// - a directory: its contents recursively INTO target_path (created, or merged when it
///   exists), keeping modes, modification times and symlinks as symlinks; sockets, FIFOs
///   and devices are skipped;
/// - unzip=true: source_path is an archive (zip as SWE-ReX sends, or tar, tar.gz) extracted
///   into target_path (created) by extract_archive (rex/runtime/archive.hpp): entries that
///   would land outside target_path make it a ValueError naming the entry, before anything of
///   the archive is written.
void upload_sync(const UploadRequest& request);

}  // namespace rex
