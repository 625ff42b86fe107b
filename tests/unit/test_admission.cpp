// Admission: what the service does with a request once its header has arrived, checked as a
// pure function: authentication before routing, 404 and 405, which bodies are read, refused
// (413) or left unread, 100-continue, keep-alive, HEAD and the replay key; and which header
// read errors are answered.
#include <rex/server/admission.hpp>

#include <gtest/gtest.h>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <optional>
#include <string>

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using rex::server::Admission;
using rex::server::admit;
using rex::server::Answer;
using rex::server::BodyPlan;
using rex::server::BodyReceiver;
using rex::server::FileAnswer;
using rex::server::RouteTable;
using rex::server::ServerConfig;
using rex::server::UploadRoute;

RouteTable table() {
  RouteTable routes;
  rex::server::JsonRoute json = [](rex::server::Request) -> asio::awaitable<Answer> {
    co_return Answer{};
  };
  routes.add(bhttp::verb::get, "/is_alive", json);
  routes.add(bhttp::verb::post, "/execute", json);
  UploadRoute upload =
      [](const rex::server::Request&) -> std::variant<Answer, std::unique_ptr<BodyReceiver>> {
    return Answer{};
  };
  routes.add(bhttp::verb::post, "/upload", upload);
  return routes;
}

struct Request {
  bhttp::verb method = bhttp::verb::post;
  std::string target = "/execute";
  std::optional<std::uint64_t> content_length{};
  bool chunked = false;
  unsigned version = 11;
  std::vector<std::pair<std::string, std::string>> fields{};
};

Admission admit_request(const Request& r, const ServerConfig& config = {}) {
  bhttp::request<bhttp::empty_body> header;
  header.method(r.method);
  header.target(r.target);
  header.version(r.version);
  for (const auto& [name, value] : r.fields)
    header.set(name, value);
  const bool has_body = r.chunked || (r.content_length && *r.content_length > 0);
  static const RouteTable routes = table();
  return admit(header, r.content_length, has_body, routes, config);
}

std::string detail_of(const Answer& a) {
  return std::string(boost::json::parse(a.body).at("detail").as_string());
}

TEST(Admit, RoutesAKnownRequestAndReadsItsBody) {
  const auto a = admit_request({.content_length = 10});
  ASSERT_NE(a.route, nullptr);
  EXPECT_EQ(a.route->path, "/execute");
  EXPECT_FALSE(a.answer);
  EXPECT_EQ(a.body, BodyPlan::read);
  EXPECT_TRUE(a.keep_alive);
  EXPECT_FALSE(a.send_continue);
  EXPECT_FALSE(a.head_only);
  EXPECT_TRUE(a.replay_key.empty());
}

TEST(Admit, IgnoresTheQueryAndNeedsNoBody) {
  const auto a = admit_request({.method = bhttp::verb::get, .target = "/is_alive?x=1"});
  ASSERT_NE(a.route, nullptr);
  EXPECT_EQ(a.body, BodyPlan::none);
}

TEST(Admit, AnswersUnknownTargetsWith404AndWrongMethodsWith405) {
  auto a = admit_request({.target = "/nope"});
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 404u);
  EXPECT_EQ(detail_of(*a.answer), "Not Found");
  EXPECT_EQ(a.route, nullptr);

  a = admit_request({.method = bhttp::verb::get, .target = "/execute"});
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 405u);
  ASSERT_EQ(a.answer->headers.size(), 1u);
  EXPECT_EQ(a.answer->headers[0], (std::pair<std::string, std::string>{"allow", "POST"}));
}

// A table's answer for what no route takes replaces the default where it gives one; a 405 keeps
// its Allow header.
TEST(Admit, ATablesNoRouteAnswerTakesThePathsItNames) {
  RouteTable routes = table();
  routes.on_no_route(
      [](unsigned status, const bhttp::request_header<>& header) -> std::optional<Answer> {
        if (!std::string_view(header.target().data(), header.target().size()).starts_with("/e2b"))
          return std::nullopt;
        return rex::server::json_answer(status, boost::json::object{{"code", status}});
      });
  auto admit_to = [&routes](bhttp::verb method, std::string target) {
    bhttp::request<bhttp::empty_body> header;
    header.method(method);
    header.target(target);
    header.version(11);
    return admit(header, std::nullopt, false, routes, ServerConfig{});
  };
  auto a = admit_to(bhttp::verb::get, "/e2b/templates/x");
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 404u);
  EXPECT_EQ(boost::json::parse(a.answer->body).at("code").as_int64(), 404);
  a = admit_to(bhttp::verb::get, "/nope");
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(detail_of(*a.answer), "Not Found");
  routes.add(bhttp::verb::post, "/e2b/call",
             [](rex::server::Request) -> asio::awaitable<Answer> { co_return Answer{}; });
  a = admit_to(bhttp::verb::get, "/e2b/call");
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 405u);
  EXPECT_EQ(boost::json::parse(a.answer->body).at("code").as_int64(), 405);
  ASSERT_EQ(a.answer->headers.size(), 1u);
  EXPECT_EQ(a.answer->headers[0].first, "allow");
}

TEST(Admit, ServesHeadAsGetWithoutTheBody) {
  auto a = admit_request({.method = bhttp::verb::head, .target = "/is_alive"});
  ASSERT_NE(a.route, nullptr);
  EXPECT_TRUE(a.head_only);
  a = admit_request({.method = bhttp::verb::head, .target = "/execute"});
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 405u);
  EXPECT_TRUE(a.head_only);
}

