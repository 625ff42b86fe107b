#include <rex/backends/kubernetes/kubernetes_gc.hpp>

#include <rex/core/object_fields.hpp>
#include <rex/http/url.hpp>
#include <rex/kubernetes/api_client.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <chrono>
#include <map>
#include <set>

#include "core/clock.hpp"

namespace rex {

namespace json = boost::json;

namespace {

std::map<std::string, std::string> labels_of(const json::object& item) {
  std::map<std::string, std::string> l;
  const json::value* meta = item.if_contains("metadata");
  const json::value* labels =
      meta != nullptr && meta->is_object() ? meta->get_object().if_contains("labels") : nullptr;
  if (labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->get_object()) {
      if (v.is_string())
        l[std::string(k)] = std::string(v.get_string());
    }
  }
  return l;
}

// Every object of `kind` (pods, secrets) with rex's label, in one namespace or all, following
// the list's continue tokens.
asio::awaitable<std::vector<json::object>> list_managed(kubernetes::ApiClient& api,
                                                        const std::string& ns,
                                                        std::string_view kind) {
  std::vector<json::object> items;
  std::string next;
  do {
    std::string path = ns.empty() ? fmt::format("/api/v1/{}", kind)
                                  : fmt::format("/api/v1/namespaces/{}/{}", ns, kind);
    path += fmt::format("?labelSelector={}%3D1&limit=500", labels::managed);
    if (!next.empty())
      path += "&continue=" + http::url_encode(next);
    const json::value list = co_await api.call("GET", path);
    for (const auto& item : list.at("items").as_array())
      items.push_back(item.as_object());
    next = field_text(list.as_object(), {"metadata", "continue"});
  } while (!next.empty());
  co_return items;
}

}  // namespace

asio::awaitable<GcReport> collect_kubernetes_garbage(kubernetes::ApiClient& api,
                                                     KubernetesGcOptions options) {
  GcReport report;
  const std::int64_t now = rex::detail::unix_seconds();
  auto remove = [&](const std::string& path, GcEntry entry) -> asio::awaitable<void> {
    if (!options.gc.dry_run) {
      try {
        json::object now{{"gracePeriodSeconds", 0}};
        co_await api.call("DELETE", path, std::move(now));
      } catch (const kubernetes::ApiError& e) {
        if (e.status() != 404) {
          report.errors.push_back(fmt::format("{}: {}", entry.name, e.what()));
          co_return;
        }
      }
    }
    report.removed.push_back(std::move(entry));
  };

  std::set<std::string> pods_staying;  // "namespace/name"
  for (const auto& pod : co_await list_managed(api, options.namespace_name, "pods")) {
    const std::string ns = field_text(pod, {"metadata", "namespace"});
    const std::string name = field_text(pod, {"metadata", "name"});
    GcEntry entry;
    entry.name = fmt::format("{}/pod/{}", ns, name);
    const auto labels = labels_of(pod);
    entry.reason = gc_reason(labels, now, options.gc);
    if (entry.reason.empty()) {
      entry.reason = gc_keep_reason(labels);
      pods_staying.insert(ns + "/" + name);
      report.kept.push_back(std::move(entry));
      continue;
    }
    co_await remove(fmt::format("/api/v1/namespaces/{}/pods/{}", ns, name), std::move(entry));
  }
  // A Secret normally goes with its pod (it is the pod's dependent); one made by a process
  // killed before it created the pod has no pod, and one of a pod deleted above may still be
  // waiting for the cluster's garbage collector.
  for (const auto& secret : co_await list_managed(api, options.namespace_name, "secrets")) {
    const std::string ns = field_text(secret, {"metadata", "namespace"});
    const std::string name = field_text(secret, {"metadata", "name"});
    const auto labels = labels_of(secret);
    std::string pod = name;
    if (pod.ends_with("-token"))
      pod.resize(pod.size() - 6);
    if (pods_staying.contains(ns + "/" + pod))
      continue;  // listed with its pod
    GcEntry entry;
    entry.name = fmt::format("{}/secret/{}", ns, name);
    entry.reason = gc_reason(labels, now, options.gc);
    if (entry.reason.empty()) {
      // Its owner still runs and is between creating the Secret and the pod, or keeps it.
      entry.reason = gc_keep_reason(labels);
      report.kept.push_back(std::move(entry));
      continue;
    }
    co_await remove(fmt::format("/api/v1/namespaces/{}/secrets/{}", ns, name), std::move(entry));
  }
  co_return report;
}

}  // namespace rex
