// Archives: round trips of trees through zip, tar and tar.gz (modes, times, symlinks, binary and
// large files), archives of single files, and extraction that refuses every entry that would
// land outside its target, before anything is written.
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/file_ops.hpp>

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "support/test_helpers.hpp"

namespace {

namespace fs = std::filesystem;
using rex::ArchiveFormat;

void put(const fs::path& file, std::string_view bytes, mode_t mode = 0644) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  ::chmod(file.c_str(), mode);
}

std::string get(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void set_mtime(const fs::path& path, time_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// What a tree holds, compared across a round trip: per relative path, the kind, mode bits,
// modification time (seconds), and content or link target.
struct Node {
  char kind;  // 'f', 'd', 'l'
  mode_t mode;
  time_t mtime;
  std::string data;
  bool operator==(const Node&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Node& n) {
  return out << n.kind << " " << std::oct << n.mode << std::dec << " t=" << n.mtime << " "
             << n.data.size() << " bytes";
}

std::map<std::string, Node> snapshot(const fs::path& root) {
  std::map<std::string, Node> nodes;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    struct stat st {};
    EXPECT_EQ(::lstat(it->path().c_str(), &st), 0);
    Node n{.kind = '?', .mode = st.st_mode & 07777, .mtime = st.st_mtim.tv_sec, .data = {}};
    if (S_ISLNK(st.st_mode)) {
      n.kind = 'l';
      n.mode = 0;  // a symlink's own mode means nothing on Linux
      n.data = fs::read_symlink(it->path()).string();
    } else if (S_ISDIR(st.st_mode)) {
      n.kind = 'd';
    } else if (S_ISREG(st.st_mode)) {
      n.kind = 'f';
      n.data = get(it->path());
    }
    nodes.emplace(fs::relative(it->path(), root).string(), n);
  }
  return nodes;
}

std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string data(size, '\0');
  for (auto& c : data)
    c = static_cast<char>(rng());
  return data;
}

// --- Hand-made archives ------------------------------------------------------------------------

struct Item {
  std::string name{};
  char kind = 'f';     // 'f' file, 'd' directory, 'l' symlink, 'h' hard link
  std::string data{};  // file content or link target
  mode_t perm = 0644;
};

void write_archive(const fs::path& file, ArchiveFormat format, const std::vector<Item>& items) {
  archive* a = archive_write_new();
  if (format == ArchiveFormat::zip) {
    ASSERT_EQ(archive_write_set_format_zip(a), ARCHIVE_OK);
  } else {
    ASSERT_EQ(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    if (format == ArchiveFormat::tar_gz) {
      ASSERT_EQ(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    }
  }
  ASSERT_EQ(archive_write_open_filename(a, file.c_str()), ARCHIVE_OK);
  for (const auto& item : items) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, item.name.c_str());
    archive_entry_set_perm(entry, item.perm);
    archive_entry_set_mtime(entry, 1700000000, 0);
    archive_entry_set_size(entry, 0);
    switch (item.kind) {
      case 'd':
        archive_entry_set_filetype(entry, AE_IFDIR);
        break;
      case 'l':
        archive_entry_set_filetype(entry, AE_IFLNK);
        archive_entry_set_symlink(entry, item.data.c_str());
        break;
      case 'h':
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_hardlink(entry, item.data.c_str());
        break;
      default:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_size(entry, static_cast<la_int64_t>(item.data.size()));
    }
    ASSERT_EQ(archive_write_header(a, entry), ARCHIVE_OK) << archive_error_string(a);
    if (item.kind == 'f') {
      ASSERT_EQ(archive_write_data(a, item.data.data(), item.data.size()),
                static_cast<la_ssize_t>(item.data.size()));
    }
    archive_entry_free(entry);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

// The entry names of an archive, in order.
std::vector<std::string> entry_names(const fs::path& file) {
  archive* a = archive_read_new();
  archive_read_support_format_all(a);
  archive_read_support_filter_all(a);
  EXPECT_EQ(archive_read_open_filename(a, file.c_str(), 1 << 16), ARCHIVE_OK);
  std::vector<std::string> names;
  archive_entry* entry = nullptr;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK)
    names.emplace_back(archive_entry_pathname(entry));
  archive_read_free(a);
  return names;
}

// --- Formats -----------------------------------------------------------------------------------

TEST(ArchiveFormatName, ParsesTheUsualNames) {
  EXPECT_EQ(rex::parse_archive_format("zip"), ArchiveFormat::zip);
  EXPECT_EQ(rex::parse_archive_format("tar"), ArchiveFormat::tar);
  EXPECT_EQ(rex::parse_archive_format("tar.gz"), ArchiveFormat::tar_gz);
  EXPECT_EQ(rex::parse_archive_format("tgz"), ArchiveFormat::tar_gz);
  EXPECT_EQ(rex::parse_archive_format("gztar"), ArchiveFormat::tar_gz);
  EXPECT_EQ(rex::archive_format_name(ArchiveFormat::tar_gz), "tar.gz");
  EXPECT_THROW_MESSAGE(rex::parse_archive_format("rar"), rex::ValueError,
                       "unknown archive format 'rar' (expected 'zip', 'tar' or 'tar.gz')");
  EXPECT_THROW(rex::parse_archive_format("ZIP"), rex::ValueError);
  EXPECT_THROW(rex::parse_archive_format(""), rex::ValueError);
}

// --- Round trips, for every format ---------------------------------------------------------------

class ArchiveRoundTrip : public ::testing::TestWithParam<ArchiveFormat> {
 protected:
  fs::path path(std::string_view relative) const { return fs::path(dir_.path()) / relative; }
  std::string archive_name() const {
    return std::string("out.") + std::string(rex::archive_format_name(GetParam()));
  }
  rex::test::TempDir dir_;
};

TEST_P(ArchiveRoundTrip, TreeComesBackTheSame) {
  const fs::path src = path("src");
  put(src / "top.txt", "top\n");
  put(src / "a/b/c/deep.txt", "deep");
  put(src / "run.sh", "#!/bin/sh\necho hi\n", 0755);
  put(src / "readonly.txt", "ro", 0444);
  put(src / "a/binary.bin", std::string("\0\r\n\xff\x00zz\r", 9) + random_bytes(4096, 1));
  put(src / "a/big.bin", random_bytes(6 * 1024 * 1024 + 123, 2));
  put(src / "a/empty.txt", "");
  put(src / "name with spaces & caf\xC3\xA9.txt", "utf-8 name");
  fs::create_directories(src / "empty_dir");
  fs::create_directories(src / "private");
  ::chmod((src / "private").c_str(), 0700);
  ASSERT_EQ(::symlink("a/b/c/deep.txt", (src / "link").c_str()), 0);
  ASSERT_EQ(::symlink("../top.txt", (src / "a/up").c_str()), 0);
  ASSERT_EQ(::symlink("missing", (src / "dangling").c_str()), 0);
  ASSERT_EQ(::mkfifo((src / "fifo").c_str(), 0644), 0);
  time_t t = 1600000000;
  for (auto it = fs::recursive_directory_iterator(src); it != fs::recursive_directory_iterator();
       ++it) {
    set_mtime(it->path(), t += 7);
  }

  const fs::path archive = path(archive_name());
  rex::create_archive(src, archive, GetParam());
  const fs::path out = path("out/nested");
  rex::extract_archive(archive, out);

  auto expected = snapshot(src);
  expected.erase("fifo");  // FIFOs have no content to carry
  const auto actual = snapshot(out);
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(actual.count("fifo"), 0u);
  EXPECT_EQ(get(out / "link"), "deep");

  // The directory's contents sit at the archive root, each directory before what it holds.
  const auto names = entry_names(archive);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "a/");
  for (const auto& name : names) {
    EXPECT_NE(name.rfind("src", 0), 0u) << name;
    EXPECT_NE(name.rfind("./", 0), 0u) << name;
  }

  // Extracting again over the first extraction replaces what is there.
  put(out / "top.txt", "changed");
  rex::extract_archive(archive, out);
  EXPECT_EQ(get(out / "top.txt"), "top\n");
}

TEST_P(ArchiveRoundTrip, SingleFileGoesInUnderItsName) {
  put(path("dir/report.bin"), std::string("\0\1\2", 3), 0750);
  set_mtime(path("dir/report.bin"), 1650000000);
  rex::create_archive(path("dir/report.bin"), path(archive_name()), GetParam());
  EXPECT_EQ(entry_names(path(archive_name())), std::vector<std::string>{"report.bin"});
  rex::extract_archive(path(archive_name()), path("x"));
  EXPECT_EQ(get(path("x/report.bin")), std::string("\0\1\2", 3));
  const auto nodes = snapshot(path("x"));
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes.at("report.bin").mode, 0750u);
  EXPECT_EQ(nodes.at("report.bin").mtime, 1650000000);
}

