// RouteTable: routes found by path whatever the method, the query ignored, each kind of
// handler kept as added.
#include <rex/server/route_table.hpp>

#include <gtest/gtest.h>
#include <boost/beast/http/message.hpp>

#include <string>

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using rex::server::Answer;
using rex::server::BodyReceiver;
using rex::server::EventProducer;
using rex::server::FileAnswer;
using rex::server::FileRoute;
using rex::server::JsonRoute;
using rex::server::RouteTable;
using rex::server::StreamRoute;
using rex::server::UploadRoute;

RouteTable table() {
  RouteTable routes;
  JsonRoute json = [](std::string) -> asio::awaitable<Answer> { co_return Answer{}; };
  FileRoute file = [](std::string) -> asio::awaitable<std::variant<Answer, FileAnswer>> {
    co_return Answer{};
  };
  StreamRoute stream = [](std::string) -> std::variant<Answer, EventProducer> { return Answer{}; };
  UploadRoute upload =
      [](const bhttp::request_header<>&) -> std::variant<Answer, std::unique_ptr<BodyReceiver>> {
    return Answer{};
  };
  routes.add(bhttp::verb::get, "/", json);
  routes.add(bhttp::verb::post, "/json", json);
  routes.add(bhttp::verb::post, "/file", file);
  routes.add(bhttp::verb::post, "/stream", stream);
  routes.add(bhttp::verb::post, "/upload", upload);
  return routes;
}

TEST(RouteTable, FindsRoutesByPath) {
  const RouteTable routes = table();
  const auto* root = routes.find("/");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->method, bhttp::verb::get);
  EXPECT_TRUE(std::holds_alternative<JsonRoute>(root->handler));
  ASSERT_NE(routes.find("/json"), nullptr);
  EXPECT_EQ(routes.find("/json")->method, bhttp::verb::post);
  EXPECT_TRUE(std::holds_alternative<FileRoute>(routes.find("/file")->handler));
  EXPECT_TRUE(std::holds_alternative<StreamRoute>(routes.find("/stream")->handler));
  EXPECT_TRUE(std::holds_alternative<UploadRoute>(routes.find("/upload")->handler));
}

TEST(RouteTable, IgnoresTheQuery) {
  const RouteTable routes = table();
  ASSERT_NE(routes.find("/json?a=b"), nullptr);
  EXPECT_EQ(routes.find("/json?a=b")->path, "/json");
  ASSERT_NE(routes.find("/?"), nullptr);
}

TEST(RouteTable, MatchesWholePathsOnly) {
  const RouteTable routes = table();
  EXPECT_EQ(routes.find("/jso"), nullptr);
  EXPECT_EQ(routes.find("/json/"), nullptr);
  EXPECT_EQ(routes.find("/JSON"), nullptr);
  EXPECT_EQ(routes.find(""), nullptr);
  EXPECT_EQ(routes.find("json"), nullptr);
}

TEST(RouteTable, AnEmptyTableFindsNothing) {
  const RouteTable routes;
  EXPECT_EQ(routes.find("/"), nullptr);
}

}  // namespace
