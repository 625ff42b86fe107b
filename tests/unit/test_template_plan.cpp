// plan_dockerfile(): E2B's build steps as the Dockerfile the gateway's engine builds.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>

#include "gateway/template_record.hpp"

namespace rex::gateway {
namespace {

namespace json = boost::json;

DockerfilePlan plan(const char* request) {
  return plan_dockerfile(json::parse(request).as_object(), "rex-test-bookworm:latest");
}

std::string error_of(const char* request) {
  try {
    plan(request);
  } catch (const TemplateError& e) {
    return std::string(e.what()) + " @" + e.step();
  }
  return "no error";
}

const std::string kHash(64, 'a');

TEST(TemplatePlan, StepsBecomeTheDockerfileAndTheSandboxDefaults) {
  const std::string request = R"({"fromImage": "rex-test-bookworm:latest", "steps": [
      {"type": "ENV", "args": ["A", "x \"y\" $HOME", "B", "2"]},
      {"type": "COPY", "args": ["./app/", "/opt/app/", "user", "0755"], "filesHash": ")" +
                              kHash + R"("},
      {"type": "RUN", "args": ["echo one && echo two"]},
      {"type": "RUN", "args": ["whoami", "user"]},
      {"type": "WORKDIR", "args": ["/opt/app"]},
      {"type": "USER", "args": ["builder"]},
      {"type": "RUN", "args": ["make"]}],
    "startCmd": "serve", "readyCmd": "probe"})";
  const DockerfilePlan p = plan(request.c_str());
  EXPECT_EQ(p.dockerfile,
            "FROM rex-test-bookworm:latest\n"
            "USER root\n"
            "RUN [\"/bin/sh\",\"-c\",\"id -u user >/dev/null 2>&1 || useradd -m -s /bin/bash user "
            "2>/dev/null || adduser -D user; home=$(getent passwd user | cut -d: -f6); mkdir -p "
            "\\\"${home:-/home/user}\\\" && chown user \\\"${home:-/home/user}\\\"\"]\n"
            "WORKDIR /home/user\n"
            "ENV A=\"x \\\"y\\\" \\$HOME\" B=\"2\"\n"
            "COPY --chown=user [\"files/" +
                kHash +
                "/app/\",\"/opt/app/\"]\n"
                "RUN [\"/bin/sh\",\"-c\",\"chmod 0755 \\\"$0\\\"\",\"/opt/app/\"]\n"
                "RUN [\"/bin/bash\",\"-c\",\"echo one && echo two\"]\n"
                "USER user\n"
                "RUN [\"/bin/bash\",\"-c\",\"whoami\"]\n"
                "USER root\n"
                "WORKDIR /opt/app\n"
                "RUN [\"/bin/sh\",\"-c\",\"id -u builder >/dev/null 2>&1 || useradd -m -s "
                "/bin/bash builder 2>/dev/null || adduser -D builder; home=$(getent passwd builder "
                "| cut -d: -f6); mkdir -p \\\"${home:-/home/builder}\\\" && chown builder "
                "\\\"${home:-/home/builder}\\\"\"]\n"
                "USER builder\n"
                "RUN [\"/bin/bash\",\"-c\",\"make\"]\n"
                "USER root\n");
  EXPECT_EQ(p.file_hashes, std::vector<std::string>{kHash});
  EXPECT_EQ(p.user, "builder");
  EXPECT_EQ(p.working_dir, "/opt/app");
  EXPECT_EQ(p.start_cmd, "serve");
  EXPECT_EQ(p.ready_cmd, "probe");
  EXPECT_FALSE(p.force);
  // The engine's step numbers map back to E2B's: the base's four, then each step's.
  EXPECT_EQ(step_of_line(p, "Step 1/16 : FROM rex-test-bookworm:latest"), "base");
  EXPECT_EQ(step_of_line(p, "Step 5/16 : ENV A=..."), "1");
  EXPECT_EQ(step_of_line(p, "STEP 8/16: RUN echo one"), "3");
  EXPECT_EQ(step_of_line(p, "Step 16/16 : USER root"), "finalize");
  EXPECT_EQ(step_of_line(p, "Step 99/16 : nothing"), std::nullopt);
  EXPECT_EQ(step_of_line(p, " ---> Running in 1234"), std::nullopt);
}

TEST(TemplatePlan, DefaultsWithoutUserOrWorkdirAndForce) {
  const DockerfilePlan p = plan(R"({"steps": [{"type": "RUN", "args": ["true"], "force": true}]})");
  EXPECT_EQ(p.user, "user");
  EXPECT_EQ(p.working_dir, "/home/user");
  EXPECT_TRUE(p.force);
}

TEST(TemplatePlan, MalformedStepsAreNamed) {
  EXPECT_EQ(error_of(R"({"steps": [{"type": "RUN", "args": ["true"]}, {"type": "ADD"}]})"),
            "step 2: unknown step type \"ADD\" (known: RUN, COPY, ENV, WORKDIR, USER) @2");
  EXPECT_EQ(error_of(R"({"steps": [{"type": "RUN", "args": []}]})"), "step 1: RUN: no command @1");
  EXPECT_EQ(error_of(R"({"steps": [{"type": "COPY", "args": ["a", "/b"], "filesHash": "x"}]})"),
            "step 1: COPY a: filesHash: expected 64 hexadecimal digits @1");
  EXPECT_EQ(error_of((R"({"steps": [{"type": "COPY", "args": ["../etc", "/b"], "filesHash": ")" +
                      kHash + R"("}]})")
                         .c_str()),
            "step 1: COPY ../etc: the source must stay inside the context @1");
  EXPECT_EQ(error_of(R"({"steps": [{"type": "ENV", "args": ["1A", "x"]}]})"),
            "step 1: ENV: invalid variable name \"1A\" @1");
  EXPECT_EQ(error_of(R"({"steps": [{"type": "ENV", "args": ["A", "a\nb"]}]})"),
            "step 1: ENV: a value may not hold a line break @1");
  EXPECT_EQ(error_of(R"({"steps": [{"type": "USER", "args": ["x y"]}]})"),
            "step 1: USER: invalid user \"x y\" @1");
  EXPECT_EQ(error_of(R"({"steps": [{"type": "WORKDIR", "args": ["/a\nRUN evil"]}]})"),
            "step 1: WORKDIR: expected one line of text, got \"/a\\nRUN evil\" @1");
  EXPECT_EQ(error_of(R"({"steps": 3})"), "steps: expected a list of steps @");
}

TEST(TemplatePlan, TheCacheKeyFollowsTheBaseAndTheSteps) {
  const auto a = json::parse(R"({"steps": [{"type": "RUN", "args": ["true"]}]})").as_object();
  const auto b = json::parse(R"({"steps": [{"type": "RUN", "args": ["false"]}]})").as_object();
  EXPECT_EQ(build_key(a, "img:1"), build_key(a, "img:1"));
  EXPECT_NE(build_key(a, "img:1"), build_key(b, "img:1"));
  EXPECT_NE(build_key(a, "img:1"), build_key(a, "img:2"));
}

}  // namespace
}  // namespace rex::gateway
