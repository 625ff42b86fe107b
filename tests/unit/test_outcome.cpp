#include <rex/core/outcome.hpp>

#include "support/async_test.hpp"

#include <stdexcept>

namespace rex {
namespace {

namespace asio = boost::asio;

asio::awaitable<int> give(int value) {
  co_return value;
}

asio::awaitable<void> fail() {
  throw std::runtime_error("boom");
  co_return;
}

TEST(Outcome, CaptureRecordsValueOrException) {
  auto ok = capture([] { return 7; });
  EXPECT_EQ(ok.value(), 7);
  auto bad = capture([]() -> int { throw std::runtime_error("no"); });
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.error_message(), "no");
  EXPECT_THROW(bad.value(), std::runtime_error);
  auto done = capture([] {});
  EXPECT_TRUE(done);
  EXPECT_THROW(Outcome<int>().value(), std::logic_error);
}

TEST(Outcome, CaptureAwaitsAnOperation) {
  auto value = test::run_async(capture(give(3)));
  EXPECT_EQ(value.value(), 3);
  auto failed = test::run_async(capture(fail()));
  EXPECT_FALSE(failed);
  EXPECT_EQ(failed.error_message(), "boom");
}

}  // namespace
}  // namespace rex
