// RemoteRuntime against a small scripted HTTP server (support/scripted_server.hpp): connection
// failures, retries, timeouts, error answers, unix sockets, transfers.
#include <rex/http/client_errors.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/json.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "support/async_test.hpp"
#include "support/scripted_server.hpp"
#include "support/test_helpers.hpp"

namespace rex {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;
using test::command;
using test::config_for;
using test::observation_json;
using test::Reply;
using test::run_until;
using test::ScriptedServer;
using test::seconds_since;
using test::Seen;
using test::TempDir;

// A port nothing listens on.
unsigned short closed_port(asio::io_context& io) {
  asio::ip::tcp::acceptor probe(io,
                                asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return probe.local_endpoint().port();
}

// ---------------------------------------------------------------------------------------------
// Connection failures, retries and timeouts.

TEST(RemoteRuntime, RefusedConnectionMakesIsAliveFalse) {
  asio::io_context io;
  const auto port = closed_port(io);
  RemoteRuntime rt(io.get_executor(), config_for("http://127.0.0.1:" + std::to_string(port)));
  const auto start = Clock::now();
  const IsAliveResponse alive = test::run_async(io, rt.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_THAT(alive.message, HasSubstr("/is_alive"));
  EXPECT_THAT(alive.message, HasSubstr("refused"));
  EXPECT_LT(seconds_since(start), 1.0) << "is_alive must not retry";
}

TEST(RemoteRuntime, RefusedConnectionIsRetriedThenFailsClearly) {
  asio::io_context io;
  const auto port = closed_port(io);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  RemoteRuntime rt(io.get_executor(), config_for(url));
  const auto start = Clock::now();
  try {
    test::run_async(io, rt.run_in_session(command("echo hi")));
    ADD_FAILURE() << "no exception";
  } catch (const http::ConnectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("POST " + url + "/run_in_session"));
    EXPECT_THAT(e.what(), HasSubstr("refused"));
    EXPECT_THAT(e.what(), HasSubstr("4 attempts"));
    EXPECT_EQ(e.extra_info().at("attempts").as_int64(), 4);
  }
  // Three retries after 20, 40 and 80 ms (no jitter).
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.14);
  EXPECT_LT(elapsed, 2.0);
}

TEST(RemoteRuntime, ServerThatComesUpLateIsReachedByRetries) {
  asio::io_context io;
  TempDir dir;
  const std::string socket_path = dir.path() + "/late.sock";
  ScriptedServer server(io, [](const Seen&) { return Reply::json_body(observation_json("hi\n")); });
  auto cfg = config_for("http+unix://" + socket_path);
  cfg.client.retry.backoff.initial_delay = 100ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  // The socket appears 50 ms after the first attempt found nothing.
  asio::steady_timer later(io, 50ms);
  later.async_wait([&](boost::system::error_code) { server.listen_unix(socket_path); });
  const BashObservation obs = test::run_async(io, rt.run_in_session(command("echo hi")));
  EXPECT_EQ(obs.output, "hi\n");
  EXPECT_EQ(server.requests.size(), 1u);
}

TEST(RemoteRuntime, StreamingFallsBackWhenTheServerLacksTheEndpoint) {
  asio::io_context io;
  // SWE-ReX's server: no /run_in_session_stream.
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.target == "/run_in_session_stream") {
      Reply r = Reply::json_body(R"({"detail":"Not Found"})");
      r.status = 404;
      return r;
    }
    return Reply::json_body(observation_json("whole\n"));
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  std::vector<std::string> pieces;
  auto listener = [&](std::string_view text) { pieces.emplace_back(text); };
  for (int i = 0; i < 2; ++i) {
    const BashObservation obs =
        test::run_async(io, rt.run_in_session_streaming(command("echo whole"), listener));
    EXPECT_EQ(obs.output, "whole\n");
  }
  EXPECT_TRUE(pieces.empty());
  // Asked once; the second call went straight to /run_in_session.
  ASSERT_EQ(server.requests.size(), 3u);
  EXPECT_EQ(server.requests[0].target, "/run_in_session_stream");
  EXPECT_EQ(server.requests[1].target, "/run_in_session");
  EXPECT_EQ(server.requests[2].target, "/run_in_session");
}

