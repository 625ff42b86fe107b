// File operations of the local runtime: codecs and error handlers as Python's, file errors
// with Python's messages, atomic writes, uploads of files, trees and zip archives (including
// archives that try to write outside their target).
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/file_ops.hpp>

#include <archive.h>
#include <archive_entry.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "support/test_helpers.hpp"

namespace {

namespace fs = std::filesystem;
using rex::decode_text;

// --- decode_text ------------------------------------------------------------------------------

TEST(DecodeText, Utf8KeepsValidText) {
  const std::string text = "plain, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80";
  for (const char* errors : {"strict", "replace", "ignore", "backslashreplace"}) {
    EXPECT_EQ(decode_text(text, "utf-8", errors), text) << errors;
  }
}

TEST(DecodeText, Utf8StrictMessagesAreTheSameAsPython) {
  EXPECT_THROW_MESSAGE(decode_text("abc\xFF", "utf-8", "strict"), rex::ValueError,
                       "'utf-8' codec can't decode byte 0xff in position 3: invalid start byte");
  EXPECT_THROW_MESSAGE(
      decode_text("\xE2\x82"
                  "A",
                  "utf-8", "strict"),
      rex::ValueError,
      "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte");
  EXPECT_THROW_MESSAGE(decode_text("ab\xE2\x82", "utf-8", "strict"), rex::ValueError,
                       "'utf-8' codec can't decode bytes in position 2-3: unexpected end of data");
  EXPECT_THROW_MESSAGE(
      decode_text("\xF0", "utf-8", "strict"), rex::ValueError,
      "'utf-8' codec can't decode byte 0xf0 in position 0: unexpected end of data");
  EXPECT_THROW_MESSAGE(
      decode_text("\xED\xA0\x80", "utf-8", "strict"), rex::ValueError,
      "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte");
  EXPECT_THROW_MESSAGE(decode_text("a\xC0\xAF"
                                   "b",
                                   "utf-8", "strict"),
                       rex::ValueError,
                       "'utf-8' codec can't decode byte 0xc0 in position 1: invalid start byte");
}

TEST(DecodeText, DecodeErrorIsAValueErrorWithDetails) {
  try {
    decode_text("ab\xE2\x82", "utf-8", "strict");
    FAIL() << "no exception";
  } catch (const rex::SwerexException& e) {
    EXPECT_EQ(e.class_path(), "builtins.ValueError");
    EXPECT_EQ(e.extra_info().at("start").as_uint64(), 2u);
    EXPECT_EQ(e.extra_info().at("end").as_uint64(), 4u);
    EXPECT_EQ(e.extra_info().at("reason").as_string(), "unexpected end of data");
  }
}

TEST(DecodeText, Utf8ReplaceUsesOneReplacementCharacterPerMaximalSubpart) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(decode_text("abc\xFF", "utf-8", "replace"), "abc" + r);
  EXPECT_EQ(decode_text("\xE2\x82"
                        "A",
                        "utf-8", "replace"),
            r + "A");
  EXPECT_EQ(decode_text("\xF0\x9F\x98", "utf-8", "replace"), r);
  EXPECT_EQ(decode_text("\xED\xA0\x80", "utf-8", "replace"), r + r + r);
  EXPECT_EQ(decode_text("\xF4\x90\x80\x80", "utf-8", "replace"), r + r + r + r);
  EXPECT_EQ(decode_text("a\xC0\xAF"
                        "b",
                        "utf-8", "replace"),
            "a" + r + r + "b");
}

TEST(DecodeText, Utf8IgnoreDropsInvalidBytes) {
  EXPECT_EQ(decode_text("a\xFF"
                        "b\xE2\x82",
                        "utf-8", "ignore"),
            "ab");
  EXPECT_EQ(decode_text("\xED\xA0\x80z", "utf-8", "ignore"), "z");
}