TEST_P(ArchiveRoundTrip, EmptyDirectoryGivesAnEmptyArchive) {
  fs::create_directories(path("empty"));
  rex::create_archive(path("empty"), path(archive_name()), GetParam());
  EXPECT_TRUE(entry_names(path(archive_name())).empty());
  rex::extract_archive(path(archive_name()), path("x/y"));
  EXPECT_TRUE(fs::is_directory(path("x/y")));
  EXPECT_TRUE(fs::is_empty(path("x/y")));
}

TEST_P(ArchiveRoundTrip, ArchiveWrittenInsideItsSourceDoesNotContainItself) {
  put(path("src/f.txt"), "f");
  const fs::path archive = path("src/sub/" + archive_name());
  rex::create_archive(path("src"), archive, GetParam());
  // Again, now that an older archive sits in the tree.
  rex::create_archive(path("src"), archive, GetParam());
  EXPECT_EQ(entry_names(archive), (std::vector<std::string>{"f.txt", "sub/"}));
  EXPECT_EQ(fs::directory_iterator(path("src/sub"))->path().filename(), archive_name())
      << "no temporary file left";
}

TEST_P(ArchiveRoundTrip, ExtractionIsTheUploadsUnzip) {
  put(path("src/d/f.txt"), "via upload");
  rex::create_archive(path("src"), path(archive_name()), GetParam());
  rex::upload_sync({.source_path = path(archive_name()).string(),
                    .target_path = path("t").string(),
                    .unzip = true});
  EXPECT_EQ(get(path("t/d/f.txt")), "via upload");
}