TEST(RemoteRuntime, StreamErrorsBecomeTheTransferredException) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.content_type = "text/event-stream";
    r.body =
        "event: output\ndata: {\"output\": \"partial\"}\n\n"
        "event: error\ndata: {\"swerexception\": {\"message\": \"too slow\", "
        "\"class_path\": \"swerex.exceptions.CommandTimeoutError\", \"traceback\": \"\", "
        "\"extra_info\": {}}}\n\n";
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  std::vector<std::string> pieces;
  auto listener = [&](std::string_view text) { pieces.emplace_back(text); };
  EXPECT_THROW(test::run_async(io, rt.run_in_session_streaming(command("sleep 9"), listener)),
               CommandTimeoutError);
  EXPECT_THAT(pieces, ::testing::ElementsAre("partial"));
}

TEST(RemoteRuntime, DroppedRequestIsRetriedWithTheSameRequestId) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    return seen.connection == 0 ? Reply::of(Reply::Act::drop)
                                : Reply::json_body(observation_json("ok\n"));
  });
  auto cfg = config_for(server.listen_tcp());
  cfg.auth_token = "secret";
  RemoteRuntime rt(io.get_executor(), cfg);
  const BashObservation obs = test::run_async(io, rt.run_in_session(command("echo ok")));
  EXPECT_EQ(obs.output, "ok\n");
  ASSERT_EQ(server.requests.size(), 2u);
  const Seen first = server.requests[0];
  const Seen second = server.requests[1];
  EXPECT_EQ(first.headers.at("x-request-id"), second.headers.at("x-request-id"));
  EXPECT_EQ(first.headers.at("x-request-id").size(), 36u);  // a UUID
  EXPECT_EQ(first.headers.at("x-api-key"), "secret");
  EXPECT_EQ(first.body, second.body);
  EXPECT_EQ(json::parse(first.body).at("action_type"), "bash");

  // The next call gets a fresh ID.
  test::run_async(io, rt.run_in_session(command("echo ok")));
  ASSERT_EQ(server.requests.size(), 3u);
  EXPECT_NE(server.requests[2].headers.at("x-request-id"), first.headers.at("x-request-id"));
}

TEST(RemoteRuntime, AnAnswerIsNeverRetried) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.status = 500;
    r.content_type = "text/html";
    r.body = "<html><body>Internal Server Error</body></html>";
    return r;
  });
  const std::string url = server.listen_tcp();
  RemoteRuntime rt(io.get_executor(), config_for(url));
  Command c;
  c.command = "true";
  try {
    test::run_async(io, rt.execute(c));
    ADD_FAILURE() << "no exception";
  } catch (const http::HttpError& e) {
    EXPECT_EQ(e.status(), 500u);
    EXPECT_EQ(e.url(), url + "/execute");
    EXPECT_THAT(e.body(), HasSubstr("Internal Server Error"));
    EXPECT_THAT(e.what(), HasSubstr("POST " + url + "/execute answered HTTP 500"));
    EXPECT_THAT(e.what(), HasSubstr("<html>"));
  }
  EXPECT_EQ(server.requests.size(), 1u);
}

TEST(RemoteRuntime, TimeoutFiresWithinBoundsAndClosesTheConnection) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) { return Reply::of(Reply::Act::hang); });
  auto cfg = config_for(server.listen_tcp());
  cfg.timeout_margin = 200ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  const auto start = Clock::now();
  try {
    test::run_async(io, rt.run_in_session(command("sleep 100", 0.1)));
    ADD_FAILURE() << "no exception";
  } catch (const http::RequestTimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/run_in_session timed out after 0.3 s"));
  }
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.29);
  EXPECT_LT(elapsed, 1.5);
  EXPECT_EQ(server.requests.size(), 1u) << "a timeout is not retried";
  run_until(io, [&] { return server.closed_by_client == 1; });
}

