#include <rex/server/event_stream.hpp>

#include <rex/http/sse.hpp>

namespace rex::server {

void EventStream::send(std::string_view name, std::string_view data, std::string_view id) {
  if (observer_)
    observer_(name, data);
  if (closed_)
    return;  // nobody will read it
  events_.push_back(http::encode_sse_event(name, data, id));
  wake_.set();
}

}  // namespace rex::server
