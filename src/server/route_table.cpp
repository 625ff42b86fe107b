#include <rex/server/route_table.hpp>

namespace rex::server {

void RouteTable::add(boost::beast::http::verb method, std::string path, JsonRoute handler) {
  routes_.push_back(Route{method, std::move(path), std::move(handler)});
}

void RouteTable::add(boost::beast::http::verb method, std::string path, FileRoute handler) {
  routes_.push_back(Route{method, std::move(path), std::move(handler)});
}

void RouteTable::add(boost::beast::http::verb method, std::string path, StreamRoute handler) {
  routes_.push_back(Route{method, std::move(path), std::move(handler)});
}

void RouteTable::add(boost::beast::http::verb method, std::string path, UploadRoute handler) {
  routes_.push_back(Route{method, std::move(path), std::move(handler)});
}

const Route* RouteTable::find(std::string_view target) const {
  const auto query = target.find('?');
  if (query != std::string_view::npos)
    target = target.substr(0, query);
  for (const auto& r : routes_) {
    if (r.path == target)
      return &r;
  }
  return nullptr;
}

}  // namespace rex::server
