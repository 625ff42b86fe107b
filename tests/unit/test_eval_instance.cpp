// Instances of an evaluation: parsing every field, errors that name the line and the field,
// artifact names, loading a file.
#include <rex/backends/local/local_config.hpp>
#include <rex/eval/eval_instance.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <string_view>

#include "support/test_helpers.hpp"

namespace rex {
namespace {

using ::testing::HasSubstr;

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
  ASSERT_TRUE(i.deployment->holds<LocalDeploymentConfig>());
  EXPECT_EQ(i.deployment->get<LocalDeploymentConfig>().env.at("K"), "V");
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

}  // namespace
}  // namespace rex