TEST_P(ArchiveRoundTrip, FormatIsRecognisedFromTheContent) {
  put(path("src/f.txt"), "content");
  rex::create_archive(path("src"), path("misleading.name"), GetParam());
  rex::extract_archive(path("misleading.name"), path("x"));
  EXPECT_EQ(get(path("x/f.txt")), "content");
}

INSTANTIATE_TEST_SUITE_P(Formats, ArchiveRoundTrip,
                         ::testing::Values(ArchiveFormat::zip, ArchiveFormat::tar,
                                           ArchiveFormat::tar_gz),
                         [](const auto& info) {
                           return info.param == ArchiveFormat::zip   ? std::string("zip")
                                  : info.param == ArchiveFormat::tar ? std::string("tar")
                                                                     : std::string("tar_gz");
                         });

// --- Creation errors
// -------------------------------------------------------------------------------

TEST(CreateArchive, MissingSourceIsFileNotFound) {
  rex::test::TempDir dir;
  EXPECT_THROW(rex::create_archive(dir.path() + "/nope", dir.path() + "/a.zip", ArchiveFormat::zip),
               rex::FileNotFoundError);
  EXPECT_FALSE(fs::exists(dir.path() + "/a.zip"));
}

TEST(CreateArchive, FifoSourceIsAValueError) {
  rex::test::TempDir dir;
  ASSERT_EQ(::mkfifo((dir.path() + "/fifo").c_str(), 0644), 0);
  EXPECT_THROW(rex::create_archive(dir.path() + "/fifo", dir.path() + "/a.tar", ArchiveFormat::tar),
               rex::ValueError);
}

TEST(CreateArchive, UnreadableFileFailsWithoutLeavingAnArchive) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root may read any file";
  rex::test::TempDir dir;
  put(fs::path(dir.path()) / "src/secret", "x", 0000);
  EXPECT_THROW(rex::create_archive(dir.path() + "/src", dir.path() + "/a.tar", ArchiveFormat::tar),
               rex::PermissionError);
  EXPECT_FALSE(fs::exists(dir.path() + "/a.tar"));
}

// --- Extraction: hard links, existing targets
// ------------------------------------------------------

class ExtractTest : public ::testing::Test {
 protected:
  fs::path path(std::string_view relative) const { return fs::path(dir_.path()) / relative; }
  rex::test::TempDir dir_;
};

TEST_F(ExtractTest, HardLinksToEarlierFilesAreKept) {
  write_archive(
      path("h.tar"), ArchiveFormat::tar,
      {{.name = "d/a.txt", .data = "shared"}, {.name = "b.txt", .kind = 'h', .data = "d/a.txt"}});
  rex::extract_archive(path("h.tar"), path("x"));
  EXPECT_EQ(get(path("x/b.txt")), "shared");
  EXPECT_TRUE(fs::equivalent(path("x/b.txt"), path("x/d/a.txt")));
}

