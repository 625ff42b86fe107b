// RouteTable: routes found by method and path pattern, the query ignored, path parameters
// decoded, each kind of handler kept as added; rex::server::Request's accessors.
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

RouteTable routes_for_test() {
  RouteTable routes;
  JsonRoute json = [](rex::server::Request) -> asio::awaitable<Answer> { co_return Answer{}; };
  FileRoute file = [](rex::server::Request) -> asio::awaitable<std::variant<Answer, FileAnswer>> {
    co_return Answer{};
  };
  StreamRoute stream = [](rex::server::Request) -> std::variant<Answer, EventProducer> {
    return Answer{};
  };
  UploadRoute upload =
      [](const rex::server::Request&) -> std::variant<Answer, std::unique_ptr<BodyReceiver>> {
    return Answer{};
  };
  routes.add(bhttp::verb::get, "/", json);
  routes.add(bhttp::verb::post, "/json", json);
  routes.add(bhttp::verb::post, "/file", file);
  routes.add(bhttp::verb::post, "/stream", stream);
  routes.add(bhttp::verb::post, "/upload", upload);
  routes.add(bhttp::verb::get, "/api/sessions/{id}", json);
  routes.add(bhttp::verb::delete_, "/api/sessions/{id}", json);
  routes.add(bhttp::verb::post, "/api/sessions/{id}/swerex/{endpoint...}", json);
  return routes;
}

const rex::server::Route* find(const RouteTable& routes, std::string_view target,
                               bhttp::verb method = bhttp::verb::post) {
  return routes.find(method, target).route;
}

TEST(RouteTable, FindsRoutesByMethodAndPath) {
  const RouteTable routes = routes_for_test();
  const auto* root = find(routes, "/", bhttp::verb::get);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->method, bhttp::verb::get);
  EXPECT_TRUE(std::holds_alternative<JsonRoute>(root->handler));
  EXPECT_NE(find(routes, "/", bhttp::verb::head), nullptr) << "HEAD finds GET routes";
  ASSERT_NE(find(routes, "/json"), nullptr);
  EXPECT_EQ(find(routes, "/json")->method, bhttp::verb::post);
  EXPECT_TRUE(std::holds_alternative<FileRoute>(find(routes, "/file")->handler));
  EXPECT_TRUE(std::holds_alternative<StreamRoute>(find(routes, "/stream")->handler));
  EXPECT_TRUE(std::holds_alternative<UploadRoute>(find(routes, "/upload")->handler));
}

TEST(RouteTable, NamesTheOtherMethodsOfAPathForA405) {
  const RouteTable routes = routes_for_test();
  const auto wrong = routes.find(bhttp::verb::get, "/json");
  EXPECT_EQ(wrong.route, nullptr);
  EXPECT_EQ(wrong.other_methods, std::vector<bhttp::verb>{bhttp::verb::post});
  const auto put = routes.find(bhttp::verb::put, "/api/sessions/a");
  EXPECT_EQ(put.route, nullptr);
  EXPECT_EQ(put.other_methods, (std::vector<bhttp::verb>{bhttp::verb::get, bhttp::verb::delete_}));
  EXPECT_TRUE(put.params.empty());
  EXPECT_TRUE(routes.find(bhttp::verb::get, "/nowhere").other_methods.empty());
}

TEST(RouteTable, IgnoresTheQuery) {
  const RouteTable routes = routes_for_test();
  ASSERT_NE(find(routes, "/json?a=b"), nullptr);
  EXPECT_EQ(find(routes, "/json?a=b")->path, "/json");
  ASSERT_NE(find(routes, "/?", bhttp::verb::get), nullptr);
}

TEST(RouteTable, MatchesWholePathsOnly) {
  const RouteTable routes = routes_for_test();
  EXPECT_EQ(find(routes, "/jso"), nullptr);
  EXPECT_EQ(find(routes, "/json/"), nullptr);
  EXPECT_EQ(find(routes, "/JSON"), nullptr);
  EXPECT_EQ(find(routes, ""), nullptr);
  EXPECT_EQ(find(routes, "json"), nullptr);
}

