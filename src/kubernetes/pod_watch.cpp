// watch_pod (see the header): the watch's newline-separated JSON events, read as they arrive.
#include <rex/kubernetes/pod_watch.hpp>

#include <rex/core/object_fields.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/url.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>

namespace rex::kubernetes {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

// Thrown by the body handler to end the request once the watch has decided.
struct WatchDone {};

}  // namespace

asio::awaitable<bool> watch_pod(ApiClient& api, std::string namespace_name, std::string name,
                                std::string resource_version, Clock::time_point until,
                                const PodSeen& seen) {
  const std::string pod_path = fmt::format("/api/v1/namespaces/{}/pods/{}", namespace_name, name);
  std::string rv = std::move(resource_version);
  while (Clock::now() < until) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(until - Clock::now());
    bool decided = false;
    bool stale = false;
    std::string buffer;
    http::ClientRequest request;
    request.target =
        fmt::format("/api/v1/namespaces/{}/pods?watch=true&fieldSelector={}&timeoutSeconds={}{}",
                    namespace_name, http::url_encode("metadata.name=" + name),
                    std::max<std::int64_t>(left.count(), 1),
                    rv.empty() ? std::string() : "&resourceVersion=" + rv);
    request.headers.emplace_back("Accept", "application/json");
    request.timeout = (until - Clock::now()) + std::chrono::seconds(5);
    request.on_body = [&](std::string_view piece) {
      buffer.append(piece);
      std::size_t eol;
      while ((eol = buffer.find('\n')) != std::string::npos) {
        boost::system::error_code ec;
        const json::value event = json::parse(std::string_view(buffer).substr(0, eol), ec);
        buffer.erase(0, eol + 1);
        if (ec || !event.is_object())
          continue;
        const json::value* type = event.get_object().if_contains("type");
        const json::value* object = event.get_object().if_contains("object");
        if (type == nullptr || !type->is_string() || object == nullptr || !object->is_object())
          continue;
        if (type->get_string() == "ERROR") {
          // 410 Gone: the version is too old; anything else: start over as well.
          stale = true;
          throw WatchDone{};
        }
        if (std::string v = field_text(*object, {"metadata", "resourceVersion"}); !v.empty())
          rv = std::move(v);
        if (seen(object->get_object(), type->get_string() == "DELETED")) {
          decided = true;
          throw WatchDone{};
        }
      }
    };
    try {
      const http::ClientResponse response = co_await api.request(std::move(request));
      if (response.status / 100 != 2)
        throw api_error("GET", pod_path + " (watch)", response);
    } catch (const WatchDone&) {
    } catch (const http::RequestTimeoutError&) {
      // The server kept the watch open past its timeout: the loop's own deadline decides.
    }
    if (decided)
      co_return true;
    if (stale) {
      json::value now;
      try {
        now = co_await api.call("GET", pod_path);
      } catch (const ApiError& e) {
        if (e.status() != 404)
          throw;
        if (seen(json::object(), true))
          co_return true;
        rv.clear();
        continue;
      }
      if (seen(now.get_object(), false))
        co_return true;
      rv = field_text(now, {"metadata", "resourceVersion"});
    }
  }
  co_return false;
}

}  // namespace rex::kubernetes
