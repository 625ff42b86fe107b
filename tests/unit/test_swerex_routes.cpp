// The SWE-ReX route table over a DummyRuntime, its handlers called directly: JSON routes and
// their 422/511 answers, /download through Runtime::download (a file as it is, a tree as an
// archive, nothing left in the upload directory), and the streamed run's refusal.
#include <rex/runtime/dummy_runtime.hpp>

#include <gtest/gtest.h>
#include <boost/beast/http/verb.hpp>
#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "server/swerex_routes.hpp"
#include "support/async_test.hpp"

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using rex::server::Answer;
using rex::server::EventProducer;
using rex::server::FileAnswer;
using rex::server::FileRoute;
using rex::server::JsonRoute;
using rex::server::RouteTable;
using rex::server::StreamRoute;

class SwerexRoutes : public ::testing::Test {
 protected:
  void SetUp() override {
    upload_dir_ =
        fs::temp_directory_path() / ("rex-routes-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(upload_dir_);
    rex::server::ServerConfig config;
    config.upload_dir = upload_dir_.string();
    config.file_threads = 1;
    routes_.emplace(rex::server::swerex_routes(io_.get_executor(), runtime_, config));
  }
  void TearDown() override {
    routes_.reset();
    fs::remove_all(upload_dir_);
  }

  const rex::server::Route* route(std::string_view path) const {
    const auto method = path == "/" || path == "/is_alive" ? boost::beast::http::verb::get
                                                           : boost::beast::http::verb::post;
    return routes_->find(method, path).route;
  }
  static rex::server::Request request(std::string body) {
    rex::server::Request r;
    r.body = std::move(body);
    return r;
  }
  Answer call_json(std::string_view path, std::string body) {
    const auto& handler = std::get<JsonRoute>(route(path)->handler);
    return rex::test::run_async(io_, handler(request(std::move(body))));
  }
  std::variant<Answer, FileAnswer> download(std::string body) {
    const auto& handler = std::get<FileRoute>(route("/download")->handler);
    return rex::test::run_async(io_, handler(request(std::move(body))));
  }
  std::string header(const FileAnswer& file, std::string_view name) {
    for (const auto& [n, v] : file.headers) {
      if (n == name)
        return v;
    }
    return "";
  }

  asio::io_context io_;
  rex::DummyRuntime runtime_;
  fs::path upload_dir_;
  std::optional<RouteTable> routes_;
};

TEST_F(SwerexRoutes, ServesEveryPathOfTheProtocol) {
  for (const char* path : {"/", "/is_alive", "/create_session", "/run_in_session",
                           "/run_in_session_stream", "/close_session", "/execute", "/read_file",
                           "/write_file", "/upload", "/download", "/close"})
    EXPECT_NE(route(path), nullptr) << path;
}

TEST_F(SwerexRoutes, AnswersJsonRoutes) {
  Answer a = call_json("/is_alive", "");
  EXPECT_EQ(a.status, 200u);
  EXPECT_EQ(a.content_type, "application/json");
  EXPECT_TRUE(json::parse(a.body).at("is_alive").as_bool());

  a = call_json("/", "");
  EXPECT_EQ(a.body, R"({"message":"hello world"})");
}

TEST_F(SwerexRoutes, AnswersBadBodiesWith422AndFailuresWith511) {
  Answer a = call_json("/execute", "{not json");
  EXPECT_EQ(a.status, 422u);
  EXPECT_EQ(json::parse(a.body).at("detail").at(0).at("type").as_string(), "json_invalid");

  a = call_json("/read_file", R"({"path":"/nowhere"})");
  EXPECT_EQ(a.status, 511u);
  EXPECT_EQ(json::parse(a.body).at("swerexception").at("class_path").as_string(),
            "builtins.FileNotFoundError");
}

// Uploaded bytes need not be text; reading them back decodes them as the request asks, so the
// answer is always valid JSON.
TEST_F(SwerexRoutes, ReadsUploadedBytesBackAsText) {
  const fs::path source = upload_dir_ / "binary";
  {
    std::ofstream out(source, std::ios::binary);
    out << "\xff bytes";
  }
  rex::UploadRequest upload;
  upload.source_path = source.string();
  upload.target_path = "/data/bin";
  rex::test::run_async(io_, runtime_.upload(upload));
  fs::remove(source);

  Answer a = call_json("/read_file", R"({"path":"/data/bin"})");
  EXPECT_EQ(a.status, 511u);
  boost::system::error_code ec;
  json::parse(a.body, ec);
  EXPECT_FALSE(ec) << a.body;

  a = call_json("/read_file", R"({"path":"/data/bin","errors":"backslashreplace"})");
  ASSERT_EQ(a.status, 200u) << a.body;
  EXPECT_EQ(json::parse(a.body).at("content").as_string(), "\\xff bytes");
}

TEST_F(SwerexRoutes, DownloadsAFileOfTheRuntime) {
  ASSERT_EQ(call_json("/write_file", R"({"path":"/data/a.txt","content":"hello"})").status, 200u);
  auto result = download(R"({"path":"/data/a.txt"})");
  ASSERT_TRUE(std::holds_alternative<FileAnswer>(result));
  auto& file = std::get<FileAnswer>(result);
  EXPECT_EQ(header(file, "X-Rex-Download-Kind"), "file");
  EXPECT_EQ(file.content_type, "application/octet-stream");
  EXPECT_EQ(file.body.size(), 5u);
  EXPECT_TRUE(fs::is_empty(upload_dir_));  // the open file is all that is left
}

TEST_F(SwerexRoutes, DownloadsATreeOfTheRuntimeAsAnArchive) {
  ASSERT_EQ(call_json("/write_file", R"({"path":"/data/a.txt","content":"a"})").status, 200u);
  ASSERT_EQ(call_json("/write_file", R"({"path":"/data/sub/b.txt","content":"b"})").status, 200u);
  auto result = download(R"({"path":"/data","format":"zip"})");
  ASSERT_TRUE(std::holds_alternative<FileAnswer>(result));
  auto& file = std::get<FileAnswer>(result);
  EXPECT_EQ(header(file, "X-Rex-Download-Kind"), "directory");
  EXPECT_EQ(file.content_type, "application/zip");
  EXPECT_GT(file.body.size(), 0u);
  EXPECT_TRUE(fs::is_empty(upload_dir_));

  result = download(R"({"path":"/data"})");
  ASSERT_TRUE(std::holds_alternative<FileAnswer>(result));
  EXPECT_EQ(std::get<FileAnswer>(result).content_type, "application/x-tar");
}

TEST_F(SwerexRoutes, RefusesDownloadsThatCannotBeServed) {
  auto result = download(R"({"path":"/nowhere"})");
  ASSERT_TRUE(std::holds_alternative<Answer>(result));
  EXPECT_EQ(std::get<Answer>(result).status, 511u);
  EXPECT_TRUE(fs::is_empty(upload_dir_));

  result = download(R"({"format":"tar"})");
  ASSERT_TRUE(std::holds_alternative<Answer>(result));
  EXPECT_EQ(std::get<Answer>(result).status, 422u);
  EXPECT_EQ(json::parse(std::get<Answer>(result).body).at("detail").at(0).at("type").as_string(),
            "missing");

  ASSERT_EQ(call_json("/write_file", R"({"path":"/d/a","content":"a"})").status, 200u);
  result = download(R"({"path":"/d","format":"rar"})");
  ASSERT_TRUE(std::holds_alternative<Answer>(result));
  EXPECT_EQ(std::get<Answer>(result).status, 511u);
  EXPECT_TRUE(fs::is_empty(upload_dir_));
}

TEST_F(SwerexRoutes, StartsAStreamedRunOnlyForAValidAction) {
  const auto& handler = std::get<StreamRoute>(route("/run_in_session_stream")->handler);
  auto refused = handler(request("{}"));
  ASSERT_TRUE(std::holds_alternative<Answer>(refused));
  EXPECT_EQ(std::get<Answer>(refused).status, 422u);
  auto started = handler(request(R"({"command":"echo hi","session":"default"})"));
  EXPECT_TRUE(std::holds_alternative<EventProducer>(started));
}

}  // namespace
