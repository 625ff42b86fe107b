// rex gc's decisions: which containers with rex's labels belong to live owners and which go.
#include <rex/backends/docker/docker_gc.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace rex {
namespace {

using ::testing::HasSubstr;

TEST(DockerGc, KeepsContainersOfLiveOwnersAndRemovesTheRest) {
  const auto ours = owner_labels();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  EXPECT_EQ(gc_reason(ours, now, {}), "");
  GcOptions all;
  all.all = true;
  EXPECT_EQ(gc_reason(ours, now, all), "--all");

  auto expired = ours;
  expired["rex.expires"] = std::to_string(now - 600);
  EXPECT_THAT(gc_reason(expired, now, {}), HasSubstr("expired 10 min ago"));

  auto gone = ours;
  gone["rex.owner.pid"] = "999999999";
  EXPECT_THAT(gc_reason(gone, now, {}), HasSubstr("owner process 999999999 is gone"));

  auto reused = ours;
  reused["rex.owner.start"] = "1";
  EXPECT_THAT(gc_reason(reused, now, {}), HasSubstr("another process"));

  auto rebooted = ours;
  rebooted["rex.owner.boot"] = "another-boot";
  EXPECT_THAT(gc_reason(rebooted, now, {}), HasSubstr("rebooted"));

  auto elsewhere = ours;
  elsewhere["rex.owner.host"] = "some-other-host";
  elsewhere["rex.owner.pid"] = "999999999";
  EXPECT_EQ(gc_reason(elsewhere, now, {}), "");

  // A gateway's sandbox outlives its gateway's process (a restart adopts it) until it expires.
  auto gateway_sandbox = gone;
  gateway_sandbox["rex.gateway"] = "g1234";
  gateway_sandbox["rex.expires"] = std::to_string(now + 600);
  EXPECT_EQ(gc_reason(gateway_sandbox, now, {}), "");
  gateway_sandbox["rex.expires"] = std::to_string(now - 60);
  EXPECT_THAT(gc_reason(gateway_sandbox, now, {}), HasSubstr("expired"));
  EXPECT_EQ(gc_reason(gateway_sandbox, now, all), "--all");
}

}  // namespace
}  // namespace rex
