// The labels and rules every backend's garbage collection shares.
#include <rex/deployment/gc.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>

#include "core/clock.hpp"

namespace rex {

namespace {

std::string read_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0)
    return "unknown";
  return buf;
}

const std::string& boot_id() {
  static const std::string id = read_line("/proc/sys/kernel/random/boot_id");
  return id;
}

// Field 22 of /proc/PID/stat: the process's start time in clock ticks since boot. Together with
// the boot id it names one process, even after its pid is reused. Empty when there is no such
// process, or only its zombie.
std::string start_time_of(long pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat))
    return {};
  // The command name (field 2) may hold spaces and parentheses: skip to its last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos)
    return {};
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    // A zombie has ended; only its exit status waits to be collected.
    if (i == 3 && (field == "Z" || field == "X"))
      return {};
  }
  return field;
}

std::string get(const std::map<std::string, std::string>& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? std::string() : it->second;
}

std::string ago(std::int64_t seconds) {
  if (seconds < 120)
    return fmt::format("{} s", seconds);
  if (seconds < 7200)
    return fmt::format("{} min", seconds / 60);
  return fmt::format("{} h", seconds / 3600);
}

}  // namespace

std::map<std::string, std::string> owner_labels() {
  const long pid = static_cast<long>(::getpid());
  return {
      {std::string(labels::managed), "1"},
      {std::string(labels::owner_host), host_name()},
      {std::string(labels::owner_boot), boot_id()},
      {std::string(labels::owner_pid), std::to_string(pid)},
      {std::string(labels::owner_start), start_time_of(pid)},
  };
}

std::string gc_reason(const std::map<std::string, std::string>& l, std::int64_t now,
                      const GcOptions& options) {
  if (options.all)
    return "--all";
  const std::string expires = get(l, labels::expires);
  std::int64_t when = 0;
  if (!expires.empty() &&
      std::from_chars(expires.data(), expires.data() + expires.size(), when).ec == std::errc() &&
      when <= now)
    return fmt::format("expired {} ago", ago(now - when));
  if (!get(l, labels::gateway).empty())
    return {};
  if (get(l, labels::owner_host) != host_name())
    return {};  // another machine's process: only its expiry says it is gone
  if (get(l, labels::owner_boot) != boot_id())
    return "its owner ran before this machine rebooted";
  const std::string pid_text = get(l, labels::owner_pid);
  long pid = 0;
  if (std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid).ec != std::errc() ||
      pid <= 0)
    return "its owner label has no valid pid";
  const std::string start = start_time_of(pid);
  if (start.empty())
    return fmt::format("owner process {} is gone", pid);
  if (start != get(l, labels::owner_start))
    return fmt::format("owner process {} is gone (the pid now belongs to another process)", pid);
  return {};
}

std::string gc_keep_reason(const std::map<std::string, std::string>& l) {
  const std::string host = get(l, labels::owner_host);
  const std::string gateway = get(l, labels::gateway);
  if (!gateway.empty())
    return fmt::format("a sandbox of gateway {}, which removes it; or gc once it expires", gateway);
  if (host == host_name())
    return fmt::format("owner process {} is running", get(l, labels::owner_pid));
  return fmt::format("owned by a process on {}; removed once it expires", host);
}

asio::awaitable<GcReport> sweep_garbage(
    std::vector<GcCandidate> found, GcOptions options,
    std::function<asio::awaitable<void>(const GcCandidate&)> remove) {
  GcReport report;
  const std::int64_t now = rex::detail::unix_seconds();
  for (const auto& c : found) {
    GcEntry entry{c.id, c.name, gc_reason(c.labels, now, options)};
    if (entry.reason.empty()) {
      entry.reason = gc_keep_reason(c.labels);
      report.kept.push_back(std::move(entry));
      continue;
    }
    if (!options.dry_run) {
      std::string failure;
      try {
        co_await remove(c);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      if (!failure.empty()) {
        report.errors.push_back(fmt::format("{}: {}", c.name.empty() ? c.id : c.name, failure));
        continue;
      }
    }
    report.removed.push_back(std::move(entry));
  }
  co_return report;
}

}  // namespace rex
