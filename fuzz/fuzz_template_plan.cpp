// E2B's template build requests (TemplateBuildStartV2's JSON) through plan_dockerfile(), which
// turns them into the Dockerfile the gateway's engine builds.
//
// Properties: a request is either planned or refused with a TemplateError that says something
// (nothing else, no crash); a plan's Dockerfile is one instruction a line, each a known one
// (FROM first, then USER, RUN, WORKDIR, COPY or ENV) with no line break smuggled into it, the
// RUN and COPY ones in JSON form that parses; each line has its E2B step; the image ends as
// root; the uploads are 64 hex digits; the plan's user and directory are one line each; and
// the cache key is the same for the same request.
#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "gateway/template_record.hpp"

namespace {

namespace json = boost::json;
using rex::fuzz::check;

void check_plan(const rex::gateway::DockerfilePlan& plan) {
  std::string_view rest = plan.dockerfile;
  check(!rest.empty() && rest.back() == '\n', "a Dockerfile ends its last line");
  std::size_t lines = 0;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    check(line.find('\r') == std::string_view::npos, "no carriage return in an instruction");
    const auto space = line.find(' ');
    check(space != std::string_view::npos, "an instruction has arguments");
    const std::string_view word = line.substr(0, space);
    if (lines == 0)
      check(word == "FROM", "a Dockerfile starts FROM the base");
    else
      check(word == "USER" || word == "RUN" || word == "WORKDIR" || word == "COPY" || word == "ENV",
            "every instruction is one the planner writes");
    if (word == "RUN" || word == "COPY") {
      std::string_view args = line.substr(space + 1);
      if (args.starts_with("--chown="))
        args.remove_prefix(args.find(' ') + 1);
      boost::system::error_code ec;
      const json::value parsed = json::parse(args, ec);
      check(!ec && parsed.is_array() && !parsed.get_array().empty(),
            "RUN and COPY are in JSON form");
      for (const auto& a : parsed.get_array())
        check(a.is_string(), "RUN and COPY take strings");
    }
    ++lines;
  }
  check(lines == plan.step_of_instruction.size(), "every instruction has its step");
  const auto last_user = plan.dockerfile.rfind("\nUSER ");
  check(last_user != std::string::npos &&
            std::string_view(plan.dockerfile).substr(last_user + 1).starts_with("USER root\n"),
        "the image ends as root");
  for (const auto& hash : plan.file_hashes)
    check(hash.size() == 64 && hash.find_first_not_of("0123456789abcdef") == std::string::npos,
          "an upload is named by 64 hex digits");
  check(plan.user.find('\n') == std::string::npos && !plan.user.empty(), "one user");
  check(plan.working_dir.find('\n') == std::string::npos && !plan.working_dir.empty(),
        "one working directory");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  boost::system::error_code ec;
  const json::value value = json::parse(text, ec);
  if (ec || !value.is_object())
    return 0;
  const json::object& request = value.get_object();
  rex::gateway::DockerfilePlan plan;
  try {
    plan = rex::gateway::plan_dockerfile(request, "rex-test-bookworm:latest");
  } catch (const rex::gateway::TemplateError& e) {
    check(std::string_view(e.what()).size() > 0, "a refusal says why");
    return 0;
  }
  check_plan(plan);
  check(rex::gateway::build_key(request, "base") == rex::gateway::build_key(request, "base"),
        "the cache key is the request's");
  return 0;
}