TEST(Admit, AuthenticatesBeforeRouting) {
  ServerConfig config;
  config.auth_token = "secret";
  auto a = admit_request({.target = "/nope"}, config);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 403u);
  EXPECT_EQ(detail_of(*a.answer), "Not authenticated");

  a = admit_request({.target = "/nope", .fields = {{"X-API-Key", "wrong"}}}, config);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 401u);
  EXPECT_EQ(detail_of(*a.answer), "Invalid API Key");

  a = admit_request({.target = "/nope", .fields = {{"X-API-Key", "secret"}}}, config);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 404u);

  a = admit_request({.content_length = 2, .fields = {{"X-API-Key", "secret"}}}, config);
  EXPECT_NE(a.route, nullptr);
  EXPECT_FALSE(a.answer);
}

TEST(Admit, ReadsTheSmallBodyOfARefusedRequestToKeepTheConnection) {
  auto a = admit_request({.target = "/nope", .content_length = 64 * 1024});
  EXPECT_EQ(a.body, BodyPlan::read);
  EXPECT_TRUE(a.keep_alive);

  a = admit_request({.target = "/nope", .content_length = 64 * 1024 + 1});
  EXPECT_EQ(a.body, BodyPlan::unread);
  EXPECT_FALSE(a.keep_alive);

  a = admit_request({.target = "/nope", .chunked = true});  // length unknown
  EXPECT_EQ(a.body, BodyPlan::unread);
  EXPECT_FALSE(a.keep_alive);
}

TEST(Admit, RefusesABodyTooLargeToHoldBeforeReadingIt) {
  ServerConfig config;
  config.max_json_body_bytes = 100;
  auto a = admit_request({.content_length = 101}, config);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 413u);
  EXPECT_EQ(a.route, nullptr);
  EXPECT_EQ(a.body, BodyPlan::unread);
  EXPECT_FALSE(a.keep_alive);

  a = admit_request({.content_length = 100}, config);
  EXPECT_FALSE(a.answer);
  EXPECT_EQ(a.body, BodyPlan::read);

  // The limit also replaces a refusal whose body would have been read.
  a = admit_request({.target = "/nope", .content_length = 101}, config);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->status, 413u);
}

TEST(Admit, HandsUploadsToTheirRouteWhateverTheirSize) {
  ServerConfig config;
  config.max_json_body_bytes = 100;
  auto a = admit_request({.target = "/upload", .content_length = 1000}, config);
  ASSERT_NE(a.route, nullptr);
  EXPECT_EQ(a.body, BodyPlan::receive);
  a = admit_request({.target = "/upload"}, config);
  EXPECT_EQ(a.body, BodyPlan::receive);
}

TEST(Admit, SendsContinueOnlyForABodyItReads) {
  const std::vector<std::pair<std::string, std::string>> expect{{"Expect", "100-continue"}};
  EXPECT_TRUE(admit_request({.content_length = 5, .fields = expect}).send_continue);
  EXPECT_FALSE(admit_request({.content_length = 0, .fields = expect}).send_continue);
  EXPECT_FALSE(admit_request({.target = "/nope", .chunked = true, .fields = expect}).send_continue);
  EXPECT_TRUE(
      admit_request({.target = "/upload", .content_length = 5, .fields = expect}).send_continue);
}

TEST(Admit, FollowsTheClientOnKeepAlive) {
  EXPECT_FALSE(
      admit_request({.content_length = 2, .fields = {{"Connection", "close"}}}).keep_alive);
  EXPECT_FALSE(admit_request({.content_length = 2, .version = 10}).keep_alive);
  EXPECT_TRUE(
      admit_request({.content_length = 2, .version = 10, .fields = {{"Connection", "keep-alive"}}})
          .keep_alive);
  // A client that closes still has its body read.
  EXPECT_EQ(admit_request({.content_length = 2, .fields = {{"Connection", "close"}}}).body,
            BodyPlan::read);
}

TEST(Admit, KeysReplayByIdMethodAndTarget) {
  EXPECT_EQ(admit_request({.fields = {{"X-Request-ID", "abc"}}}).replay_key, "abc POST /execute");
  EXPECT_TRUE(admit_request({.fields = {{"X-Request-ID", ""}}}).replay_key.empty());
}

TEST(HeaderErrorAnswer, AnswersLimitsAndBadRequestsAndNotDepartures) {
  auto a = rex::server::header_error_answer(bhttp::error::header_limit);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 431u);
  a = rex::server::header_error_answer(bhttp::error::body_limit);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 413u);
  a = rex::server::header_error_answer(bhttp::error::bad_method);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 400u);
  EXPECT_TRUE(detail_of(*a).starts_with("Bad Request: "));
  EXPECT_FALSE(rex::server::header_error_answer(bhttp::error::end_of_stream));
  EXPECT_FALSE(rex::server::header_error_answer(boost::beast::error::timeout));
  EXPECT_FALSE(rex::server::header_error_answer(asio::error::operation_aborted));
  EXPECT_FALSE(rex::server::header_error_answer(asio::error::connection_reset));
  EXPECT_FALSE(rex::server::header_error_answer(asio::error::eof));
}

TEST(SameToken, ComparesWholeStrings) {
  EXPECT_TRUE(rex::server::same_token("abc", "abc"));
  EXPECT_FALSE(rex::server::same_token("abc", "abd"));
  EXPECT_FALSE(rex::server::same_token("abc", "abcd"));
  EXPECT_FALSE(rex::server::same_token("", "a"));
  EXPECT_TRUE(rex::server::same_token("", ""));
}

}  // namespace
