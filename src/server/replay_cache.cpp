#include "server/replay_cache.hpp"

namespace rex::server {

std::shared_ptr<ReplayCache::Entry> ReplayCache::find(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end())
    return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->second;
}

std::shared_ptr<ReplayCache::Entry> ReplayCache::begin(const std::string& key,
                                                       boost::asio::any_io_executor ex) {
  if (auto it = index_.find(key); it != index_.end()) {
    order_.erase(it->second);
    index_.erase(it);
  }
  auto entry = std::make_shared<Entry>(std::move(ex));
  order_.emplace_front(key, entry);
  index_[key] = order_.begin();
  while (index_.size() > capacity_ && !order_.empty()) {
    // An evicted entry that is still running stays alive for its request and its waiters.
    index_.erase(order_.back().first);
    order_.pop_back();
  }
  return entry;
}

void ReplayCache::complete(Entry& entry, Answer response) {
  entry.response = std::move(response);
  entry.ready.set();
}

void ReplayCache::abandon(const std::string& key, const std::shared_ptr<Entry>& entry) {
  if (auto it = index_.find(key); it != index_.end() && it->second->second == entry) {
    order_.erase(it->second);
    index_.erase(it);
  }
  entry->ready.set();
}

}  // namespace rex::server
