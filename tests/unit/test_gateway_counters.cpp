// Two parts of the gateway on their own: its metrics (src/gateway/metrics.hpp), as GET /metrics
// shows them, and its event hub (src/gateway/event_hub.hpp), which hands committed events to the
// streams of /api/events.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <string>

#include "gateway/event_hub.hpp"
#include "gateway/metrics.hpp"
#include "gateway/session_table.hpp"

namespace {

using rex::gateway::EventHub;
using rex::gateway::Metrics;
using rex::gateway::SessionRecord;
using rex::gateway::SessionTable;
using rex::gateway::StoredEvent;

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(GatewayMetrics, ACreatesTimeFallsInEveryBucketAtOrAboveIt) {
  boost::asio::io_context io;
  SessionTable none{io.get_executor()};
  Metrics m;
  m.count_create(0.0625);
  m.count_create(0.5);
  const std::string text = m.text(none);
  EXPECT_TRUE(has_line(text, R"(rex_gateway_create_seconds_bucket{le="0.05"} 0)")) << text;
  EXPECT_TRUE(has_line(text, R"(rex_gateway_create_seconds_bucket{le="0.1"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(rex_gateway_create_seconds_bucket{le="0.5"} 2)")) << text;
  EXPECT_TRUE(has_line(text, R"(rex_gateway_create_seconds_bucket{le="+Inf"} 2)")) << text;
  EXPECT_TRUE(has_line(text, "rex_gateway_create_seconds_sum 0.5625")) << text;
  EXPECT_TRUE(has_line(text, "rex_gateway_create_seconds_count 2")) << text;
}

TEST(GatewayMetrics, ARoutesCounterIsOneWhicheverWayItIsCounted) {
  boost::asio::io_context io;
  SessionTable none{io.get_executor()};
  Metrics m;
  std::uint64_t* held = m.requests_of("/api/sessions");
  ++*held;
  m.count_request("/api/sessions");
  m.count_request("/sandboxes");
  m.count_error("session.not_found");
  m.count_error("session.not_found");
  EXPECT_EQ(*held, 2u);
  const std::string text = m.text(none);
  EXPECT_TRUE(has_line(text, R"(rex_gateway_requests_total{route="/api/sessions"} 2)")) << text;
  EXPECT_TRUE(has_line(text, R"(rex_gateway_requests_total{route="/sandboxes"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(rex_gateway_errors_total{code="session.not_found"} 2)")) << text;
}

TEST(GatewayMetrics, SessionsAreCountedByStateAndProvider) {
  boost::asio::io_context io;
  SessionTable table{io.get_executor()};
  auto add = [&](std::string id, std::string state, std::string provider) {
    SessionRecord rec;
    rec.id = std::move(id);
    rec.state = std::move(state);
    rec.provider = std::move(provider);
    table.restore(std::move(rec));
  };
  add("a", "ready", "local");
  add("b", "ready", "local");
  add("c", "ready", "docker");
  add("d", "destroyed", "local");
  const std::string text = Metrics{}.text(table);
  EXPECT_TRUE(has_line(text, R"(rex_gateway_sessions{state="ready",provider="local"} 2)")) << text;
  EXPECT_TRUE(has_line(text, R"(rex_gateway_sessions{state="ready",provider="docker"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(rex_gateway_sessions{state="destroyed",provider="local"} 1)"))
      << text;
}

StoredEvent event(std::int64_t id, std::string tenant) {
  StoredEvent e;
  e.id = id;
  e.tenant = std::move(tenant);
  e.type = "created";
  return e;
}

TEST(GatewayEventHub, EachSubscriberGetsItsTenantsEventsInOrderAndIsWoken) {
  boost::asio::io_context io;
  EventHub hub;
  auto a = hub.subscribe(io.get_executor(), std::string("a"));
  auto every = hub.subscribe(io.get_executor(), std::nullopt);
  hub.publish({event(1, "a"), event(2, "b"), event(3, "a")});
  ASSERT_EQ(a->queue.size(), 2u);
  EXPECT_EQ(a->queue[0].id, 1);
  EXPECT_EQ(a->queue[1].id, 3);
  EXPECT_TRUE(a->wake.is_set());
  ASSERT_EQ(every->queue.size(), 3u);

  auto b = hub.subscribe(io.get_executor(), std::string("b"));
  hub.publish({event(4, "a")});
  EXPECT_TRUE(b->queue.empty());
  EXPECT_FALSE(b->wake.is_set());  // nothing of its own: not woken
}

TEST(GatewayEventHub, ASubscriberThatLeftGetsNothingAndStoppingWakesTheRest) {
  boost::asio::io_context io;
  EventHub hub;
  auto gone = hub.subscribe(io.get_executor(), std::nullopt);
  auto stays = hub.subscribe(io.get_executor(), std::string("t"));
  hub.leave(gone);
  EXPECT_EQ(hub.size(), 1u);
  hub.publish({event(1, "t")});
  EXPECT_TRUE(gone->queue.empty());
  stays->wake.reset();
  hub.wake_all();
  EXPECT_TRUE(stays->wake.is_set());
}

TEST(GatewayEventHub, AnEventAsTheApiShowsIt) {
  StoredEvent e = event(7, "t");
  e.time = 1'800'000'000.5;
  e.session_id = "s1";
  e.actor = "key:ci";
  e.request_id = "r1";
  e.data = boost::json::object{{"state", "ready"}};
  const auto j = rex::gateway::event_json(e);
  EXPECT_EQ(j.at("id").as_int64(), 7);
  EXPECT_EQ(j.at("type").as_string(), "created");
  EXPECT_EQ(j.at("session_id").as_string(), "s1");
  EXPECT_EQ(j.at("tenant").as_string(), "t");
  EXPECT_EQ(j.at("actor").as_string(), "key:ci");
  EXPECT_EQ(j.at("request_id").as_string(), "r1");
  EXPECT_EQ(j.at("data").as_object().at("state").as_string(), "ready");
  EXPECT_EQ(j.at("time").as_string(), "2027-01-15T08:00:00.500Z");
}

}  // namespace