TEST_F(ExtractTest, SymlinksAlreadyInTheTargetAreReplacedNotFollowed) {
  put(path("outside/victim.txt"), "untouched");
  fs::create_directories(path("target"));
  ASSERT_EQ(::symlink(path("outside/victim.txt").c_str(), path("target/f.txt").c_str()), 0);
  write_archive(path("a.tar"), ArchiveFormat::tar, {{.name = "f.txt", .data = "new"}});
  rex::extract_archive(path("a.tar"), path("target"));
  EXPECT_EQ(get(path("outside/victim.txt")), "untouched");
  EXPECT_FALSE(fs::is_symlink(path("target/f.txt")));
  EXPECT_EQ(get(path("target/f.txt")), "new");
}

TEST_F(ExtractTest, SymlinkDirectoriesAlreadyInTheTargetAreNotEntered) {
  fs::create_directories(path("outside"));
  fs::create_directories(path("target"));
  ASSERT_EQ(::symlink(path("outside").c_str(), path("target/ext").c_str()), 0);
  write_archive(path("a.tar.gz"), ArchiveFormat::tar_gz, {{.name = "ext/f.txt", .data = "x"}});
  EXPECT_THROW(rex::extract_archive(path("a.tar.gz"), path("target")), rex::ValueError);
  EXPECT_FALSE(fs::exists(path("outside/f.txt")));
}

// An existing symlink met part way stops the extraction after earlier entries were written:
// what the extraction created goes, what was there stays.
TEST_F(ExtractTest, FailurePartWayRemovesOnlyWhatItCreated) {
  fs::create_directories(path("outside"));
  put(path("target/kept.txt"), "was here before");
  put(path("target/replaced.txt"), "old");
  fs::create_directories(path("target/old_dir"));
  ASSERT_EQ(::symlink(path("outside").c_str(), path("target/ext").c_str()), 0);
  write_archive(path("a.tar"), ArchiveFormat::tar,
                {{.name = "new.txt", .data = "n"},
                 {.name = "replaced.txt", .data = "new"},
                 {.name = "new_dir/", .kind = 'd'},
                 {.name = "new_dir/deeper/f.txt", .data = "f"},
                 {.name = "old_dir/g.txt", .data = "g"},
                 {.name = "link", .kind = 'l', .data = "new.txt"},
                 {.name = "ext/f.txt", .data = "x"}});
  EXPECT_THROW(rex::extract_archive(path("a.tar"), path("target")), rex::ValueError);
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(path("target")))
    left.push_back(e.path().lexically_relative(path("target")).string());
  std::sort(left.begin(), left.end());
  EXPECT_THAT(left, ::testing::ElementsAre("ext", "kept.txt", "old_dir", "replaced.txt"));
  EXPECT_EQ(get(path("target/kept.txt")), "was here before");
  EXPECT_EQ(get(path("target/replaced.txt")), "new");  // replaced whole before the failure
  EXPECT_TRUE(fs::is_empty(path("outside")));
}

// A zip's entries are checked (central directory) before anything is written; damaged data in
// its second entry is found only while extracting it, after the first one was written.
TEST_F(ExtractTest, DamagedZipDataIsRefusedAndWhatWasMadeRemoved) {
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += fmt::format("line {} of a file that compresses well\n", i);
  write_archive(path("a.zip"), ArchiveFormat::zip,
                {{.name = "a/first.txt", .data = "first"}, {.name = "a/second.txt", .data = text}});
  std::string zip = get(path("a.zip"));
  const std::size_t second = zip.find("PK\x03\x04", 4);
  ASSERT_NE(second, std::string::npos);
  const auto u16 = [&](std::size_t at) {
    return static_cast<std::size_t>(static_cast<unsigned char>(zip[at])) |
           static_cast<std::size_t>(static_cast<unsigned char>(zip[at + 1])) << 8;
  };
  const std::size_t data = second + 30 + u16(second + 26) + u16(second + 28);
  for (std::size_t i = data + 40; i < data + 48; ++i)
    zip[i] = static_cast<char>(~zip[i]);
  put(path("bad.zip"), zip);
  try {
    rex::extract_archive(path("bad.zip"), path("new/parent/target"));
    ADD_FAILURE() << "damaged data was extracted";
  } catch (const rex::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a valid zip, tar or tar.gz archive: "),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path("new")));
}

TEST_F(ExtractTest, MissingArchiveIsFileNotFound) {
  EXPECT_THROW(rex::extract_archive(path("nope.zip"), path("x")), rex::FileNotFoundError);
  EXPECT_FALSE(fs::exists(path("x")));
}

// --- Extraction: corrupt input
// ---------------------------------------------------------------------

class CorruptArchiveTest : public ExtractTest {
 protected:
  // Expects a ValueError naming the archive and saying it is not a valid one.
  void expect_invalid(const fs::path& archive) {
    try {
      rex::extract_archive(archive, path("target"));
      ADD_FAILURE() << "a corrupt archive was accepted: " << archive;
    } catch (const rex::ValueError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(rex::python_repr(archive.string())), std::string::npos) << message;
      EXPECT_NE(message.find("is not a valid zip, tar or tar.gz archive: "), std::string::npos)
          << message;
      EXPECT_EQ(e.extra_info().at("path").as_string(), archive.string());
    }
  }
  std::string make_archive(ArchiveFormat format) {
    put(path("src/a.txt"), random_bytes(300000, 3));
    put(path("src/b.txt"), random_bytes(300000, 4));
    const fs::path archive = path("full");
    rex::create_archive(path("src"), archive, format);
    return get(archive);
  }
};

