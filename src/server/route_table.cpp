#include <rex/server/route_table.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>

#include "core/hex.hpp"

namespace rex::server {

namespace bhttp = boost::beast::http;

namespace {

// Percent-decoding; a malformed escape stays as written. `plus_is_space` for query values.
std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int hi = detail::hex_value(text[i + 1]);
      const int lo = detail::hex_value(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

std::string_view without_query(std::string_view target) {
  const auto query = target.find('?');
  return query == std::string_view::npos ? target : target.substr(0, query);
}

}  // namespace

bool match_path(std::string_view pattern, std::string_view path,
                std::vector<std::pair<std::string, std::string>>& params) {
  // The parameters as views into the pattern and the path; decoded copies only for a match (a
  // table is mostly tried against paths that share a prefix with the one that matches).
  boost::container::small_vector<std::pair<std::string_view, std::string_view>, 4> found;
  while (!pattern.empty()) {
    const auto open = pattern.find('{');
    if (open == std::string_view::npos) {
      if (pattern != path)
        return false;
      path = {};
      break;
    }
    // The literal part before the parameter must match as it is.
    if (path.substr(0, open) != pattern.substr(0, open))
      return false;
    path.remove_prefix(open);
    pattern.remove_prefix(open);
    const auto close = pattern.find('}');
    if (close == std::string_view::npos)
      return false;  // a malformed pattern matches nothing
    std::string_view name = pattern.substr(1, close - 1);
    pattern.remove_prefix(close + 1);
    const bool rest = name.size() > 3 && name.substr(name.size() - 3) == "...";
    std::string_view value;
    if (rest) {
      name.remove_suffix(3);
      value = path;
      path = {};
    } else {
      value = path.substr(0, path.find('/'));
      path.remove_prefix(value.size());
    }
    if (value.empty())
      return false;
    found.emplace_back(name, value);
  }
  if (!path.empty())
    return false;
  for (const auto& [name, value] : found)
    params.emplace_back(std::string(name), percent_decode(value, false));
  return true;
}

std::string_view Request::param(std::string_view name) const {
  for (const auto& [key, value] : params) {
    if (key == name)
      return value;
  }
  return {};
}

std::string_view Request::path() const {
  const auto target = header.target();
  return without_query(std::string_view(target.data(), target.size()));
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const auto amp = text.find('&');
    const std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view{} : text.substr(amp + 1);
    if (pair.empty())
      continue;
    const auto eq = pair.find('=');
    out.emplace_back(
        percent_decode(pair.substr(0, eq), true),
        eq == std::string_view::npos ? std::string{} : percent_decode(pair.substr(eq + 1), true));
  }
  return out;
}

std::optional<std::string> Request::query(std::string_view name) const {
  const auto target = header.target();
  const std::string_view whole(target.data(), target.size());
  const auto mark = whole.find('?');
  if (mark == std::string_view::npos)
    return std::nullopt;
  for (auto& [key, value] : parse_query(whole.substr(mark + 1))) {
    if (key == name)
      return std::move(value);
  }
  return std::nullopt;
}

std::optional<std::string_view> Request::field(std::string_view name) const {
  const auto it = header.find(boost::beast::string_view(name.data(), name.size()));
  if (it == header.end())
    return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

void RouteTable::add(bhttp::verb method, std::string path, JsonRoute handler) {
  routes_.push_back(Route{method, std::move(path), std::move(handler)});
  added();
}

void RouteTable::add(bhttp::verb method, std::string path, FileRoute handler) {
  routes_.push_back(Route{method, std::move(path), std::move(handler)});
  added();
}

void RouteTable::add(bhttp::verb method, std::string path, StreamRoute handler,
                     std::string content_type) {
  routes_.push_back(Route{method, std::move(path), std::move(handler), std::move(content_type)});
  added();
}

void RouteTable::add(bhttp::verb method, std::string path, UploadRoute handler) {
  routes_.push_back(Route{method, std::move(path), std::move(handler)});
  added();
}

void RouteTable::added() {
  const bhttp::verb method = routes_.back().method;
  auto it = std::find_if(by_method_.begin(), by_method_.end(),
                         [method](const auto& entry) { return entry.first == method; });
  if (it == by_method_.end())
    it = by_method_.emplace(by_method_.end(), method, std::vector<std::size_t>());
  it->second.push_back(routes_.size() - 1);
}

void RouteTable::intercept(Claim claims, RelayRoute handler) {
  claims_ = std::move(claims);
  interceptor_ = Route{bhttp::verb::unknown, std::string(), std::move(handler)};
}

const Route* RouteTable::intercepted(const bhttp::request_header<>& header) const {
  return interceptor_ && claims_(header) ? &*interceptor_ : nullptr;
}

RouteTable::Match RouteTable::find(bhttp::verb method, std::string_view target) const {
  const std::string_view path = without_query(target);
  const bhttp::verb wanted = method == bhttp::verb::head ? bhttp::verb::get : method;
  Match m;
  for (const auto& [route_method, positions] : by_method_) {
    if (route_method != wanted)
      continue;
    for (const std::size_t at : positions) {
      if (match_path(routes_[at].path, path, m.params)) {
        m.route = &routes_[at];
        return m;
      }
    }
    break;
  }
  // No route for this method: the methods the path has (a 405 names them).
  for (const auto& r : routes_) {
    if (match_path(r.path, path, m.params) &&
        std::find(m.other_methods.begin(), m.other_methods.end(), r.method) ==
            m.other_methods.end())
      m.other_methods.push_back(r.method);
    m.params.clear();
  }
  return m;
}

}  // namespace rex::server
