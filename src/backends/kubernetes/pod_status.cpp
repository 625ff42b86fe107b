#include "backends/kubernetes/pod_status.hpp"

#include <fmt/format.h>
#include <boost/json/value.hpp>

#include <array>
#include <optional>
#include <string_view>

namespace rex::detail {

namespace json = boost::json;

namespace {

// Waiting reasons after which the kubelet would only retry what failed: a sandbox that waits on
// them will not start without a change (a fixed image name, a missing secret, ...).
constexpr std::array<std::string_view, 11> kFatalWaiting = {
    "ErrImagePull",         "ImagePullBackOff",    "InvalidImageName",
    "ErrImageNeverPull",    "RegistryUnavailable", "CreateContainerConfigError",
    "CreateContainerError", "RunContainerError",   "CrashLoopBackOff",
    "PreStartHookError",    "PostStartHookError"};

std::string text(const json::object& o, std::string_view key) {
  if (const auto* v = o.if_contains(key); v != nullptr && v->is_string())
    return std::string(v->get_string());
  return {};
}

const json::object* object(const json::object& o, std::string_view key) {
  if (const auto* v = o.if_contains(key); v != nullptr && v->is_object())
    return &v->get_object();
  return nullptr;
}

const json::array* array(const json::object& o, std::string_view key) {
  if (const auto* v = o.if_contains(key); v != nullptr && v->is_array())
    return &v->get_array();
  return nullptr;
}

std::string with_message(std::string head, const std::string& message) {
  if (!message.empty())
    head += ": " + message;
  return head;
}

// A container status: its state as one phrase, and whether it settles the pod's fate.
struct ContainerView {
  std::string phrase;
  bool fatal = false;  // waiting for a fatal reason, or (init: failed) terminated
  bool running = false;
  bool terminated = false;
  bool succeeded = false;  // terminated with exit code 0
};

ContainerView view(const json::object& status) {
  ContainerView v;
  const json::object* state = object(status, "state");
  if (state == nullptr)
    return v;
  if (const json::object* w = object(*state, "waiting")) {
    const std::string reason = text(*w, "reason");
    v.phrase = reason.empty() ? "waiting" : fmt::format("waiting ({})", reason);
    for (auto fatal : kFatalWaiting) {
      if (reason == fatal) {
        v.fatal = true;
        v.phrase = with_message(reason, text(*w, "message"));
      }
    }
  } else if (object(*state, "running") != nullptr) {
    v.running = true;
    v.phrase = "running";
  } else if (const json::object* t = object(*state, "terminated")) {
    v.terminated = true;
    std::int64_t code = -1;
    if (const auto* c = t->if_contains("exitCode"); c != nullptr && c->is_number())
      code = c->to_number<std::int64_t>();
    v.succeeded = code == 0;
    const std::string reason = text(*t, "reason");
    v.phrase =
        fmt::format("terminated: {}(exit code {})", reason.empty() ? "" : reason + " ", code);
    v.phrase = with_message(v.phrase, text(*t, "message"));
  }
  return v;
}

const json::object* find_status(const json::object& status, std::string_view list,
                                std::string_view name) {
  if (const json::array* statuses = array(status, list)) {
    for (const auto& s : *statuses) {
      if (s.is_object() && text(s.get_object(), "name") == name)
        return &s.get_object();
    }
  }
  return nullptr;
}

// Init containers run in order: the first that has not succeeded is where the pod stands.
struct InitContainer {
  std::string name;
  ContainerView view;
};

std::optional<InitContainer> first_unfinished_init(const json::object& status) {
  if (const json::array* inits = array(status, "initContainerStatuses")) {
    for (const auto& s : *inits) {
      if (!s.is_object())
        continue;
      ContainerView v = view(s.get_object());
      if (!v.succeeded)
        return InitContainer{text(s.get_object(), "name"), std::move(v)};
    }
  }
  return std::nullopt;
}

}  // namespace

PodState assess_pod(const json::object& pod) {
  PodState st;
  const json::object empty;
  const json::object* meta = object(pod, "metadata");
  const json::object* spec = object(pod, "spec");
  const json::object* status = object(pod, "status");
  if (meta == nullptr)
    meta = &empty;
  if (spec == nullptr)
    spec = &empty;
  if (status == nullptr)
    status = &empty;
  st.node = text(*spec, "nodeName");
  st.pod_ip = text(*status, "podIP");
  st.deleting = meta->contains("deletionTimestamp");

  const std::string phase = text(*status, "phase");
  if (phase == "Failed" || phase == "Succeeded") {
    st.progress = PodProgress::ended;
    const std::string reason = text(*status, "reason");
    st.summary = with_message(phase == "Failed" ? "pod failed" : "pod ended", reason);
    st.summary = with_message(st.summary, text(*status, "message"));
    // With restartPolicy Never a failed init container fails the whole pod: it is the reason.
    if (const auto init = first_unfinished_init(*status); init && init->view.terminated) {
      st.ran_container = init->name;
      st.summary += fmt::format("; init container {} {}", init->name, init->view.phrase);
      return st;
    }
    if (const json::object* c = find_status(*status, "containerStatuses", kSandboxContainer)) {
      const ContainerView v = view(*c);
      if (v.terminated) {
        st.ran_container = kSandboxContainer;
        st.summary += fmt::format("; container {} {}", kSandboxContainer, v.phrase);
      }
    }
    return st;
  }
  if (st.deleting) {
    st.progress = PodProgress::ended;
    st.summary = "the pod is being deleted";
    return st;
  }

  // Scheduling.
  if (st.node.empty()) {
    st.summary = "waiting to be scheduled";
    if (const json::array* conditions = array(*status, "conditions")) {
      for (const auto& c : *conditions) {
        if (!c.is_object())
          continue;
        const auto& o = c.get_object();
        if (text(o, "type") == "PodScheduled" && text(o, "status") == "False")
          st.summary =
              with_message(fmt::format("not scheduled ({})",
                                       text(o, "reason").empty() ? "pending" : text(o, "reason")),
                           text(o, "message"));
      }
    }
    return st;
  }

  if (const auto init = first_unfinished_init(*status)) {
    const ContainerView& v = init->view;
    st.summary = fmt::format("scheduled on {}; init container {}: {}", st.node, init->name,
                             v.phrase.empty() ? "pending" : v.phrase);
    if (v.fatal || v.terminated) {
      st.progress = PodProgress::ended;
      st.summary = fmt::format("init container {} {}", init->name, v.phrase);
      if (v.terminated)
        st.ran_container = init->name;
    }
    return st;
  }

  if (const json::object* c = find_status(*status, "containerStatuses", kSandboxContainer)) {
    const ContainerView v = view(*c);
    if (v.running) {
      st.progress = PodProgress::running;
      st.summary = fmt::format("container {} running on {}", kSandboxContainer, st.node);
      return st;
    }
    if (v.fatal || v.terminated) {
      st.progress = PodProgress::ended;
      if (v.terminated)
        st.ran_container = kSandboxContainer;
      st.summary = fmt::format("container {} {}", kSandboxContainer, v.phrase);
      return st;
    }
    st.summary = fmt::format("scheduled on {}; container {}: {}", st.node, kSandboxContainer,
                             v.phrase.empty() ? "pending" : v.phrase);
    return st;
  }
  st.summary = fmt::format("scheduled on {}; starting", st.node);
  return st;
}

}  // namespace rex::detail
