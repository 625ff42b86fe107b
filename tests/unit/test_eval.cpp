// The evaluation's pure parts and its results file: instance parsing and its errors, the record
// format, the results log (resume, torn last line, rewrite, lock) and the summary.
#include <rex/eval/eval_instance.hpp>
#include <rex/eval/eval_result.hpp>
#include <rex/eval/eval_summary.hpp>
#include <rex/eval/results_log.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/test_helpers.hpp"

namespace rex {
namespace {

using ::testing::HasSubstr;
namespace json = boost::json;

using test::read_text;

// ---- instances ---------------------------------------------------------------------------

std::string parse_error(std::string_view line) {
  try {
    parse_eval_instance(line, "/base", "f.jsonl:7");
  } catch (const EvalInstanceError& e) {
    return e.what();
  }
  return "no error";
}

TEST(EvalInstance, ParsesEveryField) {
  const auto i = parse_eval_instance(
      R"({"id":"a-1","image":"python:3.12","upload":[{"source":"data/x.txt","target":"x.txt"},
          {"source":"/abs/y","target":"/tmp/y"}],"setup":["cd /tmp","export A=1"],
          "run":"echo $A\nexit 3","timeout":2.5,"artifacts":["out/report.json","/tmp/log"]})",
      "/base/dir", "f:1");
  EXPECT_EQ(i.id, "a-1");
  EXPECT_EQ(i.image, "python:3.12");
  ASSERT_EQ(i.upload.size(), 2u);
  EXPECT_EQ(i.upload[0].source, "/base/dir/data/x.txt");
  EXPECT_EQ(i.upload[0].target, "x.txt");
  EXPECT_EQ(i.upload[1].source, "/abs/y");
  EXPECT_EQ(i.setup, (std::vector<std::string>{"cd /tmp", "export A=1"}));
  EXPECT_EQ(i.run, "echo $A\nexit 3");
  EXPECT_EQ(i.timeout, 2.5);
  EXPECT_EQ(i.artifacts, (std::vector<std::string>{"out/report.json", "/tmp/log"}));
  EXPECT_FALSE(i.deployment);
}

TEST(EvalInstance, DeploymentObjectIsADeploymentConfig) {
  const auto i = parse_eval_instance(
      R"({"id":"d","run":"true","deployment":{"type":"local","env":{"K":"V"}}})", "/", "f:1");
  ASSERT_TRUE(i.deployment);
  ASSERT_TRUE(std::holds_alternative<LocalDeploymentConfig>(*i.deployment));
  EXPECT_EQ(std::get<LocalDeploymentConfig>(*i.deployment).env.at("K"), "V");
  EXPECT_THAT(parse_error(R"({"id":"d","run":"true","deployment":{"type":"local","nope":1}})"),
              HasSubstr("f.jsonl:7: deployment: "));
}

TEST(EvalInstance, ErrorsNameTheLineAndTheField) {
  EXPECT_EQ(parse_error(R"({"id":"a","run":"x","timeout":"10"})"),
            "f.jsonl:7: timeout: expected a positive number of seconds, got a string");
  EXPECT_EQ(parse_error(R"({"id":"a","run":"x","timeout":0})"),
            "f.jsonl:7: timeout: expected a positive number of seconds, got a number <= 0");
  EXPECT_THAT(parse_error(R"({"id":"a","run":"x","tiemout":1})"),
              HasSubstr("f.jsonl:7: unknown field \"tiemout\" (known: id, image"));
  EXPECT_EQ(parse_error(R"({"run":"x"})"), "f.jsonl:7: id: required");
  EXPECT_EQ(parse_error(R"({"id":5,"run":"x"})"), "f.jsonl:7: id: expected a string, got a number");
  EXPECT_EQ(parse_error(R"({"id":"a"})"), "f.jsonl:7: run: required, a command or script");
  EXPECT_EQ(parse_error(R"({"id":"a","run":"x","setup":"make"})"),
            "f.jsonl:7: setup: expected an array of strings, got a string");
  EXPECT_EQ(parse_error(R"({"id":"a","run":"x","setup":["ok",3]})"),
            "f.jsonl:7: setup[1]: expected a string, got a number");
  EXPECT_EQ(parse_error(R"({"id":"a","run":"x","upload":[{"source":"s"}]})"),
            "f.jsonl:7: upload[0].target: required, a non-empty path");
  EXPECT_EQ(parse_error(R"({"id":"a","run":"x","upload":[{"source":"s","target":"t","mode":1}]})"),
            "f.jsonl:7: upload[0]: unknown field \"mode\" (known: source, target)");
  EXPECT_EQ(parse_error(R"({"id":"a/b","run":"x"})"),
            "f.jsonl:7: id: \"a/b\" holds '/' or a control character (ids name directories)");
  EXPECT_EQ(parse_error(R"({"id":"..","run":"x"})"),
            "f.jsonl:7: id: must be 1 to 200 characters and not \".\" or \"..\"");
  EXPECT_THAT(parse_error(R"({"id":"a","run":"x","image":"i","deployment":{"type":"docker"}})"),
              HasSubstr("f.jsonl:7: image and deployment: give one"));
  EXPECT_THAT(parse_error("[1,2]"), HasSubstr("f.jsonl:7: expected a JSON object, got an array"));
  EXPECT_THAT(parse_error("{\"id\": \"a\", "), HasSubstr("f.jsonl:7: not valid JSON"));
}

