#include <rex/core/event.hpp>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace rex {

Event::Event(asio::any_io_executor executor)
    : timer_(std::move(executor), asio::steady_timer::time_point::max()) {}

void Event::set() {
  set_ = true;
  timer_.cancel();
}

asio::awaitable<bool> Event::wait() {
  if (set_)
    co_return true;
  boost::system::error_code ec;
  co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return set_;
}

}  // namespace rex
