// watch_pod: follows one pod through the API server's watch (a stream of its versions), not by
// polling, until the caller has seen what it waits for or a deadline passes.
//
// The watch is resumed from the last version seen when the server ends it (its timeoutSeconds
// or a dropped connection); a version too old to resume from (410 Gone, or any ERROR event)
// starts over from the pod's current state, read once. A pod that no longer exists is shown to
// the callback as deleted, with an empty object.
//
// Threading: call from the ApiClient's executor.
#pragma once

#include <rex/kubernetes/api_client.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace rex::kubernetes {

/// Shown each version of the pod (and whether the event deleted it); true ends the watch.
using PodSeen = std::function<bool(const boost::json::object& pod, bool deleted)>;

/// Watches pod `name` in `namespace_name` from `resource_version` (empty: from the start, the
/// pod's current state first) until `seen` returns true (returns true) or `until` passes
/// (returns false). Throws ApiError for an answer the watch cannot go on from (403, 404 of the
/// namespace, ...), and http's errors when the API server cannot be reached.
asio::awaitable<bool> watch_pod(ApiClient& api, std::string namespace_name, std::string name,
                                std::string resource_version,
                                std::chrono::steady_clock::time_point until, const PodSeen& seen);

}  // namespace rex::kubernetes
