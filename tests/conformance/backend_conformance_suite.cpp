// The backend conformance suite's tests (backend_conformance.hpp).
#include "conformance/backend_conformance.hpp"

#include <rex/backends/backends.hpp>
#include <rex/core/random.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "support/async_test.hpp"

namespace rex::test {

std::ostream& operator<<(std::ostream& os, const BackendCase& c) {
  return os << c.name;
}

// Executables whose backends are not in this suite (the integration tests) link it too.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendConformance);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendGcConformance);

void BackendConformance::SetUp() {
  if (const std::string why = GetParam().unavailable(); !why.empty())
    GTEST_SKIP() << why;
  settings = GetParam().settings();
  entry = find_backend(settings.type());
  ASSERT_NE(entry, nullptr) << settings.type() << " is not in the backend table";
  ASSERT_NE(entry->open, nullptr) << settings.type() << " has no SandboxBackend";
  backend = entry->open(io.get_executor(), settings);
}

StartedSandbox BackendConformance::create(std::string name,
                                          std::map<std::string, std::string> labels,
                                          std::string deployment_id) {
  SandboxRequest request = GetParam().request;
  request.labels.merge(labels);
  request.deployment_id = std::move(deployment_id);
  request.lifetime = Seconds(600);
  request.name = std::move(name);
  request.purpose = "the conformance suite";
  return run_async(io, backend->create(std::move(request)), std::chrono::seconds(180));
}

namespace {

// The report's entry of the sandbox `id`: by its id, or by its name (a pod's is
// NAMESPACE/pod/NAME, a task's its ARN).
const GcEntry* entry_of(const std::vector<GcEntry>& entries, const std::string& id) {
  const auto it = std::find_if(entries.begin(), entries.end(), [&](const GcEntry& e) {
    return e.id == id || e.name == id || e.name.ends_with("/" + id);
  });
  return it == entries.end() ? nullptr : &*it;
}

const SandboxInfo* info_of(const std::vector<SandboxInfo>& found, const std::string& id) {
  const auto it =
      std::find_if(found.begin(), found.end(), [&](const SandboxInfo& s) { return s.id == id; });
  return it == found.end() ? nullptr : &*it;
}

// A client of the started sandbox, as a holder of its address makes one.
std::unique_ptr<RemoteRuntime> client_of(asio::io_context& io, const SandboxBackend& backend,
                                         const StartedSandbox& started) {
  RemoteRuntimeConfig rc;
  rc.url = started.url;
  rc.auth_token = started.token;
  rc.client.headers = started.headers;
  backend.configure_client(started.url, rc.client);
  return std::make_unique<RemoteRuntime>(io.get_executor(), rc);
}

// Asks `done` every half second until it holds; false when it still does not after a minute (a
// cloud may take a moment to report a stop, a pod's server to end).
bool within_a_minute(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return true;
}

// Whether list() shows the sandbox gone or no longer running.
bool ended(asio::io_context& io, SandboxBackend& backend,
           const std::map<std::string, std::string>& labels, const std::string& id) {
  const auto found = run_async(io, backend.list(labels), std::chrono::seconds(60));
  const SandboxInfo* left = info_of(found, id);
  return left == nullptr || !left->running;
}

std::string describe(const GcReport& r) {
  std::string text;
  for (const auto* list : {&r.removed, &r.kept}) {
    text += list == &r.removed ? "removed:" : "; kept:";
    for (const auto& e : *list)
      text += fmt::format(" [{} {}: {}]", e.id, e.name, e.reason);
  }
  for (const auto& e : r.errors)
    text += "; error: " + e;
  return text;
}

}  // namespace

TEST_P(BackendConformance, ASandboxIsFoundByItsLabelsAndGoneAfterDestroy) {
  const std::string mark = random_hex(6);
  const StartedSandbox started =
      create("rex-conformance-" + mark, {{"rex.test", mark}}, "conformance-" + mark);
  ASSERT_FALSE(started.id.empty());
  EXPECT_FALSE(started.working_dir.empty());

  auto client = client_of(io, *backend, started);
  EXPECT_TRUE(run_async(io, client->is_alive()).is_alive) << "the sandbox's server answers";
  const auto running = run_async(io, backend->lost(started.id), std::chrono::seconds(60));
  EXPECT_FALSE(running.has_value()) << "a running sandbox seen as lost: " << *running;

  // Found by its labels, with them; and not by another value of one of them.
  const auto found = run_async(io, backend->list({{"rex.test", mark}}), std::chrono::seconds(60));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id, started.id);
  EXPECT_TRUE(found[0].running);
  EXPECT_EQ(found[0].labels.at("rex.test"), mark);
  EXPECT_EQ(found[0].labels.at(std::string(labels::managed)), "1") << "rex's own labels";
  const auto deployment = found[0].labels.find(std::string(labels::deployment));
  EXPECT_TRUE(deployment != found[0].labels.end() && deployment->second == "conformance-" + mark)
      << "the asking deployment's id is not among its labels";
  EXPECT_GT(found[0].created_at, 0);
  const auto other = run_async(io, backend->list({{"rex.test", mark + "-other"}}));
  EXPECT_EQ(info_of(other, started.id), nullptr) << "found by a label it does not carry";

