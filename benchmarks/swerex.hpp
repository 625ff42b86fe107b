// SWE-ReX measured in the same run as rex: its own Python code (swe-rex from the environment
// REX_SWEREX_ENV, tests/swerex/requirements.txt) driven through benchmarks/swerex_driver.py,
// which uses it as a library. A benchmark that cannot run it (no environment, SWE-ReX does not
// import, --no-swerex) says why and measures the rest.
//
// Threading: call a SwerexDriver from one thread; each call blocks until the driver answers.
#pragma once

#include <fmt/core.h>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "child_server.hpp"

#ifndef REX_SWEREX_PYTHON
#error "REX_SWEREX_PYTHON must name the SWE-ReX environment's Python (set by CMake)"
#endif
#ifndef REX_SWEREX_DRIVER
#error "REX_SWEREX_DRIVER must name benchmarks/swerex_driver.py (set by CMake)"
#endif

extern char** environ;

namespace rex::bench {

/// Where SWE-ReX's Python and the driver script are, or why SWE-ReX is not measured.
struct SwerexSetup {
  std::string python = REX_SWEREX_PYTHON;
  std::string driver = REX_SWEREX_DRIVER;
  std::string unavailable;  // empty: measure it

  bool usable() const { return unavailable.empty(); }
};

/// Checks what can be checked without starting Python (the driver reports whether SWE-ReX
/// imports). `wanted` false: --no-swerex.
inline SwerexSetup swerex_setup(std::string python, bool wanted) {
  SwerexSetup s;
  s.python = std::move(python);
  if (!wanted) {
    s.unavailable = "--no-swerex";
  } else if (::access(s.python.c_str(), X_OK) != 0) {
    s.unavailable = fmt::format(
        "no SWE-ReX environment: {} is not an executable Python (./scripts/test.sh builds it: "
        "scripts/common.sh rex_python_env; or pass --swerex-python PATH)",
        s.python);
  } else if (::access(s.driver.c_str(), R_OK) != 0) {
    s.unavailable = fmt::format("the driver script {} cannot be read", s.driver);
  }
  return s;
}

/// One `PYTHON swerex_driver.py MODE` process ("local" or "client"): one JSON request per line
/// on its stdin, one JSON answer per line on its stdout; its stderr is ours.
class SwerexDriver {
 public:
  /// Starts the driver and waits for its ready line. Throws std::runtime_error saying why
  /// SWE-ReX cannot be measured.
  SwerexDriver(const SwerexSetup& setup, const std::string& mode) {
    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
      throw_errno("pipe2");
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      throw_errno("pipe2");
    }
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    ::posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<std::string> argv{setup.python, setup.driver, mode};
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, setup.python.c_str(), &fa, nullptr, args.data(), environ);
    ::posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      close_pipes();
      throw std::system_error(rc, std::generic_category(), "cannot start " + setup.python);
    }
    // Importing SWE-ReX (FastAPI, pydantic, aiohttp) takes seconds on a busy machine.
    boost::json::object ready;
    try {
      ready = read_answer(std::chrono::seconds(120));
    } catch (...) {
      kill_now();
      throw;
    }
    if (ready["ready"] != true) {
      kill_now();
      const auto* error = ready.if_contains("error");
      throw std::runtime_error(
          fmt::format("SWE-ReX does not import with {}: {}", setup.python,
                      error != nullptr ? boost::json::serialize(*error) : std::string("?")));
    }
    description_ = fmt::format("swe-rex {} on Python {}", string_of(ready, "swerex_version"),
                               string_of(ready, "python"));
  }
  ~SwerexDriver() { finish(); }
  SwerexDriver(const SwerexDriver&) = delete;
  SwerexDriver& operator=(const SwerexDriver&) = delete;

  /// "swe-rex 1.4.0 on Python 3.11.7".
  const std::string& description() const { return description_; }

  /// One request and its answer. Throws when the driver reports an error, dies, or takes
  /// longer than `limit`.
  boost::json::object call(const boost::json::object& request,
                           std::chrono::seconds limit = std::chrono::seconds(600)) {
    std::string line = boost::json::serialize(request) + "\n";
    std::string_view rest = line;
    while (!rest.empty()) {
      const ssize_t n = ::write(to_, rest.data(), rest.size());
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        throw std::runtime_error("the SWE-ReX driver exited (writing a request failed)");
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    boost::json::object answer = read_answer(limit);
    if (answer["ok"] != true) {
      throw std::runtime_error(fmt::format("SWE-ReX {}: {}", boost::json::serialize(request),
                                           string_of(answer, "error")));
    }
    return answer;
  }

  /// call(), and the times of its calls ("samples_ms").
  std::vector<double> samples(const boost::json::object& request) {
    return samples_of(call(request));
  }

  static std::vector<double> samples_of(const boost::json::object& answer,
                                        std::string_view field = "samples_ms") {
    std::vector<double> v;
    for (const auto& x : answer.at(field).as_array())
      v.push_back(x.to_number<double>());
    return v;
  }

  /// Closes its stdin (it then closes its sessions and exits) and reaps it; killed after 30 s.
  void finish() {
    if (to_ >= 0) {
      ::close(to_);
      to_ = -1;
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (pid_ > 0 && Clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill_now();
  }

 private:
  static std::string string_of(const boost::json::object& o, std::string_view key) {
    const auto* v = o.if_contains(key);
    if (v == nullptr)
      return "?";
    return v->is_string() ? std::string(v->as_string()) : boost::json::serialize(*v);
  }

  boost::json::object read_answer(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (true) {
      if (const std::size_t eol = buffer_.find('\n'); eol != std::string::npos) {
        const std::string line = buffer_.substr(0, eol);
        buffer_.erase(0, eol + 1);
        boost::system::error_code ec;
        boost::json::value v = boost::json::parse(line, ec);
        if (ec || !v.is_object())
          throw std::runtime_error("the SWE-ReX driver answered something else than JSON: " + line);
        return std::move(v.as_object());
      }
      const ReadOutcome got = read_some_until(from_, deadline, buffer_);
      if (got == ReadOutcome::timeout)
        throw std::runtime_error(
            fmt::format("the SWE-ReX driver did not answer within {} s", limit.count()));
      if (got == ReadOutcome::eof)
        throw std::runtime_error("the SWE-ReX driver exited (its stderr says why)");
    }
  }

  void close_pipes() {
    for (int* fd : {&to_, &from_}) {
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
    }
  }

  void kill_now() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    close_pipes();
  }

  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  std::string buffer_;
  std::string description_;
};

/// SWE-ReX's part of one figure: how many samples it takes (0: not measured), and the driver
/// whose operations it calls, if any. SWE-ReX's failures are reported on the figure and not
/// counted as rex's; the first one ends SWE-ReX's part of that figure.
class SwerexPart {
 public:
  SwerexPart() = default;
  explicit SwerexPart(int samples, SwerexDriver* driver = nullptr)
      : samples_(samples), driver_(driver) {}

  bool active() const { return samples_ > 0 && error_.empty(); }
  int samples() const { return samples_; }
  SwerexDriver& driver() { return *driver_; }

  /// Runs f() unless SWE-ReX is off or failed before; keeps the error of a failure.
  template <class F>
  bool attempt(F&& f) {
    if (!active())
      return false;
    try {
      f();
      return true;
    } catch (const std::exception& e) {
      error_ = e.what();
      return false;
    }
  }

  /// n calls of the driver's operation `op`, timed one by one, appended to `out`.
  void run(std::string_view op, int n, std::vector<double>& out) {
    attempt([&] {
      const auto v = driver_->samples({{"op", op}, {"n", n}});
      out.insert(out.end(), v.begin(), v.end());
    });
  }

  /// SWE-ReX's figure on r, its p50 against rex's `rex_p50` (lower is better), with a note;
  /// or, after a failure, the error. Returns the figure, if any, for a figure to adjust.
  SwerexFigure* report(Result& r, const std::vector<double>& samples, double rex_p50) {
    if (!error_.empty()) {
      r.note += "; SWE-ReX failed: " + error_;
      r.extra["swerex_error"] = error_;
      return nullptr;
    }
    if (samples_ <= 0 || samples.empty())
      return nullptr;
    r.swerex = swerex_figure(samples, rex_p50);
    r.note += fmt::format("; SWE-ReX p50 {:.1f} ms", r.swerex->stats.p50);
    return &*r.swerex;
  }

 private:
  int samples_ = 0;
  SwerexDriver* driver_ = nullptr;
  std::string error_;
};

/// SWE-ReX's own server (swerex.server:main, what `swerex-remote` runs: FastAPI on uvicorn, one
/// LocalRuntime) on 127.0.0.1 with a port the system picks.
inline std::unique_ptr<ChildServer> start_swerex_server(const SwerexSetup& setup,
                                                        std::string_view token) {
  ChildServerOptions o;
  o.ready_marker = "Uvicorn running on http://";
  o.capture_stderr = true;  // uvicorn logs there
  o.start_limit = std::chrono::seconds(120);
  o.sigterm_death_is_clean = true;
  return std::make_unique<ChildServer>(
      "SWE-ReX server",
      std::vector<std::string>{setup.python, setup.driver, "server", "--host", "127.0.0.1",
                               "--port", "0", "--auth-token", std::string(token)},
      o);
}

}  // namespace rex::bench