TEST(RouteTable, ParametersTakeOneSegmentAndRestParametersTheRest) {
  const RouteTable routes = routes_for_test();
  const auto one = routes.find(bhttp::verb::delete_, "/api/sessions/s%2D1?sandbox_id=x");
  ASSERT_NE(one.route, nullptr);
  EXPECT_EQ(one.params, (std::vector<std::pair<std::string, std::string>>{{"id", "s-1"}}));
  EXPECT_EQ(routes.find(bhttp::verb::get, "/api/sessions/").route, nullptr) << "empty segment";
  EXPECT_EQ(routes.find(bhttp::verb::get, "/api/sessions/a/b").route, nullptr);
  const auto rest = routes.find(bhttp::verb::post, "/api/sessions/a/swerex/run/in/session");
  ASSERT_NE(rest.route, nullptr);
  EXPECT_EQ(rest.params, (std::vector<std::pair<std::string, std::string>>{
                             {"id", "a"}, {"endpoint", "run/in/session"}}));
  EXPECT_EQ(routes.find(bhttp::verb::post, "/api/sessions/a/swerex/").route, nullptr);
}

TEST(RouteTable, MatchPathLeavesNoParametersWhenItFails) {
  std::vector<std::pair<std::string, std::string>> params;
  EXPECT_FALSE(rex::server::match_path("/a/{x}/b/{y}", "/a/1/c/2", params));
  EXPECT_TRUE(params.empty());
  EXPECT_FALSE(rex::server::match_path("/a/{x", "/a/1", params)) << "a malformed pattern";
  EXPECT_TRUE(rex::server::match_path("/a/{x}/b/{y}", "/a/1/b/2", params));
  EXPECT_EQ(params.size(), 2u);
}

TEST(RouteTable, TheFirstRouteAddedThatMatchesWinsWhateverTheOtherMethodsBetween) {
  RouteTable routes;
  JsonRoute json = [](rex::server::Request) -> asio::awaitable<Answer> { co_return Answer{}; };
  routes.add(bhttp::verb::get, "/a/{x}", json);
  routes.add(bhttp::verb::post, "/a/{x}", json);
  routes.add(bhttp::verb::get, "/a/b", json);  // the pattern above takes it first
  routes.add(bhttp::verb::put, "/a/b", json);
  routes.add(bhttp::verb::post, "/a/b", json);
  const RouteTable moved = std::move(routes);
  const RouteTable copy = moved;
  for (const RouteTable* t : {&moved, &copy}) {
    const auto got = t->find(bhttp::verb::get, "/a/b");
    ASSERT_NE(got.route, nullptr);
    EXPECT_EQ(got.route->path, "/a/{x}");
    EXPECT_EQ(got.params, (std::vector<std::pair<std::string, std::string>>{{"x", "b"}}));
    EXPECT_EQ(t->find(bhttp::verb::post, "/a/b").route->path, "/a/{x}");
    ASSERT_NE(t->find(bhttp::verb::put, "/a/b").route, nullptr);
    EXPECT_EQ(t->find(bhttp::verb::put, "/a/b").route->method, bhttp::verb::put);
    EXPECT_EQ(t->find(bhttp::verb::put, "/a/c").other_methods,
              (std::vector<bhttp::verb>{bhttp::verb::get, bhttp::verb::post}));
  }
}

TEST(RouteTable, AnEmptyTableFindsNothing) {
  const RouteTable routes;
  EXPECT_EQ(find(routes, "/"), nullptr);
}

TEST(Request, ReadsQueryParametersHeaderFieldsAndPath) {
  rex::server::Request request;
  request.header.target("/files/x?path=%2Ftmp%2Fa+b&empty&n=1&path=second");
  request.header.set("X-Api-Key", "k");
  request.params = {{"id", "x"}};
  EXPECT_EQ(request.path(), "/files/x");
  EXPECT_EQ(request.query("path"), "/tmp/a b") << "the first of repeated parameters";
  EXPECT_EQ(request.query("empty"), "");
  EXPECT_EQ(request.query("n"), "1");
  EXPECT_EQ(request.query("missing"), std::nullopt);
  EXPECT_EQ(request.field("x-api-key"), "k") << "field names are case-insensitive";
  EXPECT_EQ(request.field("Authorization"), std::nullopt);
  EXPECT_EQ(request.param("id"), "x");
  EXPECT_EQ(request.param("other"), "");
}

}  // namespace