  run_async(io, backend->destroy(started.id), std::chrono::seconds(120));
  EXPECT_TRUE(within_a_minute([&] {
    return ended(io, *backend, {{"rex.test", mark}}, started.id);
  })) << "still running a minute after destroy()";
  run_async(io, backend->destroy(started.id), std::chrono::seconds(60));  // gone: no error
  // The backend sees it lost, in its own words (a sandbox it no longer knows included).
  std::string why;
  EXPECT_TRUE(within_a_minute([&] {
    why = run_async(io, backend->lost(started.id), std::chrono::seconds(60)).value_or("");
    return !why.empty();
  })) << "the backend does not see the destroyed sandbox lost";
  EXPECT_NE(why.find(started.id), std::string::npos) << "the reason names the sandbox: " << why;
  // A client of it sees it lost (once its server has ended: a pod's may take a moment).
  EXPECT_TRUE(within_a_minute([&] {
    return !run_async(io, client->is_alive(), std::chrono::seconds(60)).is_alive;
  })) << "a client of the destroyed sandbox does not see it lost";
}

TEST_P(BackendConformance, AFailedStartSaysWhyAndLeavesNothing) {
  const BackendCase& c = GetParam();
  ASSERT_FALSE(c.failing_says.empty()) << "the case names no request that fails to start";
  const std::string mark = random_hex(6);
  SandboxRequest request = c.failing;
  request.labels.emplace("rex.test", mark);
  request.lifetime = Seconds(600);
  request.name = "rex-conformance-failing-" + mark;
  request.purpose = "the conformance suite";
  std::string error;
  try {
    const StartedSandbox started =
        run_async(io, backend->create(std::move(request)), std::chrono::seconds(180));
    run_async(io, backend->destroy(started.id), std::chrono::seconds(120));
    FAIL() << "the failing request started " << started.id;
  } catch (const DeploymentStartupError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find(c.failing_says), std::string::npos) << error;
  // What create() made is removed before it throws: nothing of it runs now.
  const auto found = run_async(io, backend->list({{"rex.test", mark}}), std::chrono::seconds(60));
  for (const SandboxInfo& s : found)
    EXPECT_FALSE(s.running) << s.id << " runs after its failed start";
}

TEST_P(BackendGcConformance, KeepsALiveOwnersSandboxAndAllRemovesIt) {
  ASSERT_NE(entry->gc, nullptr) << settings.type() << " has no rex gc";
  const StartedSandbox started = create("rex-conformance-gc-" + random_hex(6));

  const auto collect = [&](GcOptions options) {
    return run_async(io, entry->gc(io.get_executor(), settings, options),
                     std::chrono::seconds(120));
  };
  const GcReport kept = collect(GcOptions{});
  EXPECT_EQ(entry_of(kept.removed, started.id), nullptr);
  const GcEntry* live = entry_of(kept.kept, started.id);
  ASSERT_NE(live, nullptr) << "gc did not list the sandbox " << started.id << ": "
                           << describe(kept);
  EXPECT_EQ(live->reason, fmt::format("owner process {} is running", ::getpid()));

  const GcReport preview = collect(GcOptions{.all = true, .dry_run = true});
  EXPECT_NE(entry_of(preview.removed, started.id), nullptr);
  const auto still = run_async(io, backend->list({}), std::chrono::seconds(60));
  const SandboxInfo* there = info_of(still, started.id);
  ASSERT_NE(there, nullptr) << "a dry run removed it";
  EXPECT_TRUE(there->running);

  if (!GetParam().collects_all) {
    run_async(io, backend->destroy(started.id), std::chrono::seconds(120));
    return;
  }
  const GcReport all = collect(GcOptions{.all = true});
  const GcEntry* removed = entry_of(all.removed, started.id);
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(removed->reason, "--all");
  EXPECT_TRUE(all.errors.empty()) << all.errors.front();
  EXPECT_TRUE(within_a_minute([&] { return ended(io, *backend, {}, started.id); }))
      << "still running a minute after gc --all";
}

}  // namespace rex::test
