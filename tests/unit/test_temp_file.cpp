#include <rex/core/temp_file.hpp>
#include <rex/protocol/exceptions.hpp>

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

struct Scratch {
  Scratch() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rex-test-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~Scratch() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(TempFile, CreatedInADirectoryAndRemovedWithTheObject) {
  Scratch dir;
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
  Scratch dir;
  TempFile file = TempFile::create_in(dir.path, "a-");
  TempFile other = std::move(file);
  EXPECT_FALSE(file);
  ASSERT_TRUE(other);
  const std::string kept = other.release();
  EXPECT_FALSE(other);
  EXPECT_TRUE(exists(kept));
}

TEST(TempFile, CreatedBesideAPathHiddenAndNamedAfterIt) {
  Scratch dir;
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

TEST(TempDir, CreatedPrivateAndRemovedWithItsContents) {
  Scratch dir;
  std::string path;
  {
    TempDir made = TempDir::create_in(dir.path, "download-");
    path = made.path();
    EXPECT_TRUE(path.starts_with(dir.path + "/download-"));
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::filesystem::create_directories(path + "/a/b");
    EXPECT_TRUE(exists(path + "/a/b"));
  }
  EXPECT_FALSE(exists(path));
}

TEST(TempDir, ReleasedStaysMovedIsRemovedOnce) {
  Scratch dir;
  TempDir first = TempDir::create_in(dir.path, "x-");
  TempDir second = std::move(first);
  EXPECT_FALSE(first);
  ASSERT_TRUE(second);
  const std::string kept = second.release();
  EXPECT_FALSE(second);
  EXPECT_TRUE(exists(kept));
  TempDir third = TempDir::create_in(dir.path, "y-");
  const std::string gone = third.path();
  third.remove();
  EXPECT_FALSE(exists(gone));
  EXPECT_FALSE(third);
}

TEST(TempDir, AMissingDirectoryThrows) {
  EXPECT_THROW(TempDir::create_in("/nonexistent-rex-dir", "x-"), FileNotFoundError);
}

}  // namespace
}  // namespace rex
