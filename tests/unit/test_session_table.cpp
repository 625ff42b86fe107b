// The gateway's session table (src/gateway/session_table.hpp) on a clock of the test's choosing:
// admission with its idempotency index and quota windows, and the same rules after the table is
// rebuilt from what the store keeps (a restart).
#include "gateway/session_table.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <stdexcept>
#include <string>

namespace {

namespace state = rex::gateway::state;
using rex::gateway::CreateRequest;
using rex::gateway::IdempotencyKey;
using rex::gateway::Quota;
using rex::gateway::SessionRecord;
using rex::gateway::SessionTable;
using Kind = rex::gateway::lifecycle::CreateDecision::Kind;

constexpr double kT0 = 1'800'000'000;  // the fake clock's start (unix seconds)

class SessionTableTest : public testing::Test {
 protected:
  boost::asio::io_context io;
  SessionTable table{io.get_executor()};

  static CreateRequest ask(std::string tenant, std::string key, std::string body, double now,
                           Quota quota = {}) {
    return CreateRequest{std::move(tenant), std::move(key), std::move(body), quota, now};
  }
  static SessionRecord record(std::string id, std::string tenant, std::string state) {
    SessionRecord rec;
    rec.id = std::move(id);
    rec.tenant = std::move(tenant);
    rec.state = std::move(state);
    rec.created_at = kT0;
    rec.last_active = kT0 + 5;
    return rec;
  }
  // Admits the create and opens its entry as the gateway does; the decision's kind.
  Kind create(const std::string& id, const CreateRequest& a) {
    const auto d = table.admit(a);
    if (d.kind == Kind::admit) {
      table.open(id, a).rec.state = std::string(state::ready);
    }
    return d.kind;
  }
};

TEST_F(SessionTableTest, AKeyAnswersItsSessionForTheSameBodyAndIsRefusedForAnother) {
  ASSERT_EQ(create("s1", ask("t", "k", "body-1", kT0)), Kind::admit);
  EXPECT_EQ(table.session_of_key("t", "k"), "s1");
  EXPECT_EQ(table.at("s1").rec.idempotency_key, "k");

  const auto again = table.admit(ask("t", "k", "body-1", kT0 + 1));
  EXPECT_EQ(again.kind, Kind::existing);
  EXPECT_EQ(again.session_id, "s1");

  const auto other = table.admit(ask("t", "k", "body-2", kT0 + 1));
  ASSERT_EQ(other.kind, Kind::refuse);
  EXPECT_EQ(other.refusal->status(), 422u);
  EXPECT_EQ(other.refusal->code(), "idempotency.mismatch");
}

TEST_F(SessionTableTest, KeysBelongToTheirTenant) {
  ASSERT_EQ(create("s1", ask("a", "k", "body", kT0)), Kind::admit);
  EXPECT_EQ(table.admit(ask("b", "k", "another body", kT0)).kind, Kind::admit);
  EXPECT_EQ(table.session_of_key("b", "k"), std::nullopt);
}

TEST_F(SessionTableTest, AForgottenKeyIsFreeForANewAttempt) {
  ASSERT_EQ(create("s1", ask("t", "k", "body", kT0)), Kind::admit);
  table.forget_key("t", "k");  // its record could not be written
  EXPECT_EQ(table.session_of_key("t", "k"), std::nullopt);
  EXPECT_EQ(table.admit(ask("t", "k", "another body", kT0 + 1)).kind, Kind::admit);
}

TEST_F(SessionTableTest, AfterARestartAKeyIsCheckedAgainstItsStoredBodyAsBefore) {
  // What the store gives back at start: the record, and the key with its first body's hash.
  table.restore(record("s1", "t", std::string(state::ready)));
  ASSERT_TRUE(table.restore_key(IdempotencyKey{"t", "k", "body-1", "s1"}));

  const auto same = table.admit(ask("t", "k", "body-1", kT0 + 100));
  EXPECT_EQ(same.kind, Kind::existing);
  EXPECT_EQ(same.session_id, "s1");
  const auto other = table.admit(ask("t", "k", "body-2", kT0 + 100));
  ASSERT_EQ(other.kind, Kind::refuse);
  EXPECT_EQ(other.refusal->code(), "idempotency.mismatch");
}

TEST_F(SessionTableTest, AKeyOfADamagedRecordIsLeftOut) {
  EXPECT_FALSE(table.restore_key(IdempotencyKey{"t", "k", "body", "s-damaged"}));
  EXPECT_EQ(table.session_of_key("t", "k"), std::nullopt);
  EXPECT_EQ(table.admit(ask("t", "k", "body", kT0)).kind, Kind::admit);
}

TEST_F(SessionTableTest, ARestoredSessionIsSettledUnlessACreateOrAnEndWasCutOff) {
  for (const auto s : {state::ready, state::failed, state::lost, state::destroyed})
    EXPECT_TRUE(table.restore(record(std::string("s-") + std::string(s), "t", std::string(s)))
                    .settled.is_set())
        << s;
  for (const auto s : {state::creating, state::stopping})
    EXPECT_FALSE(table.restore(record(std::string("s-") + std::string(s), "t", std::string(s)))
                     .settled.is_set())
        << s;
  // Its activity counts as committed: touching it again writes only past the slack.
  EXPECT_EQ(table.at("s-ready").persisted_activity, kT0 + 5);
}

TEST_F(SessionTableTest, MaxSessionsCountsTheTenantsActiveSessionsOnly) {
  table.restore(record("r1", "t", std::string(state::ready)));
  table.restore(record("c1", "t", std::string(state::creating)));
  table.restore(record("d1", "t", std::string(state::destroyed)));
  table.restore(record("f1", "t", std::string(state::failed)));
  table.restore(record("o1", "other", std::string(state::ready)));
  EXPECT_EQ(table.active_of("t"), 2u);

  const Quota three{.max_sessions = 3};
  ASSERT_EQ(create("s3", ask("t", "", "body", kT0, three)), Kind::admit);
  const auto over = table.admit(ask("t", "", "body", kT0, three));
  ASSERT_EQ(over.kind, Kind::refuse);
  EXPECT_EQ(over.refusal->status(), 429u);
  EXPECT_EQ(over.refusal->code(), "quota.max_sessions");
  EXPECT_EQ(table.admit(ask("other", "", "body", kT0, three)).kind, Kind::admit);

  // One ends: there is room again.
  table.at("r1").rec.state = std::string(state::destroyed);
  EXPECT_EQ(table.admit(ask("t", "", "body", kT0, three)).kind, Kind::admit);
}

TEST_F(SessionTableTest, TheRateWindowIsEachTenantsAndSlidesWithTheClock) {
  const Quota two{.creates_per_minute = 2};
  EXPECT_EQ(table.admit(ask("t", "", "b", kT0, two)).kind, Kind::admit);
  EXPECT_EQ(table.admit(ask("t", "", "b", kT0 + 10, two)).kind, Kind::admit);
  const auto third = table.admit(ask("t", "", "b", kT0 + 20, two));
  ASSERT_EQ(third.kind, Kind::refuse);
  EXPECT_EQ(third.refusal->code(), "quota.creates_per_minute");
  EXPECT_EQ(table.admit(ask("u", "", "b", kT0 + 20, two)).kind, Kind::admit);  // another tenant
  // The first leaves the window 60 s after it came.
  EXPECT_EQ(table.admit(ask("t", "", "b", kT0 + 59, two)).kind, Kind::refuse);
  EXPECT_EQ(table.admit(ask("t", "", "b", kT0 + 61, two)).kind, Kind::admit);
}

TEST_F(SessionTableTest, ARepeatedKeyIsAnsweredWhateverTheQuotasSayNow) {
  const Quota one{.max_sessions = 1, .creates_per_minute = 1};
  ASSERT_EQ(create("s1", ask("t", "k", "body", kT0, one)), Kind::admit);
  const auto again = table.admit(ask("t", "k", "body", kT0 + 1, one));
  EXPECT_EQ(again.kind, Kind::existing);
  EXPECT_EQ(again.session_id, "s1");
}

TEST_F(SessionTableTest, UnknownIdsAndTakenIdsAreNamed) {
  EXPECT_EQ(table.find("nope"), nullptr);
  EXPECT_FALSE(table.contains("nope"));
  try {
    table.at("nope");
    FAIL() << "at() of an unknown id returned";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
  table.open("s1", ask("t", "", "body", kT0));
  EXPECT_THROW(table.open("s1", ask("t", "", "body", kT0)), std::logic_error);
}

}  // namespace