TEST(EvalInstance, ArtifactNamesMustNotCollide) {
  EXPECT_EQ(eval_artifact_name("/tmp/out/report.json"), "report.json");
  EXPECT_EQ(eval_artifact_name("results/"), "results");
  EXPECT_EQ(eval_artifact_name("plain"), "plain");
  EXPECT_THAT(parse_error(R"({"id":"a","run":"x","artifacts":["a/r.json","b/r.json"]})"),
              HasSubstr("\"a/r.json\" and \"b/r.json\" would both be saved as \"r.json\""));
  EXPECT_THAT(parse_error(R"({"id":"a","run":"x","artifacts":["/tmp/run.log"]})"),
              HasSubstr("would be saved as run.log, which holds rex's log"));
  EXPECT_THAT(parse_error(R"({"id":"a","run":"x","artifacts":["/"]})"),
              HasSubstr("has no file name"));
}

TEST(EvalInstance, LoadingReportsEveryProblemWithItsLine) {
  test::TempDir dir;
  dir.file("present.txt", "x");
  const std::string path = dir.file("instances.jsonl",
                                    "{\"id\":\"a\",\"run\":\"true\"}\n"
                                    "\n"
                                    "{\"id\":\"b\",\"run\":\"true\",\"timeout\":\"x\"}\n"
                                    "{\"id\":\"a\",\"run\":\"false\"}\n"
                                    "{\"id\":\"c\",\"run\":\"true\",\"upload\":[{\"source\":"
                                    "\"present.txt\",\"target\":\"p\"},{\"source\":\"missing.txt\","
                                    "\"target\":\"m\"}]}\n");
  try {
    load_eval_instances(path);
    ADD_FAILURE() << "loaded";
  } catch (const EvalInstanceError& e) {
    ASSERT_EQ(e.problems().size(), 3u) << e.what();
    EXPECT_EQ(e.problems()[0], path +
                                   ":3: timeout: expected a positive number of seconds, got a "
                                   "string");
    EXPECT_EQ(e.problems()[1], path + ":4: id \"a\" is already used on line 1");
    EXPECT_EQ(e.problems()[2], path + ":5: upload[1].source: no such file or directory: " +
                                   dir.path() + "/missing.txt");
  }
}

TEST(EvalInstance, LoadingKeepsLineNumbersAndOrder) {
  test::TempDir dir;
  const std::string path = dir.file(
      "i.jsonl", "\n{\"id\":\"x\",\"run\":\"true\"}\n   \n{\"id\":\"y\",\"run\":\"true\"}");
  const auto instances = load_eval_instances(path);
  ASSERT_EQ(instances.size(), 2u);
  EXPECT_EQ(instances[0].id, "x");
  EXPECT_EQ(instances[0].line, 2);
  EXPECT_EQ(instances[1].id, "y");
  EXPECT_EQ(instances[1].line, 4);
  EXPECT_THROW(load_eval_instances(dir.path() + "/none.jsonl"), EvalInstanceError);
  EXPECT_THROW(load_eval_instances(dir.file("empty.jsonl", "\n\n")), EvalInstanceError);
}

// ---- records -----------------------------------------------------------------------------

