// What KubernetesDeployment reads from a pod's status: pods as the API server reports them at
// each stage (fields trimmed to what the decision reads).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json/parse.hpp>

#include "backends/kubernetes/pod_status.hpp"

namespace rex::detail {
namespace {

using ::testing::HasSubstr;

PodState of(const char* text) {
  return assess_pod(boost::json::parse(text).as_object());
}

TEST(PodStatus, AnUnscheduledPodWaitsWithTheSchedulersMessage) {
  const PodState st = of(R"({"metadata":{"name":"p"},"spec":{},"status":{"phase":"Pending",
      "conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable",
      "message":"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}]}})");
  EXPECT_EQ(st.progress, PodProgress::pending);
  EXPECT_THAT(st.summary, HasSubstr("not scheduled (Unschedulable): 0/1 nodes are available"));
  EXPECT_EQ(of(R"({})").progress, PodProgress::pending);
}

TEST(PodStatus, AnInitContainerOnItsWayIsPending) {
  const PodState st = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Pending",
      "initContainerStatuses":[{"name":"rex-server-install",
        "state":{"waiting":{"reason":"PodInitializing"}}}],
      "containerStatuses":[{"name":"sandbox","state":{"waiting":{"reason":"PodInitializing"}}}]}})");
  EXPECT_EQ(st.progress, PodProgress::pending);
  EXPECT_EQ(st.node, "n1");
  EXPECT_THAT(
      st.summary,
      HasSubstr("scheduled on n1; init container rex-server-install: waiting (PodInitializing)"));
}

TEST(PodStatus, AnImageThatCannotBePulledEndsIt) {
  const PodState st = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Pending",
      "initContainerStatuses":[{"name":"rex-server-install","state":{"terminated":{"exitCode":0}}}],
      "containerStatuses":[{"name":"sandbox","state":{"waiting":{"reason":"ImagePullBackOff",
        "message":"Back-off pulling image \"nope:1\""}}}]}})");
  EXPECT_EQ(st.progress, PodProgress::ended);
  EXPECT_EQ(st.summary, "container sandbox ImagePullBackOff: Back-off pulling image \"nope:1\"");
  EXPECT_EQ(st.ran_container, "");
}

TEST(PodStatus, AFailedInitContainerEndsIt) {
  const PodState st = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Pending",
      "initContainerStatuses":[{"name":"rex-server-install",
        "state":{"terminated":{"exitCode":1,"reason":"Error"}}}]}})");
  EXPECT_EQ(st.progress, PodProgress::ended);
  EXPECT_EQ(st.summary, "init container rex-server-install terminated: Error (exit code 1)");
  EXPECT_EQ(st.ran_container, "rex-server-install");
}

TEST(PodStatus, AFailedInitContainerOfAFailedPodIsItsReason) {
  // restartPolicy Never: the kubelet fails the pod as soon as an init container fails.
  const PodState st = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Failed",
      "initContainerStatuses":[{"name":"rex-server-install",
        "state":{"terminated":{"exitCode":3,"reason":"Error"}}}],
      "containerStatuses":[{"name":"sandbox","state":{"waiting":{"reason":"PodInitializing"}}}]}})");
  EXPECT_EQ(st.progress, PodProgress::ended);
  EXPECT_EQ(st.summary,
            "pod failed; init container rex-server-install terminated: Error (exit code 3)");
  EXPECT_EQ(st.ran_container, "rex-server-install");
}

TEST(PodStatus, ARunningSandboxContainerIsRunning) {
  const PodState st = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Running",
      "podIP":"10.244.0.7",
      "initContainerStatuses":[{"name":"rex-server-install","state":{"terminated":{"exitCode":0}}}],
      "containerStatuses":[{"name":"sandbox","state":{"running":{}}}]}})");
  EXPECT_EQ(st.progress, PodProgress::running);
  EXPECT_EQ(st.pod_ip, "10.244.0.7");
}

TEST(PodStatus, AnOomKilledSandboxEndsItWithTheReason) {
  const PodState st = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Failed",
      "containerStatuses":[{"name":"sandbox",
        "state":{"terminated":{"exitCode":137,"reason":"OOMKilled"}}}]}})");
  EXPECT_EQ(st.progress, PodProgress::ended);
  EXPECT_EQ(st.summary, "pod failed; container sandbox terminated: OOMKilled (exit code 137)");
  EXPECT_EQ(st.ran_container, "sandbox");
}

TEST(PodStatus, AnEvictedOrExpiredPodEndsItWithTheReasonAndMessage) {
  const PodState evicted = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Failed",
      "reason":"Evicted","message":"The node was low on resource: memory."}})");
  EXPECT_EQ(evicted.progress, PodProgress::ended);
  EXPECT_EQ(evicted.summary, "pod failed: Evicted: The node was low on resource: memory.");
  const PodState expired = of(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Failed",
      "reason":"DeadlineExceeded","message":"Pod was active on the node longer than the specified deadline"}})");
  EXPECT_THAT(expired.summary, HasSubstr("DeadlineExceeded"));
}

TEST(PodStatus, APodBeingDeletedHasEnded) {
  const PodState st = of(R"({"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"},
      "spec":{"nodeName":"n1"},"status":{"phase":"Running",
      "containerStatuses":[{"name":"sandbox","state":{"running":{}}}]}})");
  EXPECT_EQ(st.progress, PodProgress::ended);
  EXPECT_TRUE(st.deleting);
}

TEST(PodStatus, FieldsOfTheWrongTypeAreIgnored) {
  const PodState st = of(R"({"metadata":3,"spec":{"nodeName":5},"status":{"phase":[],
      "initContainerStatuses":{},"containerStatuses":[1,"x",{"name":"sandbox","state":7}]}})");
  EXPECT_EQ(st.progress, PodProgress::pending);
}

}  // namespace
}  // namespace rex::detail
