// zip, tar and tar.gz extraction (rex/runtime/archive.hpp). The input is the archive; it is
// extracted into a fresh directory deep inside a private scratch tree, which is emptied after
// each input.
//
// Properties, checked independently of rex's own checks:
// - extraction succeeds or throws one of the protocol's exceptions (SwerexException), nothing
//   else;
// - nothing outside the target directory changes: the scratch tree around it stays as it was,
//   and no path that an entry names outside the target (absolute, or through "..", as libarchive
//   lists it) appears;
// - every symlink left in the target resolves inside it;
// - an archive refused for an unsafe entry (a ValueError naming the entry) wrote nothing.
#include <rex/protocol/exceptions.hpp>
#include <rex/runtime/archive.hpp>

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"

namespace {

namespace fs = std::filesystem;
using rex::fuzz::check;

// Six levels deep, so that entries with a few ".." land in the scratch tree, where a change
// is seen.
struct Layout {
  fs::path root = rex::fuzz::scratch_dir();
  fs::path archive = root / "archive.bin";
  fs::path target = root / "d1/d2/d3/d4/d5/d6/target";
  Layout() { fs::create_directories(target.parent_path()); }
};

const Layout& layout() {
  static const Layout l;
  return l;
}

bool exists_no_follow(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

bool inside(const fs::path& p, const fs::path& dir) {
  const auto rel = p.lexically_normal().lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// The scratch tree outside the target: each path with its type and size.
std::map<std::string, std::string> snapshot() {
  std::map<std::string, std::string> out;
  const auto& l = layout();
  for (auto it = fs::recursive_directory_iterator(l.root); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path& p = it->path();
    if (p == l.target) {
      it.disable_recursion_pending();
      continue;
    }
    if (p == l.archive)
      continue;
    const auto status = it->symlink_status();
    std::string what = std::to_string(static_cast<int>(status.type()));
    if (status.type() == fs::file_type::regular)
      what += ":" + std::to_string(it->file_size());
    out[p.string()] = what;
  }
  return out;
}

// Places outside the target that the archive's entries name, as libarchive lists them.
std::vector<fs::path> named_outside(const fs::path& archive_path) {
  std::vector<fs::path> out;
  archive* a = archive_read_new();
  archive_read_support_format_zip(a);
  archive_read_support_format_tar(a);
  archive_read_support_filter_gzip(a);
  const auto& target = layout().target;
  const auto note = [&](const char* name) {
    if (name == nullptr || *name == '\0')
      return;
    const fs::path p = name[0] == '/' ? fs::path(name) : target / name;
    if (!inside(p, target))
      out.push_back(p.lexically_normal());
  };
  if (archive_read_open_filename(a, archive_path.c_str(), 1 << 16) == ARCHIVE_OK) {
    archive_entry* entry = nullptr;
    while (true) {
      const int rc = archive_read_next_header(a, &entry);
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
        break;
      note(archive_entry_pathname(entry));
      note(archive_entry_hardlink(entry));
    }
  }
  archive_read_free(a);
  return out;
}

void check_symlinks_inside(const fs::path& target) {
  if (!fs::exists(fs::symlink_status(target)))
    return;
  for (auto it = fs::recursive_directory_iterator(target); it != fs::recursive_directory_iterator();
       ++it) {
    if (!it->is_symlink())
      continue;
    const fs::path link = fs::read_symlink(it->path());
    check(!link.is_absolute(), "no symlink in the target is absolute");
    check(inside(it->path().parent_path() / link, target) ||
              (it->path().parent_path() / link).lexically_normal() == target.lexically_normal(),
          "every symlink in the target resolves inside it");
  }
}

// Directories extracted without write or search permission must not stop the clean-up.
void remove_tree(const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!ec)
    return;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory() && !it->is_symlink())
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(dir, ec);
  check(!ec, "the target can be removed after each input");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& l = layout();
  {
    std::ofstream out(l.archive, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    check(out.good(), "the archive is written to the scratch directory");
  }
  const auto before = snapshot();
  std::vector<fs::path> watched;
  for (const auto& p : named_outside(l.archive)) {
    if (!exists_no_follow(p))
      watched.push_back(p);
  }

  bool refused_entry = false;
  try {
    rex::extract_archive(l.archive, l.target);
  } catch (const rex::ValueError& e) {
    refused_entry = e.extra_info().contains("entry");
  } catch (const rex::SwerexException&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    check(false, "extraction throws only the protocol's exceptions");
  }

  check(snapshot() == before, "nothing outside the target changed");
  for (const auto& p : watched)
    check(!exists_no_follow(p), "no entry was written outside the target");
  check_symlinks_inside(l.target);
  if (refused_entry)
    check(!exists_no_follow(l.target), "an archive refused for an entry wrote nothing");
  remove_tree(l.target);
  return 0;
}
