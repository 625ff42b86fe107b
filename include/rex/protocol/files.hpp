// File transfer messages: read, write, upload (PROTOCOL.md) and download (a rex addition).
#pragma once

#include <boost/describe/class.hpp>

#include <optional>
#include <string>

namespace rex {

struct ReadFileRequest {
  std::string path{};
  std::optional<std::string> encoding{};  // Python codec name; none = utf-8
  std::optional<std::string> errors{};    // Python error handler; none = strict
};
BOOST_DESCRIBE_STRUCT(ReadFileRequest, (), (path, encoding, errors))

struct ReadFileResponse {
  std::string content{};
};
BOOST_DESCRIBE_STRUCT(ReadFileResponse, (), (content))

struct WriteFileRequest {
  std::string content{};
  std::string path{};
};
BOOST_DESCRIBE_STRUCT(WriteFileRequest, (), (content, path))

struct WriteFileResponse {};
BOOST_DESCRIBE_STRUCT(WriteFileResponse, (), ())

// Copies a file or a directory tree from source_path (on the caller's side) to target_path.
struct UploadRequest {
  std::string source_path{};
  std::string target_path{};
  bool unzip = false;  // source is a zip archive to extract into target_path
};
BOOST_DESCRIBE_STRUCT(UploadRequest, (), (source_path, target_path, unzip))

struct UploadResponse {};
BOOST_DESCRIBE_STRUCT(UploadResponse, (), ())

// Copies a file or a directory tree from path (on the runtime's side) to target_path (on the
// caller's side): a file to exactly target_path, a directory's contents into target_path.
struct DownloadRequest {
  std::string path{};
  std::string target_path{};
};
BOOST_DESCRIBE_STRUCT(DownloadRequest, (), (path, target_path))

struct DownloadResponse {};
BOOST_DESCRIBE_STRUCT(DownloadResponse, (), ())

}  // namespace rex
