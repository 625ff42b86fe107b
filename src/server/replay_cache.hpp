// ReplayCache: the server's memory of answered X-Request-IDs, so a client that retries a request
// (after a dropped connection, say) gets the first answer instead of running it twice.
//
// Bounded: past `capacity` entries the least recently used one is forgotten. An entry is created
// when a request starts; a duplicate that arrives before the answer waits on the entry's `ready`
// timer, which is cancelled (waking every waiter) when the answer is stored or abandoned.
// Threading: one thread (the server's io_context).
#pragma once

#include <rex/core/event.hpp>
#include <rex/server/answer.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rex::server {

class ReplayCache {
 public:
  struct Entry {
    explicit Entry(boost::asio::any_io_executor ex) : ready(std::move(ex)) {}
    std::optional<Answer> response;  // empty while the first request runs
    Event ready;                     // set when the entry settles
  };

  explicit ReplayCache(std::size_t capacity) : capacity_(capacity) {}

  /// The entry of `key`, marked most recently used; null when unknown.
  std::shared_ptr<Entry> find(const std::string& key);

  /// Starts a new entry for `key` (replacing any), evicting the oldest past capacity.
  std::shared_ptr<Entry> begin(const std::string& key, boost::asio::any_io_executor ex);

  /// Stores the answer and wakes the waiters.
  static void complete(Entry& entry, Answer response);

  /// The request ended without an answer to replay: forget the key and wake the waiters (they
  /// then run the request themselves).
  void abandon(const std::string& key, const std::shared_ptr<Entry>& entry);

  std::size_t size() const noexcept { return index_.size(); }

 private:
  using Order = std::list<std::pair<std::string, std::shared_ptr<Entry>>>;
  std::size_t capacity_;
  Order order_;  // front: most recently used
  std::unordered_map<std::string, Order::iterator> index_;
};

}  // namespace rex::server
