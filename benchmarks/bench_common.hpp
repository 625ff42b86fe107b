// What every rex benchmark shares: timing, nearest-rank statistics, process figures, driving
// coroutines from main, and the results table (one row per figure: rex against its floor) with
// its JSON form. Header-only; each benchmark is one translation unit.
#pragma once

#include <fmt/core.h>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline double ms_since(Clock::time_point t0) {
  return ms_between(t0, Clock::now());
}

// ---------------------------------------------------------------------------------------------
// Statistics

struct Stats {
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

/// Nearest-rank percentiles of the samples (all zero when there are none).
inline Stats stats_of(std::vector<double> samples) {
  if (samples.empty())
    return {};
  std::sort(samples.begin(), samples.end());
  auto rank = [&](double q) {
    const auto n = static_cast<double>(samples.size());
    const auto i = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n))) - 1;
    return samples[std::min(i, samples.size() - 1)];
  };
  return {rank(0.50), rank(0.90), rank(0.99), samples.back()};
}

inline double median(std::vector<double> v) {
  return stats_of(std::move(v)).p50;
}

/// How many of `total` samples block `b` of `blocks` takes, so that a side with fewer samples
/// than another is spread evenly over the other's blocks (and sums to `total`).
inline int spread(int b, int blocks, int total) {
  if (blocks <= 0)
    return 0;
  const auto upto = [&](int k) {
    return static_cast<int>(static_cast<long long>(k) * total / blocks);
  };
  return upto(b + 1) - upto(b);
}

// ---------------------------------------------------------------------------------------------
// Process figures

/// A number field of /proc/PID/status ("VmRSS:" in KiB, "Threads:"), -1 when it cannot be read.
inline long status_field(pid_t pid, std::string_view field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with(field))
      return std::strtol(line.c_str() + field.size(), nullptr, 10);
  }
  return -1;
}

/// Resident memory of a process (this one by default), in KiB.
inline long vm_rss_kib(pid_t pid = ::getpid()) {
  return status_field(pid, "VmRSS:");
}

/// The most resident memory this process has had so far, in KiB (getrusage's ru_maxrss).
inline long peak_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/// CPU time (user + system, including the children they reaped) of every process on this machine
/// whose name (/proc/PID/stat's comm) is one of `names`, in milliseconds; 0 when none can be
/// read. Daemons' CPU per unit of work is much steadier on a busy machine than wall times.
inline double cpu_ms_of(std::initializer_list<std::string_view> names) {
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  double total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream stat_file(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat_file, line))
      continue;
    const auto open = line.find('(');
    const auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 > line.size())
      continue;
    const std::string_view comm(line.data() + open + 1, close - open - 1);
    if (std::find(names.begin(), names.end(), comm) == names.end())
      continue;
    std::istringstream fields(line.substr(close + 2));
    std::vector<std::string> values;
    for (std::string field; fields >> field;)
      values.push_back(field);
    // After the command: state is field 3 of stat(5), utime..cstime are 14..17.
    if (values.size() < 15)
      continue;
    for (std::size_t i = 11; i <= 14; ++i)
      total += std::strtod(values[i].c_str(), nullptr);
  }
  return total * 1000.0 / static_cast<double>(ticks);
}

/// Many sessions, connections or containers need many descriptors: the soft limit goes up to
/// the hard one.
inline void raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

inline std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// ---------------------------------------------------------------------------------------------
// Driving coroutines from main: run_on() for one, run_all() for many at once. Both turn the
// io_context with run_one() only until their work is done, so floors measured in between run
// with the io_context idle.

/// Turns the io_context until `done`. An io_context that ran out of work before stops itself;
/// it is restarted. Running out of work with `done` still false means a coroutine waits for
/// something nothing will ever deliver: an error rather than a spin.
inline void turn_until(asio::io_context& io, const bool& done) {
  if (io.stopped())
    io.restart();
  while (!done) {
    if (io.run_one() == 0 && !done)
      throw std::logic_error("the io_context ran out of work before the coroutine finished");
  }
}

/// Runs one coroutine to completion and returns its value (rethrows its exception).
template <class T>
T run_on(asio::io_context& io, asio::awaitable<T> op) {
  std::exception_ptr error;
  std::optional<T> result;
  bool done = false;
  asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T value) {
    error = e;
    if (!e)
      result.emplace(std::move(value));
    done = true;
  });
  turn_until(io, done);
  if (error)
    std::rethrow_exception(error);
  return std::move(*result);
}

inline void run_on(asio::io_context& io, asio::awaitable<void> op) {
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(io, std::move(op), [&](std::exception_ptr e) {
    error = e;
    done = true;
  });
  turn_until(io, done);
  if (error)
    std::rethrow_exception(error);
}

struct BatchResult {
  int ok = 0;
  int failed = 0;
  std::string first_error;
};

