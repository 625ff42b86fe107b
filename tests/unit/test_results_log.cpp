// The results log of an evaluation: appends a reopened log reads, a torn or broken last line cut,
// bad lines refused, the later record winning, rewrites in order, one writer at a time.
#include <rex/eval/results_log.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json/serialize.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/sample_eval_result.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

namespace json = boost::json;
using test::read_text;
using test::sample_result;

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

}  // namespace
}  // namespace rex
