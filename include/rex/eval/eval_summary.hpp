// EvalSummary: counts per status and per-phase timing percentiles over a set of results, for
// the table `rex eval` prints at the end. Pure computation.
#pragma once

#include <rex/eval/eval_result.hpp>

#include <array>
#include <cstddef>
#include <vector>

namespace rex {

struct EvalPhaseStats {
  std::size_t count = 0;  // results that reached the phase
  double p50 = 0, p95 = 0, max = 0;
};

struct EvalSummary {
  std::array<std::size_t, 4> counts{};  // indexed by EvalStatus
  std::size_t total = 0;
  EvalPhaseStats start{}, setup{}, run{}, teardown{};

  std::size_t count(EvalStatus status) const noexcept {
    return counts[static_cast<std::size_t>(status)];
  }
};

EvalSummary summarize(const std::vector<EvalResult>& results);

/// The nearest-rank percentile (q in [0, 1]) of `values`; 0 for none.
double percentile(std::vector<double> values, double q);

}  // namespace rex