TEST(DecodeText, Utf8BackslashreplaceEscapesEveryInvalidByte) {
  EXPECT_EQ(decode_text("a\xFF"
                        "b\xE2\x82",
                        "utf-8", "backslashreplace"),
            "a\\xffb\\xe2\\x82");
  EXPECT_EQ(decode_text("\xF0\x80\x80 \xC3\xA9", "utf-8", "backslashreplace"),
            "\\xf0\\x80\\x80 \xC3\xA9");
}

TEST(DecodeText, Latin1NeverFailsWhateverTheErrorMode) {
  for (const char* errors : {"strict", "replace", "ignore", "backslashreplace"}) {
    EXPECT_EQ(decode_text("caf\xE9 \xFF\x80", "latin-1", errors), "caf\xC3\xA9 \xC3\xBF\xC2\x80")
        << errors;
  }
}

TEST(DecodeText, AcceptsPythonsSpellingsOfCodecNames) {
  for (const char* name : {"utf-8", "utf8", "UTF-8", "utf_8", "U8", "Utf 8"}) {
    EXPECT_EQ(decode_text("\xC3\xA9", name, "strict"), "\xC3\xA9") << name;
  }
  for (const char* name :
       {"latin-1", "latin1", "Latin_1", "latin 1", "iso-8859-1", "ISO8859-1", "iso8859_1", "l1"}) {
    EXPECT_EQ(decode_text("\xE9", name, "strict"), "\xC3\xA9") << name;
  }
  EXPECT_EQ(decode_text("abc", "us-ascii", "strict"), "abc");
}

TEST(DecodeText, AsciiRejectsBytesAbove127) {
  EXPECT_THROW_MESSAGE(
      decode_text("\xE9", "ascii", "strict"), rex::ValueError,
      "'ascii' codec can't decode byte 0xe9 in position 0: ordinal not in range(128)");
  EXPECT_EQ(decode_text("a\xE9", "ascii", "replace"), "a\xEF\xBF\xBD");
  EXPECT_EQ(decode_text("a\xE9", "ascii", "backslashreplace"), "a\\xe9");
  EXPECT_EQ(decode_text("a\xE9", "ascii", "ignore"), "a");
}

TEST(DecodeText, UnknownCodecOrHandlerIsALookupErrorNamingIt) {
  EXPECT_THROW_MESSAGE(decode_text("a", "klingon", "strict"), rex::LookupError,
                       "unknown encoding: klingon");
  EXPECT_THROW_MESSAGE(decode_text("a", "utf-8", "bogus"), rex::LookupError,
                       "unknown error handler name 'bogus'");
  // Handlers that would put lone surrogates into the text cannot travel as JSON.
  EXPECT_THROW(decode_text("a", "utf-8", "surrogateescape"), rex::ValueError);
}

// --- Python text helpers ----------------------------------------------------------------------

TEST(FileOpsText, PythonReprQuotesAndEscapesAsPython) {
  EXPECT_EQ(rex::python_repr("abc"), "'abc'");
  EXPECT_EQ(rex::python_repr("a'b"), "\"a'b\"");
  EXPECT_EQ(rex::python_repr("a\"b'c"), "'a\"b\\'c'");
  EXPECT_EQ(rex::python_repr("a\\b\n\t\r"), "'a\\\\b\\n\\t\\r'");
  EXPECT_EQ(rex::python_repr(std::string_view("\x00\x7F", 2)), "'\\x00\\x7f'");
  EXPECT_EQ(rex::python_repr("\xC2\xA0\xC2\xAD \xC3\xA9\xE2\x80\xA8\xF0\x9F\x98\x80\xEE\x80\x80"),
            "'\\xa0\\xad \xC3\xA9\\u2028\xF0\x9F\x98\x80\\ue000'");
  EXPECT_EQ(rex::python_repr("\xFF"), "'\\udcff'");
}

