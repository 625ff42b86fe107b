// The retry loop of the services' calls: attempts until one gives a value, the last one told so,
// its throw passed on, pauses between attempts and none after the last.
#include <rex/core/retry.hpp>

#include "support/async_test.hpp"
#include "support/test_helpers.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <vector>

namespace rex {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// 5 attempts, 10 ms doubling to 40 ms, no jitter: pauses of 10, 20, 40, 40 ms.
RetryLoop quick() {
  return RetryLoop{.max_attempts = 5, .backoff = Backoff{10ms, 40ms, 2.0, 0.0}};
}

TEST(Retrying, TriesUntilAnAttemptGivesAValue) {
  asio::io_context io;
  std::vector<std::pair<unsigned, bool>> seen;
  auto attempt = [&](unsigned n, bool last) -> asio::awaitable<std::optional<int>> {
    seen.emplace_back(n, last);
    co_return n == 3 ? std::optional<int>(42) : std::nullopt;
  };
  const auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(test::run_async(io, retrying<int>(io.get_executor(), quick(), attempt)), 42);
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_EQ(seen, (std::vector<std::pair<unsigned, bool>>{{1, false}, {2, false}, {3, false}}));
  EXPECT_GE(took, 30ms);  // the pauses before attempts 2 and 3
}

TEST(Retrying, TheLastAttemptIsToldAndItsThrowGoesOn) {
  asio::io_context io;
  std::vector<std::pair<unsigned, bool>> seen;
  auto attempt = [&](unsigned n, bool last) -> asio::awaitable<std::optional<int>> {
    seen.emplace_back(n, last);
    if (last)
      throw std::runtime_error("gave up after " + std::to_string(n));
    co_return std::nullopt;
  };
  EXPECT_THROW_MESSAGE(test::run_async(io, retrying<int>(io.get_executor(), quick(), attempt)),
                       std::runtime_error, "gave up after 5");
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen.back(), (std::pair<unsigned, bool>{5, true}));
}

TEST(Retrying, AThrowEndsTheLoopAtOnce) {
  asio::io_context io;
  unsigned attempts = 0;
  auto attempt = [&](unsigned, bool) -> asio::awaitable<std::optional<int>> {
    ++attempts;
    throw std::invalid_argument("not worth another try");
    co_return std::nullopt;
  };
  EXPECT_THROW(test::run_async(io, retrying<int>(io.get_executor(), quick(), attempt)),
               std::invalid_argument);
  EXPECT_EQ(attempts, 1u);
}

TEST(Retrying, OneAttemptIsTheLast) {
  asio::io_context io;
  auto attempt = [](unsigned, bool last) -> asio::awaitable<std::optional<int>> {
    co_return last ? std::optional<int>(7) : std::nullopt;
  };
  EXPECT_EQ(
      test::run_async(io, retrying<int>(io.get_executor(), RetryLoop{.max_attempts = 1}, attempt)),
      7);
}

TEST(Retrying, TheLastAttemptAskingForAnotherIsAMistake) {
  asio::io_context io;
  auto attempt = [](unsigned, bool) -> asio::awaitable<std::optional<int>> {
    co_return std::nullopt;
  };
  EXPECT_THROW(
      test::run_async(io, retrying<int>(io.get_executor(),
                                        RetryLoop{.max_attempts = 2, .backoff = {1ms}}, attempt)),
      std::logic_error);
}

}  // namespace
}  // namespace rex