TEST(RemoteRuntime, IsAliveTimesOutQuicklyAndSaysSo) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) { return Reply::of(Reply::Act::hang); });
  auto cfg = config_for(server.listen_tcp());
  cfg.is_alive_timeout = 150ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  const auto start = Clock::now();
  const IsAliveResponse alive = test::run_async(io, rt.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_THAT(alive.message, HasSubstr("timed out after 0.15 s"));
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(RemoteRuntime, WaitUntilAliveReportsTheLastCheck) {
  asio::io_context io;
  const auto port = closed_port(io);
  auto cfg = config_for("http://127.0.0.1:" + std::to_string(port));
  cfg.poll_interval = 20ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  const auto start = Clock::now();
  try {
    test::run_async(io, rt.wait_until_alive(300ms));
    ADD_FAILURE() << "no exception";
  } catch (const http::RequestTimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("within 0.3 s"));
    EXPECT_THAT(e.what(), HasSubstr("refused"));
  }
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.29);
  EXPECT_LT(elapsed, 1.5);
}

TEST(RemoteRuntime, WaitUntilAliveReturnsOnceTheServerAnswers) {
  asio::io_context io;
  int checks = 0;
  ScriptedServer server(io, [&](const Seen&) {
    ++checks;
    return Reply::json_body(checks < 3 ? R"({"is_alive": false, "message": "starting"})"
                                       : R"({"is_alive": true, "message": ""})");
  });
  auto cfg = config_for(server.listen_tcp());
  cfg.poll_interval = 10ms;
  RemoteRuntime rt(io.get_executor(), cfg);
  test::run_async(io, rt.wait_until_alive(5s));
  EXPECT_EQ(checks, 3);
  EXPECT_EQ(server.requests[0].method, "GET");
  EXPECT_EQ(server.requests[0].target, "/is_alive");
}

TEST(RemoteRuntime, BadUrlsAreRefusedAtConstruction) {
  asio::io_context io;
  const auto make = [&](const char* url) {
    RemoteRuntimeConfig cfg;
    cfg.url = url;
    RemoteRuntime rt(io.get_executor(), cfg);
  };
  EXPECT_THROW_MESSAGE(make("localhost:8000"), http::InvalidUrlError,
                       "invalid URL 'localhost:8000': no scheme (expected http://, https:// or "
                       "http+unix://)");
  EXPECT_THROW_MESSAGE(make("ftp://host"), http::InvalidUrlError,
                       "invalid URL 'ftp://host': unsupported scheme 'ftp' (expected http, https "
                       "or http+unix)");
  EXPECT_THROW_MESSAGE(make("http://host:99999"), http::InvalidUrlError,
                       "invalid URL 'http://host:99999': bad port '99999' (expected 1-65535)");
}

// ---------------------------------------------------------------------------------------------
// Answers.

TEST(RemoteRuntime, TransferredExceptionsKeepTheirTypeAndExtraInfo) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.status = 511;
    r.body = R"({"swerexception": {"message": "session 'x' does not exist",
                 "class_path": "swerex.exceptions.SessionDoesNotExistError",
                 "traceback": "", "extra_info": {"session": "x"}}})";
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  try {
    test::run_async(io, rt.run_in_session(command("ls")));
    ADD_FAILURE() << "no exception";
  } catch (const SessionDoesNotExistError& e) {
    EXPECT_STREQ(e.what(), "session 'x' does not exist");
    EXPECT_EQ(e.extra_info().at("session"), "x");
  }
}

TEST(RemoteRuntime, MalformedAnswersAreErrorsNamingTheUrl) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.target == "/read_file")
      return Reply::json_body("not json");
    Reply r;
    r.status = 511;
    r.body = R"({"detail": "no transfer here"})";
    return r;
  });
  const std::string url = server.listen_tcp();
  RemoteRuntime rt(io.get_executor(), config_for(url));
  ReadFileRequest read;
  read.path = "/etc/hostname";
  try {
    test::run_async(io, rt.read_file(read));
    ADD_FAILURE() << "no exception";
  } catch (const http::HttpError& e) {
    EXPECT_EQ(e.status(), 200u);
    EXPECT_THAT(e.what(), HasSubstr(url + "/read_file answered HTTP 200 with an invalid body"));
  }
  WriteFileRequest write;
  write.path = "/tmp/x";
  try {
    test::run_async(io, rt.write_file(write));
    ADD_FAILURE() << "no exception";
  } catch (const http::HttpError& e) {
    EXPECT_EQ(e.status(), 511u);
    EXPECT_THAT(e.body(), HasSubstr("no transfer here"));
  }
}