TEST(FileOpsText, PythonFloatRepr) {
  EXPECT_EQ(rex::python_float_repr(1.0), "1.0");
  EXPECT_EQ(rex::python_float_repr(0.5), "0.5");
  EXPECT_EQ(rex::python_float_repr(100.0), "100.0");
  EXPECT_EQ(rex::python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(rex::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(rex::python_float_repr(0.1), "0.1");
}

TEST(FileOpsText, UniversalNewlines) {
  EXPECT_EQ(rex::translate_newlines("a\r\nb\rc\nd\r"), "a\nb\nc\nd\n");
  EXPECT_EQ(rex::translate_newlines("\r\r\n"), "\n\n");
}

TEST(FileOpsText, OsErrorsMapToPythonsClasses) {
  EXPECT_THROW_MESSAGE(rex::throw_os_error(ENOENT, "x"), rex::FileNotFoundError,
                       "[Errno 2] No such file or directory: 'x'");
  EXPECT_THROW_MESSAGE(rex::throw_os_error(EISDIR, "d"), rex::IsADirectoryError,
                       "[Errno 21] Is a directory: 'd'");
  EXPECT_THROW_MESSAGE(rex::throw_os_error(ENOTDIR, "f"), rex::NotADirectoryError,
                       "[Errno 20] Not a directory: 'f'");
  EXPECT_THROW_MESSAGE(rex::throw_os_error(EEXIST, "e"), rex::FileExistsError,
                       "[Errno 17] File exists: 'e'");
  EXPECT_THROW_MESSAGE(rex::throw_os_error(EACCES, "p"), rex::PermissionError,
                       "[Errno 13] Permission denied: 'p'");
  EXPECT_THROW_MESSAGE(rex::throw_os_error(ENOSPC), rex::OSError,
                       "[Errno 28] No space left on device");
}

// --- File system fixture ----------------------------------------------------------------------

class FileOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rex-file-ops-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    // Make everything removable again (tests create read-only files and directories).
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root_, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      }
    }
    fs::remove_all(root_, ec);
  }

  std::string path(std::string_view relative) const { return root_ + "/" + std::string(relative); }

  static void put(const std::string& file, std::string_view bytes) {
    fs::create_directories(fs::path(file).parent_path());
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  }
  static std::string get(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  static mode_t mode_of(const std::string& file) {
    struct stat st {};
    EXPECT_EQ(::lstat(file.c_str(), &st), 0) << file;
    return st.st_mode & 07777;
  }
  static std::set<std::string> names_in(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

  std::string root_;
};

// --- read_file --------------------------------------------------------------------------------

TEST_F(FileOpsTest, ReadFileDefaultsToStrictUtf8) {
  put(path("a.txt"), "h\xC3\xA9llo\n");
  EXPECT_EQ(rex::read_file_sync({.path = path("a.txt")}).content, "h\xC3\xA9llo\n");
  put(path("bad.txt"), "abc\xFF");
  EXPECT_THROW_MESSAGE(rex::read_file_sync({.path = path("bad.txt")}), rex::ValueError,
                       "'utf-8' codec can't decode byte 0xff in position 3: invalid start byte");
}

TEST_F(FileOpsTest, ReadFileWithEncodingAndErrors) {
  put(path("bad.txt"), "a\xE9z");
  auto read = [&](const char* encoding, const char* errors) {
    return rex::read_file_sync({.path = path("bad.txt"), .encoding = encoding, .errors = errors})
        .content;
  };
  EXPECT_EQ(read("latin-1", "strict"), "a\xC3\xA9z");
  EXPECT_EQ(read("utf-8", "replace"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(read("utf-8", "ignore"), "az");
  EXPECT_EQ(read("utf-8", "backslashreplace"), "a\\xe9z");
  EXPECT_EQ(rex::read_file_sync({.path = path("bad.txt"), .encoding = "latin1"}).content,
            "a\xC3\xA9z");
  EXPECT_EQ(rex::read_file_sync({.path = path("bad.txt"), .errors = "replace"}).content,
            "a\xEF\xBF\xBDz");
  EXPECT_THROW_MESSAGE(read("ebcdic-klingon", "strict"), rex::LookupError,
                       "unknown encoding: ebcdic-klingon");
}

TEST_F(FileOpsTest, ReadFileReadsNewlinesAsPythonsTextMode) {
  put(path("crlf.txt"), "one\r\ntwo\rthree\n");
  EXPECT_EQ(rex::read_file_sync({.path = path("crlf.txt")}).content, "one\ntwo\nthree\n");
}

TEST_F(FileOpsTest, ReadFileErrorsAreOsErrorsWithPythonsMessages) {
  const std::string missing = path("missing.txt");
  try {
    rex::read_file_sync({.path = missing});
    FAIL() << "no exception";
  } catch (const rex::FileNotFoundError& e) {
    EXPECT_EQ(std::string(e.what()), "[Errno 2] No such file or directory: '" + missing + "'");
    EXPECT_EQ(e.class_path(), "builtins.FileNotFoundError");
  }
  EXPECT_THROW_MESSAGE(rex::read_file_sync({.path = root_}), rex::IsADirectoryError,
                       "[Errno 21] Is a directory: '" + root_ + "'");
  put(path("file"), "x");
  EXPECT_THROW_MESSAGE(rex::read_file_sync({.path = path("file/x")}), rex::NotADirectoryError,
                       "[Errno 20] Not a directory: '" + path("file/x") + "'");
}

TEST_F(FileOpsTest, ReadFileWithoutPermission) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root may read any file";
  put(path("secret"), "x");
  ::chmod(path("secret").c_str(), 0);
  EXPECT_THROW_MESSAGE(rex::read_file_sync({.path = path("secret")}), rex::PermissionError,
                       "[Errno 13] Permission denied: '" + path("secret") + "'");
}

// --- write_file -------------------------------------------------------------------------------

TEST_F(FileOpsTest, WriteFileCreatesParentsAndOverwrites) {
  const std::string file = path("a/b/c/file.txt");
  rex::write_file_sync({.content = "first version, rather long\n", .path = file});
  EXPECT_EQ(get(file), "first version, rather long\n");
  rex::write_file_sync({.content = "second\n", .path = file});
  EXPECT_EQ(get(file), "second\n");
  EXPECT_EQ(names_in(path("a/b/c")), std::set<std::string>{"file.txt"});  // no temporary left
}

TEST_F(FileOpsTest, WriteFileWritesContentAsIs) {
  const std::string content = "caf\xC3\xA9\r\n\\xff\n";
  rex::write_file_sync({.content = content, .path = path("f")});
  EXPECT_EQ(get(path("f")), content);
}

TEST_F(FileOpsTest, WriteFileModes) {
  const mode_t umask_value = ::umask(0);
  ::umask(umask_value);
  rex::write_file_sync({.content = "new", .path = path("new")});
  EXPECT_EQ(mode_of(path("new")), 0666 & ~umask_value);

  put(path("script.sh"), "old");
  ::chmod(path("script.sh").c_str(), 0750);
  rex::write_file_sync({.content = "#!/bin/sh\n", .path = path("script.sh")});
  EXPECT_EQ(mode_of(path("script.sh")), 0750u);
  EXPECT_EQ(get(path("script.sh")), "#!/bin/sh\n");
}

TEST_F(FileOpsTest, WriteFileWritesThroughSymlinks) {
  put(path("real/target.txt"), "old");
  ASSERT_EQ(::symlink("real/target.txt", path("link").c_str()), 0);
  rex::write_file_sync({.content = "new", .path = path("link")});
  EXPECT_TRUE(fs::is_symlink(path("link")));
  EXPECT_EQ(get(path("real/target.txt")), "new");
}

TEST_F(FileOpsTest, WriteFileErrors) {
  fs::create_directories(path("dir"));
  EXPECT_THROW_MESSAGE(rex::write_file_sync({.content = "x", .path = path("dir")}),
                       rex::IsADirectoryError, "[Errno 21] Is a directory: '" + path("dir") + "'");
  put(path("plain"), "x");
  // As SWE-ReX's Path.parent.mkdir(parents=True, exist_ok=True) then write_text().
  EXPECT_THROW_MESSAGE(rex::write_file_sync({.content = "x", .path = path("plain/f")}),
                       rex::FileExistsError, "[Errno 17] File exists: '" + path("plain") + "'");
  EXPECT_THROW_MESSAGE(rex::write_file_sync({.content = "x", .path = path("plain/sub/f")}),
                       rex::NotADirectoryError,
                       "[Errno 20] Not a directory: '" + path("plain/sub") + "'");
  EXPECT_THROW_MESSAGE(rex::write_file_sync({.content = "x", .path = "/dev/full"}), rex::OSError,
                       "[Errno 28] No space left on device: '/dev/full'");
}

TEST_F(FileOpsTest, WriteFileFailureLeavesTheOldFileWhole) {
  const std::string file = path("keep.txt");
  put(file, "original content");
  // A file-size limit makes the write fail halfway, as a full disk would.
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  try {
    rex::write_file_sync({.content = std::string(100000, 'x'), .path = file});
    ADD_FAILURE() << "the write should fail";
  } catch (const rex::OSError& e) {
    EXPECT_EQ(std::string(e.what()), "[Errno 27] File too large: '" + file + "'");
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(get(file), "original content");
  EXPECT_EQ(names_in(root_), std::set<std::string>{"keep.txt"});
}

// --- upload: files and trees ------------------------------------------------------------------

TEST_F(FileOpsTest, UploadFileGoesToExactlyTheTarget) {
  put(path("src/tool"), "#!/bin/sh\necho hi\n");
  ::chmod(path("src/tool").c_str(), 0755);
  const std::string target = path("dst/deep/er/renamed");
  rex::upload_sync({.source_path = path("src/tool"), .target_path = target});
  EXPECT_EQ(get(target), "#!/bin/sh\necho hi\n");
  EXPECT_EQ(mode_of(target), 0755u);

  put(path("src/tool"), "v2");
  rex::upload_sync({.source_path = path("src/tool"), .target_path = target});
  EXPECT_EQ(get(target), "v2");

  fs::create_directories(path("a_dir"));
  EXPECT_THROW(rex::upload_sync({.source_path = path("src/tool"), .target_path = path("a_dir")}),
               rex::IsADirectoryError);
}

TEST_F(FileOpsTest, UploadMissingSource) {
  EXPECT_THROW_MESSAGE(rex::upload_sync({.source_path = path("nope"), .target_path = path("t")}),
                       rex::FileNotFoundError,
                       "[Errno 2] No such file or directory: '" + path("nope") + "'");
  EXPECT_THROW(
      rex::upload_sync({.source_path = path("nope"), .target_path = path("t"), .unzip = true}),
      rex::FileNotFoundError);
}

TEST_F(FileOpsTest, UploadDirectoryCopiesTheTreeIntoTheTarget) {
  put(path("src/a.txt"), "A");
  put(path("src/sub/b.sh"), "B");
  ::chmod(path("src/sub/b.sh").c_str(), 0751);
  put(path("src/sub/deeper/c"), "C");
  ::chmod(path("src/sub/deeper").c_str(), 0700);
  ASSERT_EQ(::symlink("sub/b.sh", path("src/link").c_str()), 0);
  ASSERT_EQ(::symlink("nowhere", path("src/dangling").c_str()), 0);
  const auto old_time = fs::file_time_type::clock::now() - std::chrono::hours(240);
  fs::last_write_time(path("src/a.txt"), old_time);
  put(path("dst/keep.txt"), "K");  // an existing target directory is merged into

  rex::upload_sync({.source_path = path("src"), .target_path = path("dst")});

  EXPECT_EQ(names_in(path("dst")),
            (std::set<std::string>{"a.txt", "dangling", "keep.txt", "link", "sub"}));
  EXPECT_EQ(get(path("dst/a.txt")), "A");
  EXPECT_EQ(get(path("dst/keep.txt")), "K");
  EXPECT_EQ(get(path("dst/sub/deeper/c")), "C");
  EXPECT_EQ(mode_of(path("dst/sub/b.sh")), 0751u);
  EXPECT_EQ(mode_of(path("dst/sub/deeper")), 0700u);
  EXPECT_TRUE(fs::is_symlink(path("dst/link")));
  EXPECT_EQ(fs::read_symlink(path("dst/link")), "sub/b.sh");
  EXPECT_EQ(get(path("dst/link")), "B");
  EXPECT_TRUE(fs::is_symlink(path("dst/dangling")));
  EXPECT_EQ(fs::last_write_time(path("dst/a.txt")), old_time);

  // Again, over the first copy: links and files are replaced, not followed.
  put(path("src/a.txt"), "A2");
  rex::upload_sync({.source_path = path("src"), .target_path = path("dst")});
  EXPECT_EQ(get(path("dst/a.txt")), "A2");
  EXPECT_EQ(fs::read_symlink(path("dst/link")), "sub/b.sh");
}

TEST_F(FileOpsTest, UploadDirectoryIntoItselfIsRefused) {
  put(path("src/a.txt"), "A");
  EXPECT_THROW(rex::upload_sync({.source_path = path("src"), .target_path = path("src/inner")}),
               rex::ValueError);
  EXPECT_FALSE(fs::exists(path("src/inner")));
}

// --- upload: zip archives ---------------------------------------------------------------------

struct ZipItem {
  std::string name{};
  char kind = 'f';     // 'f' file, 'd' directory, 'l' symlink
  std::string data{};  // file content or link target
  mode_t perm = 0644;
};

void write_zip(const std::string& file, const std::vector<ZipItem>& items) {
  archive* a = archive_write_new();
  ASSERT_EQ(archive_write_set_format_zip(a), ARCHIVE_OK);
  ASSERT_EQ(archive_write_open_filename(a, file.c_str()), ARCHIVE_OK);
  for (const auto& item : items) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, item.name.c_str());
    archive_entry_set_perm(entry, item.perm);
    archive_entry_set_mtime(entry, 1700000000, 0);
    if (item.kind == 'd') {
      archive_entry_set_filetype(entry, AE_IFDIR);
      archive_entry_set_size(entry, 0);
    } else if (item.kind == 'l') {
      archive_entry_set_filetype(entry, AE_IFLNK);
      archive_entry_set_symlink(entry, item.data.c_str());
      archive_entry_set_size(entry, 0);
    } else {
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

TEST_F(FileOpsTest, UnzipExtractsATreeIntoTheTarget) {
  write_zip(path("tree.zip"), {
                                  {.name = "d/", .kind = 'd', .perm = 0755},
                                  {.name = "d/f.txt", .data = "hello\n"},
                                  {.name = "d/e/g.txt", .data = "nested"},
                                  {.name = "run.sh", .data = "#!/bin/sh\n", .perm = 0755},
                                  {.name = "d/l", .kind = 'l', .data = "f.txt", .perm = 0777},
                                  {.name = "up", .kind = 'l', .data = "d/f.txt"},
                                  {.name = "d/e/back", .kind = 'l', .data = "../../run.sh"},
                              });
  const std::string target = path("out/nested");
  rex::upload_sync({.source_path = path("tree.zip"), .target_path = target, .unzip = true});
  EXPECT_EQ(get(target + "/d/f.txt"), "hello\n");
  EXPECT_EQ(get(target + "/d/e/g.txt"), "nested");
  EXPECT_EQ(get(target + "/run.sh"), "#!/bin/sh\n");
  EXPECT_EQ(mode_of(target + "/run.sh"), 0755u);
  EXPECT_EQ(mode_of(target + "/d/f.txt"), 0644u);
  EXPECT_EQ(fs::read_symlink(target + "/d/l"), "f.txt");
  EXPECT_EQ(get(target + "/d/l"), "hello\n");
  EXPECT_EQ(get(target + "/d/e/back"), "#!/bin/sh\n");
  EXPECT_EQ(get(target + "/up"), "hello\n");

  // Extracting again replaces what is there.
  rex::upload_sync({.source_path = path("tree.zip"), .target_path = target, .unzip = true});
  EXPECT_EQ(get(target + "/d/f.txt"), "hello\n");
}

// Every unsafe archive is refused as a whole: its harmless first entry is not extracted either.
class FileOpsUnsafeZipTest : public FileOpsTest {
 protected:
  void expect_refused(const std::vector<ZipItem>& unsafe, std::string_view entry_name) {
    std::vector<ZipItem> items{{.name = "harmless.txt", .data = "ok"}};
    items.insert(items.end(), unsafe.begin(), unsafe.end());
    write_zip(path("bad.zip"), items);
    const std::string target = path("target/inside");
    try {
      rex::upload_sync({.source_path = path("bad.zip"), .target_path = target, .unzip = true});
      ADD_FAILURE() << "an unsafe archive was extracted";
    } catch (const rex::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(rex::python_repr(entry_name)), std::string::npos)
          << e.what();
      EXPECT_EQ(e.extra_info().at("entry").as_string(), entry_name);
    }
    EXPECT_FALSE(fs::exists(target + "/harmless.txt"));
    EXPECT_EQ(names_in(root_), (std::set<std::string>{"bad.zip"}));
  }
};

TEST_F(FileOpsUnsafeZipTest, DotDotEntriesAreRefused) {
  expect_refused({{.name = "../evil.txt", .data = "x"}}, "../evil.txt");
  expect_refused({{.name = "a/../../evil.txt", .data = "x"}}, "a/../../evil.txt");
}

TEST_F(FileOpsUnsafeZipTest, AbsolutePathsAreRefused) {
  const std::string absolute = path("abs.txt");
  expect_refused({{.name = absolute, .data = "x"}}, absolute);
  EXPECT_FALSE(fs::exists(absolute));
}

TEST_F(FileOpsUnsafeZipTest, SymlinksPointingOutAreRefused) {
  expect_refused({{.name = "esc", .kind = 'l', .data = "../../.."}}, "esc");
  expect_refused({{.name = "abs", .kind = 'l', .data = "/etc"}}, "abs");
  expect_refused({{.name = "d/dd", .kind = 'l', .data = "x/../../.."}}, "d/dd");
}

TEST_F(FileOpsUnsafeZipTest, EntriesThroughSymlinksAreRefused) {
  // d/l points at d's parent (inside); d/l/m would then be a link at the top pointing out.
  expect_refused(
      {{.name = "d/l", .kind = 'l', .data = ".."}, {.name = "d/l/m", .kind = 'l', .data = ".."}},
      "d/l/m");
  expect_refused({{.name = "s/f.txt", .data = "x"}, {.name = "s", .kind = 'l', .data = "sub"}},
                 "s/f.txt");
}

TEST_F(FileOpsTest, UnzipDoesNotWriteThroughSymlinksAlreadyInTheTarget) {
  fs::create_directories(path("outside"));
  fs::create_directories(path("target"));
  ASSERT_EQ(::symlink(path("outside").c_str(), path("target/ext").c_str()), 0);
  write_zip(path("z.zip"), {{.name = "ext/f.txt", .data = "x"}});
  EXPECT_THROW(rex::upload_sync(
                   {.source_path = path("z.zip"), .target_path = path("target"), .unzip = true}),
               rex::ValueError);
  EXPECT_FALSE(fs::exists(path("outside/f.txt")));
}

TEST_F(FileOpsTest, UnzipOfSomethingElseIsAValueError) {
  put(path("not.zip"), "this is not an archive");
  EXPECT_THROW(
      rex::upload_sync({.source_path = path("not.zip"), .target_path = path("t"), .unzip = true}),
      rex::ValueError);
}

}  // namespace
