#include "gateway/event_hub.hpp"

#include "gateway/session_record.hpp"

namespace rex::gateway {

std::shared_ptr<Subscriber> EventHub::subscribe(asio::any_io_executor ex,
                                                std::optional<std::string> tenant) {
  auto sub = std::make_shared<Subscriber>(std::move(ex));
  sub->tenant = std::move(tenant);
  subscribers_.push_back(sub);
  return sub;
}

void EventHub::publish(const std::vector<StoredEvent>& events) {
  for (const auto& e : events) {
    for (const auto& sub : subscribers_) {
      if (sub->tenant && *sub->tenant != e.tenant)
        continue;
      sub->queue.push_back(e);
      sub->wake.set();
    }
  }
}

void EventHub::wake_all() {
  for (const auto& sub : subscribers_)
    sub->wake.set();
}

boost::json::object event_json(const StoredEvent& e) {
  return boost::json::object{{"id", e.id},
                             {"time", iso_time(e.time)},
                             {"type", e.type},
                             {"session_id", e.session_id},
                             {"tenant", e.tenant},
                             {"actor", e.actor},
                             {"request_id", e.request_id},
                             {"data", e.data}};
}

}  // namespace rex::gateway
