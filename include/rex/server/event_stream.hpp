// EventStream: the Server-Sent Events of one streamed answer (or the pieces of another chunked
// stream), from the coroutine that produces them (a route's producer) to the connection that
// writes them.
//
// The producer may outlive the connection (a client that leaves does not stop a command): the
// stream is shared, and events sent after the connection ended are dropped with it.
// Threading: one thread (the service's io_context).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <rex/core/event.hpp>

#include <deque>
#include <functional>
#include <string>
#include <string_view>

namespace rex::server {

class EventStream {
 public:
  explicit EventStream(boost::asio::any_io_executor ex) : wake_(ex), gone_(ex) {}

  // The producer's side.
  /// Queues one event (encoded by rex/http/sse.hpp) for the connection; `id` is the event's
  /// id field (what a client resumes from with Last-Event-ID), none when empty.
  void send(std::string_view name, std::string_view data, std::string_view id = {});
  /// Queues bytes as they are: the producer of a stream that is not Server-Sent Events (its
  /// route's content type says what) writes only these.
  void send_bytes(std::string bytes) {
    if (closed_)
      return;
    events_.push_back(std::move(bytes));
    wake_.set();
  }
  /// Sees every event sent (its name and data) as it is queued: how a proxy keeps a record of
  /// what went by.
  void observe(std::function<void(std::string_view name, std::string_view data)> observer) {
    observer_ = std::move(observer);
  }
  /// Queues a comment line, which clients ignore: a stream that is otherwise quiet finds out
  /// this way that its client has left.
  void ping() {
    events_.emplace_back(":\n\n");
    wake_.set();
  }
  /// The connection has ended (the client left or the answer was written): a producer that
  /// waits for something to send stops when it sees this.
  bool closed() const noexcept { return closed_; }
  /// Returns once the connection has ended: for a producer that must stop as soon as its
  /// client leaves, even while it has nothing to send (an attached terminal). The connection
  /// then watches its client between events too (a little work per wake-up, so only on ask).
  boost::asio::awaitable<void> wait_closed() {
    watched_ = true;
    co_await gone_.wait();
  }
  /// Whether a producer waits for the connection's end (wait_closed).
  bool watched() const noexcept { return watched_; }
  /// No more events come; the connection ends the answer once the queue is written.
  void finish() {
    finished_ = true;
    wake_.set();
  }

  // The connection's side.
  void close() {
    closed_ = true;
    events_.clear();
    gone_.set();
  }
  bool empty() const noexcept { return events_.empty(); }
  bool finished() const noexcept { return finished_; }
  std::string pop() {
    std::string event = std::move(events_.front());
    events_.pop_front();
    return event;
  }
  /// Returns after a send or finish since the last wait (at once when one came in between);
  /// look at empty() and finished() before waiting.
  boost::asio::awaitable<void> wait() {
    co_await wake_.wait();
    wake_.reset();
  }

 private:
  std::deque<std::string> events_;
  std::function<void(std::string_view, std::string_view)> observer_;
  bool finished_ = false;
  bool closed_ = false;
  bool watched_ = false;
  Event wake_;  // set on every send and at finish
  Event gone_;  // set when the connection ends
};

}  // namespace rex::server
