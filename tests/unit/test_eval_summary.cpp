// The summary of an evaluation: counts per status and nearest-rank timing percentiles.
#include <rex/eval/eval_summary.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/sample_eval_result.hpp"

namespace rex {
namespace {

using test::sample_result;

TEST(EvalSummary, CountsAndPercentiles) {
  EXPECT_EQ(percentile({}, 0.5), 0);
  EXPECT_EQ(percentile({3, 1, 2}, 0.5), 2);
  EXPECT_EQ(percentile({1, 2, 3, 4}, 0.5), 2);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i)
    hundred.push_back(i);
  EXPECT_EQ(percentile(hundred, 0.95), 95);
  EXPECT_EQ(percentile(hundred, 1.0), 100);

  std::vector<EvalResult> results;
  for (int i = 0; i < 4; ++i)
    results.push_back(sample_result("p" + std::to_string(i)));
  results.push_back(sample_result("f", EvalStatus::failed));
  EvalResult e = sample_result("e", EvalStatus::error);
  e.times.setup.reset();
  e.times.run.reset();
  e.times.start = 9;
  results.push_back(e);
  const auto s = summarize(results);
  EXPECT_EQ(s.total, 6u);
  EXPECT_EQ(s.count(EvalStatus::passed), 4u);
  EXPECT_EQ(s.count(EvalStatus::failed), 1u);
  EXPECT_EQ(s.count(EvalStatus::error), 1u);
  EXPECT_EQ(s.count(EvalStatus::timeout), 0u);
  EXPECT_EQ(s.run.count, 5u);
  EXPECT_EQ(s.start.count, 6u);
  EXPECT_EQ(s.start.max, 9);
  EXPECT_EQ(s.start.p50, 0.25);
}

}  // namespace
}  // namespace rex