EvalResult sample_result(std::string id, EvalStatus status = EvalStatus::passed) {
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

// ---- results log -------------------------------------------------------------------------

TEST(ResultsLog, AppendsLinesThatAReopenedLogReads) {
  test::TempDir dir;
  const std::string path = dir.path() + "/out/results.jsonl";
  {
    ResultsLog log(path);
    EXPECT_TRUE(log.records().empty());
    log.append(sample_result("a"));
    log.append(sample_result("b", EvalStatus::failed));
  }
  const std::string text = read_text(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  ResultsLog log(path);
  EXPECT_EQ(log.records().size(), 2u);
  EXPECT_TRUE(log.contains("a"));
  EXPECT_EQ(log.records().at("b").status, EvalStatus::failed);
  EXPECT_EQ(log.repaired_bytes(), 0u);
}

TEST(ResultsLog, CutsATornLastLine) {
  test::TempDir dir;
  const std::string path = dir.path() + "/results.jsonl";
  { ResultsLog(path).append(sample_result("a")); }
  const std::string good = read_text(path);
  const std::string torn = R"({"id":"b","status":"pas)";
  std::ofstream(path, std::ios::app) << torn;
  {
    ResultsLog log(path);
    EXPECT_EQ(log.repaired_bytes(), torn.size());
    EXPECT_EQ(log.records().size(), 1u);
    EXPECT_EQ(read_text(path), good);
    log.append(sample_result("b"));
  }
  ResultsLog again(path);
  EXPECT_EQ(again.records().size(), 2u);
  EXPECT_EQ(again.repaired_bytes(), 0u);
}

TEST(ResultsLog, CutsACompleteButBrokenLastLine) {
  test::TempDir dir;
  const std::string path = dir.path() + "/results.jsonl";
  { ResultsLog(path).append(sample_result("a")); }
  std::ofstream(path, std::ios::app) << "{\"id\":\n";
  ResultsLog log(path);
  EXPECT_EQ(log.repaired_bytes(), 7u);  // {"id":\n
  EXPECT_EQ(log.records().size(), 1u);
}

TEST(ResultsLog, ABadLineElsewhereIsAnError) {
  test::TempDir dir;
  const std::string path = dir.file("results.jsonl", "not json\n");
  { std::ofstream(path, std::ios::app) << json::serialize(to_json(sample_result("a"))) << "\n"; }
  EXPECT_THROW_CONTAINING(ResultsLog log(path), ResultsLogError,
                          "results.jsonl:1: not a result record");
}

TEST(ResultsLog, LaterRecordOfAnIdWins) {
  test::TempDir dir;
  const std::string path = dir.path() + "/results.jsonl";
  {
    ResultsLog log(path);
    log.append(sample_result("a", EvalStatus::error));
    log.append(sample_result("a", EvalStatus::passed));
  }
  EXPECT_EQ(ResultsLog(path).records().at("a").status, EvalStatus::passed);
}

TEST(ResultsLog, RemoveIfRewritesTheFileInOrder) {
  test::TempDir dir;
  const std::string path = dir.path() + "/results.jsonl";
  {
    ResultsLog log(path);
    log.append(sample_result("z"));
    log.append(sample_result("e1", EvalStatus::error));
    log.append(sample_result("a"));
    log.append(sample_result("e2", EvalStatus::error));
    const auto removed =
        log.remove_if([](const EvalResult& r) { return r.status == EvalStatus::error; });
    EXPECT_EQ(removed, 2u);
    EXPECT_FALSE(log.contains("e1"));
    log.append(sample_result("e1", EvalStatus::failed));  // still appends, still locked
    EXPECT_THROW(ResultsLog second(path), ResultsLogError);
  }
  const std::string text = read_text(path);
  const auto z = text.find("\"id\":\"z\"");
  const auto a = text.find("\"id\":\"a\"");
  const auto e1 = text.find("\"id\":\"e1\"");
  ASSERT_NE(z, std::string::npos);
  EXPECT_LT(z, a);
  EXPECT_LT(a, e1);
  EXPECT_EQ(text.find("e2"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path + ".rewrite"));
  EXPECT_EQ(ResultsLog(path).records().size(), 3u);
}

TEST(ResultsLog, OneWriterAtATime) {
  test::TempDir dir;
  const std::string path = dir.path() + "/results.jsonl";
  ResultsLog first(path);
  EXPECT_THROW_CONTAINING(ResultsLog second(path), ResultsLogError,
                          "is in use by another rex eval");
}

// ---- summary -----------------------------------------------------------------------------

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