TEST_F(CorruptArchiveTest, SomethingElseIsRefused) {
  put(path("text"), "this is not an archive at all");
  expect_invalid(path("text"));
  put(path("empty"), "");
  expect_invalid(path("empty"));
  put(path("random"), random_bytes(100000, 5));
  expect_invalid(path("random"));
}

TEST_F(CorruptArchiveTest, TruncatedTarIsRefusedBeforeWriting) {
  const std::string full = make_archive(ArchiveFormat::tar);
  put(path("cut.tar"), full.substr(0, 1000));  // the first header and part of its data
  expect_invalid(path("cut.tar"));
  EXPECT_FALSE(fs::exists(path("target")));
}

TEST_F(CorruptArchiveTest, TruncatedTarGzIsRefusedBeforeWriting) {
  const std::string full = make_archive(ArchiveFormat::tar_gz);
  put(path("cut.tar.gz"), full.substr(0, full.size() / 2));
  expect_invalid(path("cut.tar.gz"));
  EXPECT_FALSE(fs::exists(path("target")));
}

TEST_F(CorruptArchiveTest, TruncatedZipIsRefused) {
  const std::string full = make_archive(ArchiveFormat::zip);
  put(path("cut.zip"), full.substr(0, full.size() / 2));
  expect_invalid(path("cut.zip"));
  EXPECT_FALSE(fs::exists(path("target/b.txt")));
}

TEST_F(CorruptArchiveTest, CorruptDataLeavesNoPartialFile) {
  std::string full = make_archive(ArchiveFormat::tar_gz);
  // Damage the compressed stream in the middle: found only while inflating.
  for (std::size_t i = full.size() / 2; i < full.size() / 2 + 64; ++i)
    full[i] = static_cast<char>(~full[i]);
  put(path("bad.tar.gz"), full);
  expect_invalid(path("bad.tar.gz"));
  EXPECT_FALSE(fs::exists(path("target")));
}

// --- Extraction: every escape is refused, before anything is written
// ------------------------------

class UnsafeArchiveTest : public ::testing::TestWithParam<ArchiveFormat> {
 protected:
  fs::path path(std::string_view relative) const { return fs::path(dir_.path()) / relative; }

  void expect_refused(const std::vector<Item>& unsafe, std::string_view entry_name) {
    SCOPED_TRACE(std::string(entry_name));
    std::vector<Item> items{{.name = "harmless.txt", .data = "ok"}};
    items.insert(items.end(), unsafe.begin(), unsafe.end());
    write_archive(path("bad"), GetParam(), items);
    const fs::path target = path("target/inside");
    try {
      rex::extract_archive(path("bad"), target);
      ADD_FAILURE() << "an unsafe archive was extracted";
    } catch (const rex::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(rex::python_repr(entry_name)), std::string::npos)
          << e.what();
      EXPECT_EQ(e.extra_info().at("entry").as_string(), entry_name);
    }
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_.path()))
      names.insert(entry.path().filename().string());
    EXPECT_EQ(names, (std::set<std::string>{"bad", "outside"})) << "something was written";
    EXPECT_TRUE(fs::is_empty(path("outside")));
  }

  void SetUp() override { fs::create_directories(path("outside")); }
  rex::test::TempDir dir_;
};

