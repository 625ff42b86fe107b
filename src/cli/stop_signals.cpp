#include "stop_signals.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>

#include <iostream>

namespace rex::cli {

std::string_view signal_name(int signo) {
  switch (signo) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
  }
  return "signal";
}

StopSignals::StopSignals(asio::io_context& io)
    : io_(io), signals_(io, SIGINT, SIGTERM, SIGHUP), stopped_(io.get_executor()) {
  // route() catches everything it can meet; it ends when close() cancels the signal set.
  asio::co_spawn(io_, route(), asio::detached);
}

void StopSignals::route_interrupt(std::function<void()> handler) {
  on_interrupt_ = std::move(handler);
}

asio::awaitable<void> StopSignals::route() {
  for (;;) {
    auto [ec, signo] = co_await signals_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec)
      co_return;
    if (signo == SIGINT && on_interrupt_) {
      on_interrupt_();
      continue;
    }
    if (stop_signal_ == 0) {
      stop_signal_ = signo;
      stopped_.set();
      continue;
    }
    std::cerr << "rex: " << signal_name(signo) << " again: exiting now\n";
    io_.stop();
    co_return;
  }
}

asio::awaitable<int> StopSignals::wait() {
  if (stop_signal_ == 0 && !closed_)
    co_await stopped_.wait();
  co_return stop_signal_;
}

void StopSignals::close() {
  closed_ = true;
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  stopped_.set();
}

}  // namespace rex::cli
