// A sample EvalResult with every field set, shared by the tests of the record format, the
// results log and the summary.
#pragma once

#include <rex/eval/eval_result.hpp>

#include <string>
#include <utility>

namespace rex::test {

inline EvalResult sample_result(std::string id, EvalStatus status = EvalStatus::passed) {
  EvalResult r;
  r.id = std::move(id);
  r.status = status;
  r.exit_code = status == EvalStatus::passed ? 0 : 1;
  r.setup_exit_codes = {0, 0};
  r.output = "hello\n";
  r.times.start = 0.25;
  r.times.setup = 0.5;
  r.times.run = 1.0;
  r.times.teardown = 0.125;
  r.artifacts = {{"out.txt", "artifacts/x/out.txt", std::nullopt},
                 {"/missing", std::nullopt, "No such file"}};
  r.started = "2025-01-31T12:00:00.000Z";
  r.finished = "2025-01-31T12:00:01.875Z";
  return r;
}

}  // namespace rex::test