TEST_P(UnsafeArchiveTest, DotDotEntries) {
  expect_refused({{.name = "../evil.txt", .data = "x"}}, "../evil.txt");
  expect_refused({{.name = "a/../../evil.txt", .data = "x"}}, "a/../../evil.txt");
  expect_refused({{.name = "a/../b.txt", .data = "x"}}, "a/../b.txt");
  expect_refused({{.name = "../outside/", .kind = 'd'}}, "../outside/");
}

TEST_P(UnsafeArchiveTest, AbsolutePaths) {
  const std::string absolute = path("outside/abs.txt").string();
  expect_refused({{.name = absolute, .data = "x"}}, absolute);
  expect_refused({{.name = "/", .kind = 'd'}}, "/");
}

TEST_P(UnsafeArchiveTest, SymlinksPointingOut) {
  expect_refused({{.name = "esc", .kind = 'l', .data = "../../.."}}, "esc");
  expect_refused({{.name = "up", .kind = 'l', .data = ".."}}, "up");
  expect_refused({{.name = "abs", .kind = 'l', .data = "/etc"}}, "abs");
  expect_refused({{.name = "d/dd", .kind = 'l', .data = "x/../../.."}}, "d/dd");
  expect_refused({{.name = "d/e/f", .kind = 'l', .data = "../../.."}}, "d/e/f");
  expect_refused({{.name = "empty", .kind = 'l', .data = ""}}, "empty");
}

TEST_P(UnsafeArchiveTest, EntriesThroughSymlinks) {
  // d/l points at d's parent (inside); d/l/m would then be a link at the top pointing out.
  expect_refused(
      {{.name = "d/l", .kind = 'l', .data = ".."}, {.name = "d/l/m", .kind = 'l', .data = ".."}},
      "d/l/m");
  // The link comes after the entry that would go through it: refused all the same.
  expect_refused({{.name = "s/f.txt", .data = "x"}, {.name = "s", .kind = 'l', .data = "sub"}},
                 "s/f.txt");
  expect_refused({{.name = "s", .kind = 'l', .data = "sub"}, {.name = "s/", .kind = 'd'}}, "s/");
}

TEST_P(UnsafeArchiveTest, ConflictingKindsAtOnePlace) {
  expect_refused({{.name = "f", .data = "x"}, {.name = "f/g.txt", .data = "y"}}, "f/g.txt");
  expect_refused({{.name = "d/", .kind = 'd'}, {.name = "d", .data = "y"}}, "d");
}

INSTANTIATE_TEST_SUITE_P(Formats, UnsafeArchiveTest,
                         ::testing::Values(ArchiveFormat::zip, ArchiveFormat::tar,
                                           ArchiveFormat::tar_gz),
                         [](const auto& info) {
                           return info.param == ArchiveFormat::zip   ? std::string("zip")
                                  : info.param == ArchiveFormat::tar ? std::string("tar")
                                                                     : std::string("tar_gz");
                         });

// Hard links exist in tar only.
class UnsafeTarTest : public UnsafeArchiveTest {};

TEST_P(UnsafeTarTest, HardLinksOut) {
  expect_refused({{.name = "h", .kind = 'h', .data = "/etc/passwd"}}, "h");
  expect_refused({{.name = "h", .kind = 'h', .data = "../outside/x"}}, "h");
  expect_refused({{.name = "h", .kind = 'h', .data = "a/../../x"}}, "h");
}

TEST_P(UnsafeTarTest, HardLinksToAnythingButAnEarlierFile) {
  // Not (yet) in the archive: it would link to whatever the target holds there.
  expect_refused(
      {{.name = "h", .kind = 'h', .data = "later.txt"}, {.name = "later.txt", .data = "x"}}, "h");
  expect_refused(
      {{.name = "l", .kind = 'l', .data = "harmless.txt"}, {.name = "h", .kind = 'h', .data = "l"}},
      "h");
  expect_refused({{.name = "d/", .kind = 'd'}, {.name = "h", .kind = 'h', .data = "d"}}, "h");
  expect_refused({{.name = "h", .kind = 'h', .data = "."}}, "h");
}

INSTANTIATE_TEST_SUITE_P(Formats, UnsafeTarTest,
                         ::testing::Values(ArchiveFormat::tar, ArchiveFormat::tar_gz),
                         [](const auto& info) {
                           return info.param == ArchiveFormat::tar ? std::string("tar")
                                                                   : std::string("tar_gz");
                         });

}  // namespace