TEST(RemoteRuntime, IsAliveReportsErrorStatuses) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen&) {
    Reply r;
    r.status = 401;
    r.body = R"({"detail": "Invalid API Key"})";
    return r;
  });
  const std::string url = server.listen_tcp();
  RemoteRuntime rt(io.get_executor(), config_for(url));
  const IsAliveResponse alive = test::run_async(io, rt.is_alive());
  EXPECT_FALSE(alive.is_alive);
  EXPECT_EQ(alive.message, "Status code 401 from " + url + "/is_alive. Message: Invalid API Key");
}

TEST(RemoteRuntime, RequestsFollowTheProtocol) {
  asio::io_context io;
  ScriptedServer server(io, [](const Seen& seen) {
    if (seen.target == "/create_session")
      return Reply::json_body(R"({"output": "", "session_type": "bash"})");
    if (seen.target == "/close_session")
      return Reply::json_body(R"({"session_type": "bash"})");
    if (seen.target == "/execute")
      return Reply::json_body(R"({"stdout": "out", "stderr": "", "exit_code": 0})");
    return Reply::json_body("{}");
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp() + "/"));
  const auto body = [](RemoteRuntime& r) -> asio::awaitable<void> {
    CreateBashSessionRequest create;
    create.session = "s1";
    co_await r.create_session(create);
    Command c;
    c.command = std::vector<std::string>{"echo", "out"};
    EXPECT_EQ((co_await r.execute(c)).stdout_, "out");
    CloseBashSessionRequest close_one;
    close_one.session = "s1";
    co_await r.close_session(close_one);
    co_await r.close();
  };
  test::run_async(io, body(rt));
  ASSERT_EQ(server.requests.size(), 4u);
  EXPECT_EQ(server.requests[0].target, "/create_session");
  EXPECT_EQ(json::parse(server.requests[0].body).at("session"), "s1");
  EXPECT_EQ(server.requests[0].headers.at("content-type"), "application/json");
  EXPECT_EQ(server.requests[0].headers.count("x-api-key"), 0u) << "no token, no header";
  EXPECT_EQ(server.requests[1].target, "/execute");
  EXPECT_EQ(server.requests[2].target, "/close_session");
  EXPECT_EQ(server.requests[3].target, "/close");
  EXPECT_EQ(server.requests[3].method, "POST");
  EXPECT_EQ(server.requests[3].body, "");
  // One kept-alive connection carried them all.
  EXPECT_EQ(server.connections, 1u);
  EXPECT_EQ(rt.client().connections_opened(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Unix sockets.

TEST(RemoteRuntime, UnixSocketUrlsInBothFormsWithAPrefix) {
  asio::io_context io;
  TempDir dir;
  const std::string socket_path = dir.path() + "/rex.sock";
  ScriptedServer server(io, [](const Seen&) { return Reply::json_body(R"({"is_alive": true})"); });
  server.listen_unix(socket_path);
  std::string encoded;
  for (char c : socket_path)
    encoded += c == '/' ? std::string("%2F") : std::string(1, c);
  for (const std::string& url :
       {"http+unix://" + socket_path + "/api", "http+unix://" + encoded + "/api/"}) {
    RemoteRuntime rt(io.get_executor(), config_for(url));
    const IsAliveResponse alive = test::run_async(io, rt.is_alive());
    EXPECT_TRUE(alive.is_alive) << url << ": " << alive.message;
  }
  ASSERT_EQ(server.requests.size(), 2u);
  EXPECT_EQ(server.requests[0].target, "/api/is_alive");
  EXPECT_EQ(server.requests[1].target, "/api/is_alive");
  EXPECT_EQ(server.requests[0].headers.at("host"), "localhost");
}

// ---------------------------------------------------------------------------------------------
// Transfers.

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(RemoteRuntime, DownloadsAFileOrADirectory) {
  asio::io_context io;
  TempDir remote;
  TempDir local;
  remote.file("one.txt", "one\n");
  fs::create_directories(remote.path() + "/tree/sub");
  remote.file("tree/sub/two.txt", "two\n");
  const std::string tar = remote.path() + "/tree.tar";
  create_archive(remote.path() + "/tree", tar, ArchiveFormat::tar);
  ScriptedServer server(io, [&](const Seen& seen) {
    const auto path = json::parse(seen.body).at("path").as_string();
    Reply r;
    r.content_type = "application/octet-stream";
    if (path == "one") {
      r.headers.emplace_back("X-Rex-Download-Kind", "file");
      r.body = slurp(remote.path() + "/one.txt");
    } else if (path == "tree") {
      r.headers.emplace_back("X-Rex-Download-Kind", "directory");
      r.body = slurp(tar);
    } else {
      r.status = 511;
      r.content_type = "application/json";
      r.body = R"({"swerexception": {"message": "[Errno 2] No such file or directory: 'gone'",
                   "class_path": "builtins.FileNotFoundError", "traceback": "",
                   "extra_info": {}}})";
    }
    return r;
  });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  DownloadRequest file;
  file.path = "one";
  file.target_path = local.path() + "/new/dir/one.txt";
  test::run_async(io, rt.download(file));
  EXPECT_EQ(slurp(file.target_path), "one\n");
  EXPECT_EQ(json::parse(server.requests[0].body),
            json::parse(R"({"path": "one", "format": "tar"})"));

  DownloadRequest tree;
  tree.path = "tree";
  tree.target_path = local.path() + "/tree-copy";
  test::run_async(io, rt.download(tree));
  EXPECT_EQ(slurp(local.path() + "/tree-copy/sub/two.txt"), "two\n");

  DownloadRequest gone;
  gone.path = "gone";
  gone.target_path = local.path() + "/gone.txt";
  EXPECT_THROW_MESSAGE(test::run_async(io, rt.download(gone)), FileNotFoundError,
                       "[Errno 2] No such file or directory: 'gone'");
  // Nothing half-written is left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(local.path()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"new", "tree-copy"}));
}

