// Live progress of many instances on stderr, for `rex eval` and `rex swebench`: on a terminal
// one bar redrawn in place ("[#####.....] 12/40  failed 2  running 4  3.1/s  ETA 9.2s") with a
// line above it for each instance that did not pass; otherwise one line per finished instance.
#pragma once

#include <fmt/format.h>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

namespace rex::cli {

/// "850ms", "2.4s", "3:05", "1:02:03".
inline std::string format_duration(double seconds) {
  if (seconds < 1)
    return fmt::format("{}ms", static_cast<long>(seconds * 1000 + 0.5));
  if (seconds < 60)
    return fmt::format("{:.1f}s", seconds);
  const auto total = static_cast<long>(seconds + 0.5);
  if (total < 3600)
    return fmt::format("{}:{:02}", total / 60, total % 60);
  return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

// Progress on stderr: a bar redrawn in place on a terminal, a line per finished instance
// otherwise. Runs on the io_context's thread.
class Progress {
  using Clock = std::chrono::steady_clock;

 public:
  Progress(std::size_t total, std::function<std::size_t()> running, bool quiet,
           std::string not_passed_label = "failed")
      : running_(std::move(running)),
        not_passed_label_(std::move(not_passed_label)),
        quiet_(quiet),
        tty_(::isatty(STDERR_FILENO) == 1 && !is_dumb_terminal()),
        total_(total),
        t0_(Clock::now()) {}

  bool live() const noexcept { return tty_ && !quiet_; }

  void started() { draw(); }

  /// An instance finished; `text` says which and how ("add passed 2.4s").
  void finished(bool ok, const std::string& text) {
    ++done_;
    if (!ok)
      ++not_passed_;
    if (quiet_)
      return;
    if (tty_) {
      // Instances that did not pass get a line of their own above the bar.
      if (!ok)
        line(text);
      draw();
      return;
    }
    fmt::print(stderr, "[{}/{}] {}\n", done_, total_, text);
    std::fflush(stderr);
  }

  /// A message line, above the bar on a terminal.
  void line(const std::string& text) {
    if (live())
      fmt::print(stderr, "\r\033[K");
    fmt::print(stderr, "{}\n", text);
    draw();
  }

  void draw() {
    if (!live())
      return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
    std::string eta = "-";
    if (done_ > 0 && rate > 0)
      eta = format_duration(static_cast<double>(total_ - done_) / rate);
    const std::string tail =
        fmt::format(" {}/{}  {} {}  running {}  {:.1f}/s  ETA {}", done_, total_, not_passed_label_,
                    not_passed_, running_(), rate, eta);
    const std::size_t columns = terminal_columns();
    std::size_t width =
        columns > tail.size() + 12 ? std::min<std::size_t>(30, columns - tail.size() - 3) : 0;
    std::string bar;
    if (width >= 5) {
      const std::size_t filled = total_ == 0 ? width : width * done_ / total_;
      bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
    }
    std::string text = bar + tail;
    if (text.size() >= columns)
      text.resize(columns - 1);
    fmt::print(stderr, "\r\033[K{}", text);
    std::fflush(stderr);
    drawn_ = true;
  }

  /// Leaves the line of the bar, so what follows starts on a line of its own.
  void end() {
    if (live() && drawn_) {
      draw();
      fmt::print(stderr, "\n");
      std::fflush(stderr);
    }
    drawn_ = false;
  }

 private:
  static bool is_dumb_terminal() {
    const char* term = std::getenv("TERM");
    return term != nullptr && std::string_view(term) == "dumb";
  }
  static std::size_t terminal_columns() {
    winsize size{};
    if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col >= 20)
      return size.ws_col;
    return 80;
  }

  std::function<std::size_t()> running_;
  std::string not_passed_label_;
  bool quiet_;
  bool tty_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::size_t not_passed_ = 0;
  Clock::time_point t0_;
  bool drawn_ = false;
};

/// Redraws the bar twice a second until `done`, so rate and ETA move while instances run long.
inline boost::asio::awaitable<void> redraw_until(Progress& progress, const bool& done) {
  namespace asio = boost::asio;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!done) {
    timer.expires_after(std::chrono::milliseconds(500));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!done)
      progress.draw();
  }
}

}  // namespace rex::cli