/// Runs make(i) for i in [0, n) all at once; each is an awaitable<int>.
template <class MakeOp>
BatchResult run_all(asio::io_context& io, int n, MakeOp make) {
  BatchResult r;
  int done = 0;
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(io, make(i), [&](std::exception_ptr e, int) {
      ++done;
      if (!e) {
        ++r.ok;
        return;
      }
      ++r.failed;
      if (r.first_error.empty())
        r.first_error = describe(e);
    });
  }
  if (io.stopped())
    io.restart();
  while (done < n) {
    if (io.run_one() == 0 && done < n)
      throw std::logic_error("the io_context ran out of work before the coroutines finished");
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Results: one row per figure

enum class Verdict { pass, miss, info };

/// The same figure measured on SWE-ReX's own code, in the same run.
struct SwerexFigure {
  Stats stats;              // milliseconds
  double ratio = 0;         // rex / SWE-ReX, in the figure's own sense (rates for a rate)
  std::size_t samples = 0;  // SWE-ReX's (fewer than rex's: it is slow)
};

struct Result {
  std::string name;
  Stats rex;                     // milliseconds
  double floor_p50 = 0;          // milliseconds
  double ratio = 0;              // rex / floor unless the figure says otherwise
  std::optional<double> target;  // none: reported only
  bool higher_is_better = false;
  std::string target_text;  // empty: "<= 2x" (or ">= 2x") made from target
  Verdict verdict = Verdict::info;
  std::string note;
  std::optional<SwerexFigure> swerex;
  boost::json::object extra;
};

/// SWE-ReX's side of a figure where lower is better, against rex's p50.
inline SwerexFigure swerex_figure(const std::vector<double>& samples, double rex_p50) {
  SwerexFigure f;
  f.stats = stats_of(samples);
  f.samples = samples.size();
  f.ratio = f.stats.p50 > 0 ? rex_p50 / f.stats.p50 : 0;
  return f;
}

/// A ratio with two significant digits however small (rex / SWE-ReX is often 0.0003).
inline std::string ratio_text(double ratio) {
  if (ratio >= 100)
    return fmt::format("{:.0f}", ratio);
  if (ratio >= 0.1)
    return fmt::format("{:.2f}", ratio);
  return fmt::format("{:.2g}", ratio);
}

inline Verdict judge(double ratio, double target, bool higher_is_better) {
  const bool ok = higher_is_better ? ratio >= target : ratio <= target;
  return ok ? Verdict::pass : Verdict::miss;
}

/// A rex-against-floor figure where lower is better, judged on the p50s.
inline Result ratio_result(std::string name, const std::vector<double>& rex_samples,
                           const std::vector<double>& floor_samples, double target) {
  Result r;
  r.name = std::move(name);
  r.rex = stats_of(rex_samples);
  const Stats floor = stats_of(floor_samples);
  r.floor_p50 = floor.p50;
  r.ratio = floor.p50 > 0 ? r.rex.p50 / floor.p50 : 0;
  r.target = target;
  r.verdict = judge(r.ratio, target, false);
  r.extra["samples"] = rex_samples.size();
  r.extra["floor_p99_ms"] = floor.p99;
  return r;
}

inline std::string verdict_text(Verdict v) {
  switch (v) {
    case Verdict::pass:
      return "PASS";
    case Verdict::miss:
      return "MISS";
    case Verdict::info:
      break;
  }
  return "-";
}

inline std::string target_text(const Result& r) {
  if (!r.target_text.empty())
    return r.target_text;
  if (!r.target)
    return "-";
  return fmt::format("{} {}x", r.higher_is_better ? ">=" : "<=", *r.target);
}

/// The table; SWE-ReX's p50 and rex / SWE-ReX get columns when some figure has them.
inline void print_table(std::FILE* out, const std::vector<Result>& results) {
  std::size_t width = 6;
  for (const auto& r : results)
    width = std::max(width, r.name.size());
  const bool swerex = std::any_of(results.begin(), results.end(),
                                  [](const Result& r) { return r.swerex.has_value(); });
  fmt::print(out, "{:<{}} {:>10} {:>10} {:>12} {:>7} ", "figure", width, "rex p50 ms", "rex p99 ms",
             "floor p50 ms", "ratio");
  if (swerex)
    fmt::print(out, "{:>14} {:>11} ", "SWE-ReX p50 ms", "rex/SWE-ReX");
  fmt::print(out, "{:>10} {:>6}  {}\n", "target", "result", "notes");
  for (const auto& r : results) {
    fmt::print(out, "{:<{}} {:>10.3f} {:>10.3f} {:>12.3f} {:>7.2f} ", r.name, width, r.rex.p50,
               r.rex.p99, r.floor_p50, r.ratio);
    if (swerex && r.swerex)
      fmt::print(out, "{:>14.3f} {:>11} ", r.swerex->stats.p50, ratio_text(r.swerex->ratio));
    else if (swerex)
      fmt::print(out, "{:>14} {:>11} ", "-", "-");
    fmt::print(out, "{:>10} {:>6}  {}\n", target_text(r), verdict_text(r.verdict), r.note);
  }
  std::fflush(out);
}

/// One JSON object per figure on stdout.
inline void print_json(const std::vector<Result>& results) {
  for (const auto& r : results) {
    boost::json::object o;
    o["name"] = r.name;
    o["p50_ms"] = r.rex.p50;
    o["p99_ms"] = r.rex.p99;
    o["floor_p50_ms"] = r.floor_p50;
    o["ratio"] = r.ratio;
    if (r.target) {
      o["target"] = *r.target;
    } else {
      o["target"] = nullptr;
    }
    o["target_text"] = target_text(r);
    o["result"] = verdict_text(r.verdict);
    o["note"] = r.note;
    if (r.swerex) {
      o["swerex_p50_ms"] = r.swerex->stats.p50;
      o["swerex_p99_ms"] = r.swerex->stats.p99;
      o["swerex_ratio"] = r.swerex->ratio;
      o["swerex_samples"] = r.swerex->samples;
    }
    for (const auto& [k, v] : r.extra)
      o[k] = v;
    fmt::print("{}\n", boost::json::serialize(o));
  }
  std::fflush(stdout);
}

/// Whether any figure missed its target.
inline bool any_missed(const std::vector<Result>& results) {
  return std::any_of(results.begin(), results.end(),
                     [](const Result& r) { return r.verdict == Verdict::miss; });
}

}  // namespace rex::bench
