// Who listens to the gateway's events (GET /api/events) and what each has not read yet. The
// store gives every committed event its id; the hub hands each to the subscribers that may see
// it (its tenant's, or every one's when no keys are configured) and wakes them. Nothing here does
// I/O: the stream itself (gateway_routes.cpp) reads the queue and writes the answer.
#pragma once

#include <rex/core/event.hpp>
#include <rex/gateway/store.hpp>

#include <boost/json/object.hpp>

#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rex::gateway {

/// A client of /api/events: the events committed since it subscribed.
struct Subscriber {
  explicit Subscriber(asio::any_io_executor ex) : wake(std::move(ex)) {}
  std::optional<std::string> tenant;  // none: every tenant's (no keys configured)
  std::deque<StoredEvent> queue;
  Event wake;
};

class EventHub {
 public:
  /// A new subscriber, of `tenant`'s events only, or of all when none is given.
  std::shared_ptr<Subscriber> subscribe(asio::any_io_executor ex,
                                        std::optional<std::string> tenant);
  void leave(const std::shared_ptr<Subscriber>& sub) { subscribers_.remove(sub); }
  /// Committed events, in their order, to each subscriber that may see them.
  void publish(const std::vector<StoredEvent>& events);
  /// Wakes every subscriber (the gateway stops: their streams end).
  void wake_all();
  /// Drops every subscriber (a stream that never ran, and so never left).
  void clear() { subscribers_.clear(); }
  std::size_t size() const { return subscribers_.size(); }

 private:
  std::list<std::shared_ptr<Subscriber>> subscribers_;
};

/// An event as the API shows it (the data of an SSE message).
boost::json::object event_json(const StoredEvent& e);

}  // namespace rex::gateway
