// Deployments and backends without checkpoints, pauses or metrics refuse them with an error that
// names the backend (or the deployment) and the operation, before anything starts.
#include <rex/backends/backends.hpp>
#include <rex/deployment/checkpoint.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "support/async_test.hpp"

namespace rex {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::string refusal(Deployment& d, asio::io_context& io,
                    std::function<asio::awaitable<void>(Deployment&)> op) {
  try {
    test::run_async(io, op(d), 10s);
  } catch (const OperationUnsupportedError& e) {
    return e.what();
  }
  return "(no OperationUnsupportedError)";
}

TEST(CheckpointRefusals, BackendsWithoutThemNameThemselvesAndTheOperation) {
  asio::io_context io;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"kubernetes","image":"rex-test-bookworm:latest"})", "the kubernetes backend"},
      {R"({"type":"daytona","image":"python:3.11","api_key":"k"})", "the daytona backend"},
      {R"({"type":"local"})", "this deployment"},
  };
  for (const auto& [config, who] : cases) {
    auto d =
        make_deployment(io.get_executor(), deployment_config_from_json(boost::json::parse(config)));
    EXPECT_THAT(refusal(*d, io,
                        [](Deployment& x) -> asio::awaitable<void> {
                          auto saving = x.checkpoint();
                          (void)co_await std::move(saving);
                        }),
                HasSubstr(who + " cannot checkpoint a sandbox"))
        << config;
    EXPECT_THAT(refusal(*d, io,
                        [](Deployment& x) -> asio::awaitable<void> {
                          auto pausing = x.pause(true);
                          co_await std::move(pausing);
                        }),
                HasSubstr(who + " cannot pause a sandbox"))
        << config;
    EXPECT_THAT(refusal(*d, io,
                        [](Deployment& x) -> asio::awaitable<void> {
                          auto measuring = x.metrics();
                          (void)co_await std::move(measuring);
                        }),
                HasSubstr(who + " cannot measure a sandbox"))
        << config;
    EXPECT_THAT(refusal(*d, io,
                        [](Deployment& x) -> asio::awaitable<void> {
                          Checkpoint none;
                          auto forking = x.fork(none, 2);
                          (void)co_await std::move(forking);
                        }),
                HasSubstr(who + " cannot fork a sandbox"))
        << config;
  }
}

}  // namespace
}  // namespace rex
