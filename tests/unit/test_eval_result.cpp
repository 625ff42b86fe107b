// The evaluation record format: one JSON line per instance, round trips, the documented shape,
// errors that name the field, timestamps.
#include <rex/eval/eval_result.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <string>

#include "support/sample_eval_result.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

using ::testing::HasSubstr;
namespace json = boost::json;
using test::sample_result;

TEST(EvalResultJson, RoundTripsEveryField) {
  EvalResult r = sample_result("x", EvalStatus::error);
  r.exit_code.reset();
  r.error = EvalError{"setup", "SetupCommandFailed", "setup command 1 of 1 exited with 2: make"};
  r.times.run.reset();
  r.output_truncated = true;
  const json::value j = to_json(r);
  EXPECT_EQ(j.at("status"), "error");
  EXPECT_TRUE(j.at("exit_code").is_null());
  EXPECT_TRUE(j.at("times").at("run").is_null());
  EXPECT_EQ(j.at("error").at("phase"), "setup");
  EXPECT_TRUE(j.at("artifacts").at(1).at("saved").is_null());
  EXPECT_FALSE(j.at("artifacts").at(0).as_object().contains("error"));

  const std::string line = to_json_line(r);
  EXPECT_THAT(line, HasSubstr(R"("times":{"start":0.25,"setup":0.5,"run":null,"teardown":0.125})"));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const EvalResult back = eval_result_from_json(json::parse(line));
  EXPECT_EQ(to_json_line(back), line);
  EXPECT_EQ(json::serialize(to_json(back)), json::serialize(j));
}

TEST(EvalResultJson, ReadsTheDocumentedShape) {
  const auto r = eval_result_from_json(json::parse(
      R"({"id":"a","status":"timeout","exit_code":null,"setup_exit_codes":[0],"error":null,
          "times":{"start":0.1,"setup":0.2,"run":5.0,"teardown":null},"started":"s","finished":"f",
          "artifacts":[],"output_truncated":false,"output":"partial","future_field":1})"));
  EXPECT_EQ(r.status, EvalStatus::timeout);
  EXPECT_FALSE(r.exit_code);
  EXPECT_EQ(r.times.run, 5.0);
  EXPECT_FALSE(r.times.teardown);
  EXPECT_EQ(r.output, "partial");
}

TEST(EvalResultJson, BadRecordsNameTheField) {
  EXPECT_THROW_MESSAGE(eval_result_from_json(json::parse(R"({"status":"passed"})")),
                       EvalResultError, "result record: id: required");
  EXPECT_THROW_MESSAGE(
      eval_result_from_json(json::parse(R"({"id":"a","status":"won"})")), EvalResultError,
      "result record a: status: expected passed, failed, timeout or error, got \"won\"");
  EXPECT_THROW_MESSAGE(
      eval_result_from_json(json::parse(R"({"id":"a","status":"failed","exit_code":"1"})")),
      EvalResultError, "result record: exit_code: expected an integer");
}

TEST(EvalResultJson, OutputTailStartsOnACharacter) {
  bool truncated = true;
  EXPECT_EQ(tail_of_output("short", 16, truncated), "short");
  EXPECT_FALSE(truncated);
  EXPECT_EQ(tail_of_output("0123456789", 4, truncated), "6789");
  EXPECT_TRUE(truncated);
  // "é" is two bytes: a cut inside it moves to the next character.
  EXPECT_EQ(tail_of_output("ab\xc3\xa9xy", 3, truncated), "xy");
  EXPECT_EQ(tail_of_output("ab\xc3\xa9xy", 4, truncated), "\xc3\xa9xy");
}

TEST(EvalResultJson, Timestamps) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1738324800125));
  EXPECT_EQ(format_utc_timestamp(t), "2025-01-31T12:00:00.125Z");
}

}  // namespace
}  // namespace rex
