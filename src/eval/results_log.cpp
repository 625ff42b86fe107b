#include <rex/eval/results_log.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

namespace rex {

namespace json = boost::json;

namespace {

std::string errno_text(int error) {
  return std::generic_category().message(error);
}

// Opens (creating) and locks the file; the lock keeps a second evaluation from writing into it.
int open_locked(const std::string& path, int extra_flags) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | extra_flags, 0644);
  if (fd < 0)
    throw ResultsLogError(fmt::format("cannot open {}: {}", path, errno_text(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK)
      throw ResultsLogError(fmt::format(
          "{} is in use by another rex eval (one evaluation per output directory)", path));
    throw ResultsLogError(fmt::format("cannot lock {}: {}", path, errno_text(error)));
  }
  return fd;
}

void write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw ResultsLogError(fmt::format("cannot write {}: {}", path, errno_text(errno)));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

void sync(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0)
    throw ResultsLogError(fmt::format("cannot flush {} to disk: {}", path, errno_text(errno)));
}

std::string read_all(int fd, const std::string& path) {
  std::string content;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw ResultsLogError(fmt::format("cannot read {}: {}", path, errno_text(errno)));
    }
    if (n == 0)
      return content;
    content.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace

ResultsLog::ResultsLog(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path_).parent_path();
  if (!dir.empty())
    std::filesystem::create_directories(dir, ec);
  if (ec)
    throw ResultsLogError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  fd_ = open_locked(path_, O_APPEND);
  try {
    load();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ResultsLog::~ResultsLog() {
  if (fd_ >= 0)
    ::close(fd_);
}

void ResultsLog::load() {
  const std::string content = read_all(fd_, path_);
  // Complete lines end with '\n'; a kill in the middle of append() leaves a last line without
  // one (or, rarely, a complete line that does not parse).
  std::size_t good_end = 0;  // just after the last line kept
  std::size_t pos = 0;
  int number = 0;
  while (pos < content.size()) {
    ++number;
    const std::size_t newline = content.find('\n', pos);
    if (newline == std::string::npos)
      break;  // torn: cut below
    const std::string_view line(content.data() + pos, newline - pos);
    const bool last = newline + 1 == content.size();
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      try {
        EvalResult record = eval_result_from_json(json::parse(line));
        remember(std::move(record));
      } catch (const std::exception& e) {
        if (last)
          break;  // torn: cut below
        throw ResultsLogError(fmt::format(
            "{}:{}: not a result record ({}); remove or fix that line", path_, number, e.what()));
      }
    }
    pos = newline + 1;
    good_end = pos;
  }
  if (good_end == content.size())
    return;
  repaired_bytes_ = content.size() - good_end;
  if (::ftruncate(fd_, static_cast<off_t>(good_end)) != 0)
    throw ResultsLogError(
        fmt::format("cannot cut the torn last line off {}: {}", path_, errno_text(errno)));
  sync(fd_, path_);
}

void ResultsLog::append(const EvalResult& result) {
  std::string line = to_json_line(result);
  line += '\n';
  struct stat before {};
  ::fstat(fd_, &before);
  try {
    write_all(fd_, line, path_);  // one write() for a line of any usual size
    sync(fd_, path_);
  } catch (...) {
    // Leave no half line for the next append to run into.
    if (::ftruncate(fd_, before.st_size) == 0)
      ::fdatasync(fd_);
    throw;
  }
  remember(result);
}

void ResultsLog::remember(EvalResult record) {
  std::string id = record.id;
  if (records_.insert_or_assign(id, std::move(record)).second)
    order_.push_back(std::move(id));
}

std::size_t ResultsLog::remove_if(const std::function<bool(const EvalResult&)>& drop) {
  std::string content;
  std::size_t removed = 0;
  for (const auto& id : order_) {
    const EvalResult& record = records_.at(id);
    if (drop(record)) {
      ++removed;
      continue;
    }
    content += to_json_line(record);
    content += '\n';
  }
  if (removed == 0)
    return 0;
  // A new file renamed over the old one: a crash leaves one or the other, whole.
  const std::string temp = path_ + ".rewrite";
  ::unlink(temp.c_str());
  const int fd = open_locked(temp, O_TRUNC);
  try {
    write_all(fd, content, temp);
    if (::fsync(fd) != 0)
      throw ResultsLogError(fmt::format("cannot flush {}: {}", temp, errno_text(errno)));
    if (::rename(temp.c_str(), path_.c_str()) != 0)
      throw ResultsLogError(
          fmt::format("cannot replace {} with {}: {}", path_, temp, errno_text(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  const auto dir = std::filesystem::path(path_).parent_path();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);  // the rename itself
    ::close(dir_fd);
  }
  // The new file's descriptor already holds its lock; it becomes the one appended to.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_APPEND);
  ::close(fd_);
  fd_ = fd;
  std::vector<std::string> kept;
  for (auto& id : order_) {
    if (drop(records_.at(id)))
      records_.erase(id);
    else
      kept.push_back(std::move(id));
  }
  order_ = std::move(kept);
  return removed;
}

}  // namespace rex