TEST(RemoteRuntime, UploadsAFileAsIsAndADirectoryZipped) {
  asio::io_context io;
  TempDir local;
  local.file("a.txt", "alpha\n");
  fs::create_directories(local.path() + "/dir/sub");
  local.file("dir/sub/b.txt", "beta\n");
  ScriptedServer server(io, [](const Seen&) { return Reply::json_body("{}"); });
  RemoteRuntime rt(io.get_executor(), config_for(server.listen_tcp()));
  UploadRequest file;
  file.source_path = local.path() + "/a.txt";
  file.target_path = "/remote/a.txt";
  test::run_async(io, rt.upload(file));
  UploadRequest dir;
  dir.source_path = local.path() + "/dir";
  dir.target_path = "/remote/dir";
  test::run_async(io, rt.upload(dir));
  UploadRequest missing;
  missing.source_path = local.path() + "/missing";
  missing.target_path = "/remote/missing";
  EXPECT_THROW(test::run_async(io, rt.upload(missing)), FileNotFoundError);

  ASSERT_EQ(server.requests.size(), 2u);
  for (const auto& seen : server.requests) {
    EXPECT_EQ(seen.target, "/upload");
    EXPECT_THAT(seen.headers.at("content-type"), StartsWith("multipart/form-data; boundary="));
  }
  const std::string& first = server.requests[0].body;
  EXPECT_THAT(first, HasSubstr("name=\"file\"; filename=\"a.txt\""));
  EXPECT_THAT(first, HasSubstr("\r\n\r\nalpha\n\r\n"));
  EXPECT_THAT(first, HasSubstr("name=\"target_path\"\r\n\r\n/remote/a.txt\r\n"));
  EXPECT_THAT(first, HasSubstr("name=\"unzip\"\r\n\r\nfalse\r\n"));
  const std::string& second = server.requests[1].body;
  EXPECT_THAT(second, HasSubstr("filename=\"zipped_transfer.zip\""));
  EXPECT_THAT(second, HasSubstr("Content-Type: application/zip"));
  EXPECT_THAT(second, HasSubstr("name=\"unzip\"\r\n\r\ntrue\r\n"));
  EXPECT_THAT(second, HasSubstr("PK\x03\x04"));  // a zip's local file header
}

}  // namespace
}  // namespace rex