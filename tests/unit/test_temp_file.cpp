#include <rex/core/temp_file.hpp>

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace rex {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

struct TempDir {
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rex-test-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(TempFile, CreatedInADirectoryAndRemovedWithTheObject) {
  TempDir dir;
  std::string path;
  {
    TempFile file = TempFile::create_in(dir.path, "upload-");
    path = file.path();
    EXPECT_TRUE(path.starts_with(dir.path + "/upload-"));
    EXPECT_GE(file.fd(), 0);
    EXPECT_EQ(::write(file.fd(), "x", 1), 1);
    EXPECT_EQ(file.close(), 0);
    EXPECT_EQ(file.fd(), -1);
    EXPECT_TRUE(exists(path));
  }
  EXPECT_FALSE(exists(path));
}

TEST(TempFile, ReleasedFileStaysAndMovedFileIsRemovedOnce) {
  TempDir dir;
  TempFile file = TempFile::create_in(dir.path, "a-");
  TempFile other = std::move(file);
  EXPECT_FALSE(file);
  ASSERT_TRUE(other);
  const std::string kept = other.release();
  EXPECT_FALSE(other);
  EXPECT_TRUE(exists(kept));
}

TEST(TempFile, CreatedBesideAPathHiddenAndNamedAfterIt) {
  TempDir dir;
  std::error_code error;
  TempFile file = TempFile::create_beside(dir.path + "/data.txt", "rex", error);
  ASSERT_FALSE(error);
  EXPECT_TRUE(file.path().starts_with(dir.path + "/.data.txt.rex-")) << file.path();
  TempFile missing = TempFile::create_beside(dir.path + "/no/such/dir/x", "rex", error);
  EXPECT_EQ(error, std::errc::no_such_file_or_directory);
  EXPECT_FALSE(missing);
}

TEST(TempFile, AMissingDirectoryThrows) {
  EXPECT_ANY_THROW(TempFile::create_in("/nonexistent-rex-dir", "x-"));
}

}  // namespace
}  // namespace rex
