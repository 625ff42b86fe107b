// A session's transcript lines (src/gateway/transcript.hpp): how request and answer bodies go
// in, how a line ends, and how lines are appended to the file.
#include "gateway/transcript.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using rex::gateway::body_for_log;
using rex::gateway::kLogBodyLimit;
using rex::gateway::LoggedBody;

std::string appended(const LoggedBody& body) {
  std::string line;
  body.append_to(line);
  return line;
}

TEST(Transcript, ABodyGoesInAsJsonWhenItIsJsonElseAsText) {
  EXPECT_EQ(body_for_log(R"({"a": [1, 2]})"), json::parse(R"({"a":[1,2]})"));
  EXPECT_EQ(body_for_log("not json"), json::value("not json"));
  // Bytes that are not UTF-8 are written as Python's backslashreplace writes them.
  EXPECT_EQ(body_for_log("caf\xe9"), json::value("caf\\xe9"));
}

TEST(Transcript, ALargeBodyIsClippedWithItsSize) {
  const std::string big(kLogBodyLimit + 10, 'x');
  const json::value v = body_for_log(big);
  ASSERT_TRUE(v.is_string());
  const std::string text(v.as_string());
  EXPECT_EQ(text.substr(0, 10), "xxxxxxxxxx");
  EXPECT_NE(text.find(fmt::format("... [{} bytes]", big.size())), std::string::npos);
  EXPECT_EQ(text.size(), kLogBodyLimit + fmt::format("... [{} bytes]", big.size()).size());
  // Kept for later, it is clipped at once (the whole body is not held).
  EXPECT_EQ(LoggedBody(big).json(), v);
}

TEST(Transcript, OneLineJsonIsAppendedAsItCameAndOtherJsonWrittenAgain) {
  EXPECT_EQ(appended(LoggedBody(R"({"command": "ls",  "timeout": 5})")),
            R"({"command": "ls",  "timeout": 5})");
  EXPECT_EQ(appended(LoggedBody("{\"a\":\n1}")), R"({"a":1})");  // a line break: not as it came
  EXPECT_EQ(appended(LoggedBody("plain")), R"("plain")");
  EXPECT_EQ(appended(LoggedBody("")), R"("")");
}

TEST(Transcript, ALineEndsWithTheTimeTheRequestsIdAndTheActor) {
  std::string line = R"({"call":"execute")";
  rex::gateway::end_line(line, 1'800'000'000.25, "r-1", "key:\"ci\"");
  EXPECT_EQ(line, R"({"call":"execute","time":"2027-01-15T08:00:00.250Z","request_id":"r-1",)"
                  R"("actor":"key:\"ci\""})"
                  "\n");
  json::parse(line);  // it is one JSON value

  std::string timed = R"({"call":"execute")";
  rex::gateway::end_line(timed, 1'800'000'002.5, "r-2", "a", 1'800'000'000.25);
  EXPECT_EQ(timed, R"({"call":"execute","duration":2.250,"time":"2027-01-15T08:00:02.500Z",)"
                   R"("request_id":"r-2","actor":"a"})"
                   "\n");

  std::string empty = "{";
  rex::gateway::end_line(empty, 1'800'000'000, "", "");
  EXPECT_EQ(empty.substr(0, 9), R"({"time":")");
}

TEST(Transcript, LinesAreAppendedToAFileOnlyTheGatewayCanRead) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("rex-transcript-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path path = dir / "s1.jsonl";
  {
    rex::detail::UniqueFd held;
    ASSERT_TRUE(rex::gateway::append_line(held, path, "one\n"));
    EXPECT_GE(held.get(), 0);  // kept open for the next line
    ASSERT_TRUE(rex::gateway::append_line(held, path, "two\n"));
  }
  rex::detail::UniqueFd once;
  ASSERT_TRUE(rex::gateway::append_line(once, path, "three\n"));
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  EXPECT_EQ(all.str(), "one\ntwo\nthree\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  rex::detail::UniqueFd none;
  EXPECT_FALSE(rex::gateway::append_line(none, dir / "no-such-dir" / "s2.jsonl", "x\n"));
  fs::remove_all(dir);
}

}  // namespace
