// StopSignals: how the rex commands take SIGINT, SIGTERM and SIGHUP. The first one asks the
// command to stop its work (wait() completes with it); a second one prints "rex: SIGINT again:
// exiting now" and stops the io_context, so the command returns at once (destructors still run:
// a local runtime kills its shells). A command can take SIGINT for itself instead (the shell
// interrupts its running command).
//
// Threading: construct, use and destroy on the io_context's thread; it must outlive io.run().
#pragma once

#include <rex/core/event.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <functional>
#include <string_view>

namespace rex::cli {

namespace asio = boost::asio;

/// "SIGINT", "SIGTERM", "SIGHUP".
std::string_view signal_name(int signo);

class StopSignals {
 public:
  /// Starts listening at once.
  explicit StopSignals(asio::io_context& io);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// While set, SIGINT calls this instead of asking to stop; an empty function undoes it.
  void route_interrupt(std::function<void()> handler);

  /// Completes with the first stop signal (at once when one came already), or with 0 after
  /// close().
  asio::awaitable<int> wait();

  /// The first stop signal; 0 while none came.
  int signal() const noexcept { return stop_signal_; }

  /// Stops listening; wait() completes. The command is done.
  void close();

 private:
  asio::awaitable<void> route();
  asio::io_context& io_;
  asio::signal_set signals_;
  Event stopped_;  // set when a signal asks to stop, or on close()
  std::function<void()> on_interrupt_;
  int stop_signal_ = 0;
  bool closed_ = false;
};

}  // namespace rex::cli
