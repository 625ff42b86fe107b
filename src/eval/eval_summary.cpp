#include <rex/eval/eval_summary.hpp>

#include <algorithm>
#include <cmath>

namespace rex {

namespace {

EvalPhaseStats phase_stats(const std::vector<EvalResult>& results,
                           std::optional<double> EvalPhaseTimes::*phase) {
  std::vector<double> values;
  for (const auto& r : results) {
    if (const auto& v = r.times.*phase)
      values.push_back(*v);
  }
  EvalPhaseStats stats;
  stats.count = values.size();
  if (values.empty())
    return stats;
  stats.max = *std::max_element(values.begin(), values.end());
  stats.p50 = percentile(values, 0.50);
  stats.p95 = percentile(std::move(values), 0.95);
  return stats;
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least q of the values at or below it.
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size()));
  const std::size_t index = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

EvalSummary summarize(const std::vector<EvalResult>& results) {
  EvalSummary s;
  for (const auto& r : results)
    ++s.counts[static_cast<std::size_t>(r.status)];
  s.total = results.size();
  s.start = phase_stats(results, &EvalPhaseTimes::start);
  s.setup = phase_stats(results, &EvalPhaseTimes::setup);
  s.run = phase_stats(results, &EvalPhaseTimes::run);
  s.teardown = phase_stats(results, &EvalPhaseTimes::teardown);
  return s;
}

}  // namespace rex
