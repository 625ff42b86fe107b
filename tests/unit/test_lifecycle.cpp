// The gateway's lifecycle rules (src/gateway/lifecycle.hpp) on a clock of the test's choosing:
// the moves between states, expiry (with the deadlines of src/gateway/session_record.hpp, and
// across a restart), and the one plan that reconcile and the drift check carry out against what
// a provider lists.
#include "gateway/lifecycle.hpp"

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace lc = rex::gateway::lifecycle;
namespace state = rex::gateway::state;
namespace json = boost::json;
using rex::gateway::iso_time;
using rex::gateway::recorded_time;
using rex::gateway::SandboxListing;
using rex::gateway::SessionRecord;
using Kind = lc::Step::Kind;

constexpr double kT0 = 1'800'000'000;  // the fake clock's start (unix seconds)

// --- moves ------------------------------------------------------------------------------------

TEST(LifecycleMoves, EveryAllowedMoveAndNoOther) {
  const std::vector<std::string_view> states{state::creating,  state::ready,  state::stopping,
                                             state::destroyed, state::failed, state::lost};
  const std::vector<lc::Move> moves{lc::Move::sandbox_up,  lc::Move::create_failed,
                                    lc::Move::interrupted, lc::Move::stop,
                                    lc::Move::removed,     lc::Move::vanished};
  struct Allowed {
    std::string_view from;
    lc::Move move;
    std::string_view to;
  };
  const std::vector<Allowed> allowed{
      {state::creating, lc::Move::sandbox_up, state::ready},
      {state::creating, lc::Move::create_failed, state::failed},
      {state::creating, lc::Move::interrupted, state::failed},
      {state::ready, lc::Move::stop, state::stopping},
      {state::ready, lc::Move::vanished, state::lost},
      {state::stopping, lc::Move::removed, state::destroyed},
  };
  int checked = 0;
  for (const auto from : states) {
    for (const auto move : moves) {
      const Allowed* rule = nullptr;
      for (const auto& a : allowed)
        if (a.from == from && a.move == move)
          rule = &a;
      if (rule != nullptr) {
        EXPECT_EQ(lc::next_state(from, move), rule->to) << from;
      } else {
        EXPECT_THROW((void)lc::next_state(from, move), std::logic_error) << from;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 36);
}

TEST(LifecycleMoves, AnEndedSessionCannotComeBack) {
  for (const auto ended : {state::destroyed, state::failed, state::lost})
    for (const auto move : {lc::Move::sandbox_up, lc::Move::stop})
      EXPECT_THROW((void)lc::next_state(ended, move), std::logic_error) << ended;
}

TEST(LifecycleMoves, ApplySetsTheReasonAndTheEndOnlyWhenItEnds) {
  SessionRecord rec;
  lc::apply(rec, lc::Move::sandbox_up, kT0);
  EXPECT_EQ(rec.state, state::ready);
  EXPECT_EQ(rec.ended_at, 0);
  lc::apply(rec, lc::Move::stop, kT0 + 5, "deleted");
  EXPECT_EQ(rec.state, state::stopping);
  EXPECT_EQ(rec.reason, "deleted");
  EXPECT_EQ(rec.ended_at, 0);
  lc::apply(rec, lc::Move::removed, kT0 + 6);
  EXPECT_EQ(rec.state, state::destroyed);
  EXPECT_EQ(rec.reason, "deleted");  // kept from the stop
  EXPECT_EQ(rec.ended_at, kT0 + 6);

  SessionRecord cut;
  lc::apply(cut, lc::Move::interrupted, kT0, "interrupted", "the gateway stopped");
  EXPECT_EQ(cut.state, state::failed);
  EXPECT_EQ(cut.error, "the gateway stopped");
  EXPECT_EQ(cut.ended_at, kT0);
  // A refused move changes nothing.
  EXPECT_THROW(lc::apply(cut, lc::Move::sandbox_up, kT0 + 1), std::logic_error);
  EXPECT_EQ(cut.state, state::failed);
}

// --- expiry -----------------------------------------------------------------------------------

SessionRecord ready_session(double idle_timeout, double max_lifetime) {
  SessionRecord rec;
  rec.state = std::string(state::ready);
  rec.created_at = kT0;
  rec.last_active = kT0;
  rec.idle_timeout = idle_timeout;
  rec.max_lifetime = max_lifetime;
  return rec;
}

// A paused session is not idle, however long it waits; its deadline still ends it.
TEST(LifecycleExpiry, APausedSessionOnlyReachesItsDeadline) {
  SessionRecord rec = ready_session(60, 3600);
  rec.paused = "memory";
  EXPECT_FALSE(lc::expiry(rec, kT0 + 600));
  EXPECT_EQ(lc::expiry(rec, kT0 + 3600), "ttl_max");
  rec.paused = "disk";
  EXPECT_FALSE(lc::expiry(rec, kT0 + 3599));
  rec.paused.clear();
  EXPECT_EQ(lc::expiry(rec, kT0 + 600), "ttl_idle");
}

TEST(LifecycleExpiry, IdleAfterItsTimeoutFromTheLastActivity) {
  SessionRecord rec = ready_session(60, 3600);
  EXPECT_FALSE(lc::expiry(rec, kT0 + 59.9));
  EXPECT_EQ(lc::expiry(rec, kT0 + 60), "ttl_idle");
  rec.last_active = kT0 + 50;  // a call, or keepalive
  EXPECT_FALSE(lc::expiry(rec, kT0 + 100));
  EXPECT_EQ(lc::expiry(rec, kT0 + 110), "ttl_idle");
}

// Activity at `now`, as the gateway notes it: a call (Gateway::Impl::touch), a keepalive.
void call(SessionRecord& rec, double now) {
  lc::note_activity(rec, now, "execute", true, rec.last_active);
}
void keepalive(SessionRecord& rec, double now, std::optional<double> timeout = std::nullopt) {
  lc::renew(rec, now, timeout);
}

TEST(LifecycleExpiry, ACallIsActivityAndMovesTheIdleDeadline) {
  // A call every 2 s for 10 s on a 3 s timeout: it lives through them (looked at every tenth of
  // a second, as a sweep would), and is idle 3 s after the last.
  SessionRecord rec = ready_session(3, 3600);
  for (int tenth = 0; tenth <= 100; ++tenth) {
    const double now = kT0 + tenth / 10.0;
    if (tenth % 20 == 0)
      call(rec, now);
    EXPECT_FALSE(lc::expiry(rec, now)) << "at +" << tenth / 10.0 << " s";
  }
  EXPECT_EQ(rec.idle_deadline(), kT0 + 13);
  EXPECT_FALSE(lc::expiry(rec, kT0 + 12.9));
  EXPECT_EQ(lc::expiry(rec, kT0 + 13), "ttl_idle");
}

TEST(LifecycleExpiry, AKeepaliveSetsTheIdleDeadlineToItsTimeoutFromNow) {
  SessionRecord rec = ready_session(60, 3600);
  keepalive(rec, kT0 + 50, 100);
  EXPECT_EQ(rec.idle_deadline(), kT0 + 150);
  EXPECT_FALSE(lc::expiry(rec, kT0 + 60));  // the idle deadline before it
  EXPECT_FALSE(lc::expiry(rec, kT0 + 149.9));
  EXPECT_EQ(lc::expiry(rec, kT0 + 150), "ttl_idle");
  // Without a timeout, the session's own (100 s since the last) from the keepalive on.
  keepalive(rec, kT0 + 140);
  EXPECT_EQ(rec.idle_deadline(), kT0 + 240);
  EXPECT_EQ(rec.public_json().at("expires_at").as_string(), iso_time(kT0 + 240));
  // A shorter timeout brings the idle deadline nearer: it counts from now, whatever was left.
  keepalive(rec, kT0 + 150, 5);
  EXPECT_EQ(rec.idle_deadline(), kT0 + 155);
  EXPECT_EQ(lc::expiry(rec, kT0 + 155), "ttl_idle");
}

TEST(LifecycleExpiry, AKeepaliveNeverReachesPastTheDeadline) {
  SessionRecord rec = ready_session(60, 300);
  keepalive(rec, kT0 + 250, 100);
  EXPECT_EQ(rec.deadline(), kT0 + 300);
  EXPECT_EQ(rec.idle_deadline(), kT0 + 300);  // not kT0 + 350
  // What the keepalive answers: expires_at is the deadline.
  const json::object shown = rec.public_json();
  EXPECT_EQ(shown.at("expires_at"), shown.at("deadline"));
  EXPECT_EQ(shown.at("expires_at").as_string(), iso_time(kT0 + 300));
  EXPECT_FALSE(lc::expiry(rec, kT0 + 299.9));
  EXPECT_EQ(lc::expiry(rec, kT0 + 300), "ttl_max");  // the deadline ends it, not idleness
  // Nor does a later keepalive, however long it asks for.
  keepalive(rec, kT0 + 299, 1e9);
  EXPECT_EQ(rec.idle_deadline(), kT0 + 300);
  EXPECT_EQ(lc::expiry(rec, kT0 + 300), "ttl_max");
}

TEST(LifecycleActivity, ACallIsCountedAndAnAnswerStillFlowingIsNot) {
  SessionRecord rec = ready_session(60, 3600);
  lc::note_activity(rec, kT0 + 10, "execute", true, kT0);
  lc::note_activity(rec, kT0 + 11, "port 8080", false, kT0);
  EXPECT_EQ(rec.calls, 1u);
  EXPECT_EQ(rec.last_active, kT0 + 11);   // both start the idle clock again
  EXPECT_EQ(rec.last_call, "port 8080");  // and name what kept it alive
  lc::renew(rec, kT0 + 12, std::nullopt);
  EXPECT_EQ(rec.last_call, "keepalive");
}

TEST(LifecycleActivity, ActivityIsCommittedOnceItIsATenthOfTheIdleTimeoutBehind) {
  SessionRecord rec = ready_session(60, 3600);  // a tenth: 6 s
  EXPECT_FALSE(lc::note_activity(rec, kT0 + 5.9, "files", true, kT0));
  EXPECT_TRUE(lc::note_activity(rec, kT0 + 6, "files", true, kT0));
  // Never less than a second behind, however short the timeout.
  SessionRecord short_lived = ready_session(3, 3600);
  EXPECT_FALSE(lc::note_activity(short_lived, kT0 + 0.9, "files", true, kT0));
  EXPECT_TRUE(lc::note_activity(short_lived, kT0 + 1, "files", true, kT0));
}

TEST(LifecycleActivity, SetTimeoutCountsFromNowAndStopsAtTheDeadline) {
  SessionRecord rec = ready_session(60, 300);
  lc::set_timeout(rec, kT0 + 100, 30, "e2b.set_timeout");
  EXPECT_EQ(rec.idle_deadline(), kT0 + 130);
  EXPECT_EQ(rec.last_call, "e2b.set_timeout");
  lc::set_timeout(rec, kT0 + 100, 1000, "e2b.set_timeout");  // past the deadline: up to it
  EXPECT_EQ(rec.idle_timeout, 200);
  EXPECT_EQ(rec.idle_deadline(), kT0 + 300);
  lc::set_timeout(rec, kT0 + 299.5, 1000, "e2b.connect");  // never below a second
  EXPECT_EQ(rec.idle_timeout, 1);
  EXPECT_EQ(rec.idle_deadline(), kT0 + 300);
}

TEST(LifecycleExpiry, TheDeadlineWinsOverActivity) {
  SessionRecord rec = ready_session(60, 300);
  rec.last_active = kT0 + 290;
  EXPECT_FALSE(lc::expiry(rec, kT0 + 299));
  EXPECT_EQ(lc::expiry(rec, kT0 + 300), "ttl_max");
  EXPECT_EQ(lc::expiry(rec, kT0 + 10'000), "ttl_max");
}

TEST(LifecycleExpiry, AnIdleDeadlineThatFallsOnTheDeadlineEndsItAsTtlMax) {
  // An idle timeout longer than the session has left: its idle deadline is the deadline, and
  // the reason the deadline's.
  const SessionRecord longer = ready_session(600, 300);
  EXPECT_EQ(longer.idle_deadline(), kT0 + 300);
  EXPECT_FALSE(lc::expiry(longer, kT0 + 299.9));
  EXPECT_EQ(lc::expiry(longer, kT0 + 300), "ttl_max");
  // Both due in the same instant: ttl_max too.
  const SessionRecord both = ready_session(300, 300);
  EXPECT_EQ(lc::expiry(both, kT0 + 300), "ttl_max");
}

TEST(LifecycleExpiry, NoIdleTimeoutMeansOnlyTheDeadline) {
  const SessionRecord rec = ready_session(0, 300);
  EXPECT_FALSE(lc::expiry(rec, kT0 + 299));
  EXPECT_EQ(lc::expiry(rec, kT0 + 300), "ttl_max");
}

TEST(LifecycleExpiry, OnlyReadySessionsExpire) {
  for (const auto s :
       {state::creating, state::stopping, state::destroyed, state::failed, state::lost}) {
    SessionRecord rec = ready_session(1, 1);
    rec.state = std::string(s);
    EXPECT_FALSE(lc::expiry(rec, kT0 + 100)) << s;
  }
}

// --- across a restart -------------------------------------------------------------------------

// What a restarted gateway reads: the record as the store keeps it (its JSON, as text).
SessionRecord stored_and_read_back(const SessionRecord& rec) {
  return SessionRecord::from_json(json::parse(json::serialize(rec.to_json())).as_object());
}

// Ready and idle since `t` (a time as records keep it, on the millisecond), on a 4 s timeout.
SessionRecord idle_since(double t) {
  SessionRecord rec = ready_session(4, 3600);
  rec.created_at = recorded_time(t - 0.01);
  rec.ready_at = t;
  rec.last_active = t;
  return rec;
}

TEST(LifecycleRestart, TheIdleDeadlineIsKeptFromTheStoredLastActivity) {
  // The gateway restarts at t + 3: the session is still due at t + 4, from its stored last
  // activity, not 4 s after the restart. (Boost.JSON may read a time back a few units in the
  // last place off: the instants looked at are a millisecond either side.)
  const double t = recorded_time(kT0 + 0.123);
  const SessionRecord rec = idle_since(t);
  const SessionRecord back = stored_and_read_back(rec);
  EXPECT_EQ(iso_time(back.last_active), iso_time(t));
  EXPECT_EQ(back.public_json().at("expires_at"), rec.public_json().at("expires_at"));
  EXPECT_FALSE(lc::expiry(back, t + 3));
  EXPECT_FALSE(lc::expiry(back, t + 3.999));
  EXPECT_EQ(lc::expiry(back, t + 4.001), "ttl_idle");
  // Due while the gateway was down: it expires at the first look.
  EXPECT_EQ(lc::expiry(back, t + 60), "ttl_idle");
}

TEST(LifecycleRestart, ARenewalIsKeptAsTheKeepaliveAnsweredIt) {
  // Renewed at t + 1.5 for 10 s: after a restart it lives on past its first idle deadline
  // (t + 4) to t + 11.5, and the API shows the expires_at the keepalive answered.
  const double t = recorded_time(kT0 + 0.123);
  SessionRecord rec = idle_since(t);
  keepalive(rec, t + 1.5, 10);
  const json::value answered = rec.public_json().at("expires_at");
  EXPECT_EQ(answered.as_string(), iso_time(t + 11.5));
  const SessionRecord back = stored_and_read_back(rec);
  EXPECT_EQ(back.public_json().at("expires_at"), answered);
  EXPECT_EQ(back.idle_timeout, 10);
  EXPECT_FALSE(lc::expiry(back, t + 7));
  EXPECT_FALSE(lc::expiry(back, t + 11.499));
  EXPECT_EQ(lc::expiry(back, t + 11.501), "ttl_idle");
}

TEST(LifecycleRestart, TheDeadlineIsKeptFromTheStoredCreation) {
  // Created at t with 300 s to live; a restart, and a keepalive after it, change nothing.
  const double t = recorded_time(kT0 + 0.123);
  SessionRecord rec = idle_since(t);
  rec.created_at = t;
  rec.max_lifetime = 300;
  SessionRecord back = stored_and_read_back(rec);
  EXPECT_EQ(back.public_json().at("deadline"), rec.public_json().at("deadline"));
  keepalive(back, t + 299, 100);
  EXPECT_EQ(iso_time(back.idle_deadline()), iso_time(t + 300));
  EXPECT_FALSE(lc::expiry(back, t + 299.999));
  EXPECT_EQ(lc::expiry(back, t + 300.001), "ttl_max");
}

// --- admission of a create --------------------------------------------------------------------

lc::CreateAsk ask(double now) {
  lc::CreateAsk a;
  a.tenant = "acme";
  a.body_hash = "h1";
  a.now = now;
  return a;
}

TEST(LifecycleCreate, WithoutQuotasEveryCreateIsAdmitted) {
  std::deque<double> recent;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(lc::decide_create(ask(kT0), recent).kind, lc::CreateDecision::Kind::admit);
  EXPECT_TRUE(recent.empty());  // no rate: nothing counted
}

TEST(LifecycleCreate, AKeyUsedBeforeAnswersItsSessionWithTheSameBodyOnly) {
  std::deque<double> recent;
  lc::CreateAsk a = ask(kT0);
  a.key_use = lc::CreateAsk::KeyUse{"s1", "h1"};
  const auto same = lc::decide_create(a, recent);
  EXPECT_EQ(same.kind, lc::CreateDecision::Kind::existing);
  EXPECT_EQ(same.session_id, "s1");
  a.body_hash = "h2";
  const auto other = lc::decide_create(a, recent);
  ASSERT_EQ(other.kind, lc::CreateDecision::Kind::refuse);
  EXPECT_EQ(other.refusal->status(), 422u);
  EXPECT_EQ(other.refusal->code(), "idempotency.mismatch");
  EXPECT_FALSE(other.refusal->retryable());
}

TEST(LifecycleCreate, AKeyUsedBeforeIsAnsweredWhateverTheQuotasSayNow) {
  std::deque<double> recent{kT0 - 1, kT0 - 1};
  lc::CreateAsk a = ask(kT0);
  a.key_use = lc::CreateAsk::KeyUse{"s1", "h1"};
  a.active = 5;
  a.max_sessions = 5;
  a.creates_per_minute = 2;
  EXPECT_EQ(lc::decide_create(a, recent).kind, lc::CreateDecision::Kind::existing);
  EXPECT_EQ(recent.size(), 2u);  // a repeat is not a create
}

TEST(LifecycleCreate, MaxSessionsCountsTheActiveOnes) {
  std::deque<double> recent;
  lc::CreateAsk a = ask(kT0);
  a.max_sessions = 4;
  a.active = 3;
  EXPECT_EQ(lc::decide_create(a, recent).kind, lc::CreateDecision::Kind::admit);
  a.active = 4;
  const auto d = lc::decide_create(a, recent);
  ASSERT_EQ(d.kind, lc::CreateDecision::Kind::refuse);
  EXPECT_EQ(d.refusal->status(), 429u);
  EXPECT_EQ(d.refusal->code(), "quota.max_sessions");
  EXPECT_STREQ(d.refusal->what(), "tenant \"acme\" has 4 active sessions, its limit");
  EXPECT_EQ(d.refusal->retry_after(), 5.0);
}

TEST(LifecycleCreate, TheRateWindowSlidesWithTheClock) {
  std::deque<double> recent;
  lc::CreateAsk a = ask(kT0);
  a.creates_per_minute = 2;
  EXPECT_EQ(lc::decide_create(a, recent).kind, lc::CreateDecision::Kind::admit);
  a.now = kT0 + 10;
  EXPECT_EQ(lc::decide_create(a, recent).kind, lc::CreateDecision::Kind::admit);
  a.now = kT0 + 20;
  auto d = lc::decide_create(a, recent);
  ASSERT_EQ(d.kind, lc::CreateDecision::Kind::refuse);
  EXPECT_EQ(d.refusal->code(), "quota.creates_per_minute");
  EXPECT_STREQ(d.refusal->what(), "tenant \"acme\" may create 2 sessions a minute");
  EXPECT_EQ(d.refusal->retry_after(), 40.0);  // when the first leaves the window
  EXPECT_EQ(recent.size(), 2u);               // a refusal is not counted
  a.now = kT0 + 59.5;
  d = lc::decide_create(a, recent);
  ASSERT_EQ(d.kind, lc::CreateDecision::Kind::refuse);
  EXPECT_EQ(d.refusal->retry_after(), 1.0);  // never less than a second
  a.now = kT0 + 60;                          // the first has left the window
  EXPECT_EQ(lc::decide_create(a, recent).kind, lc::CreateDecision::Kind::admit);
  EXPECT_EQ(recent, (std::deque<double>{kT0 + 10, kT0 + 60}));
}

TEST(LifecycleCreate, AFractionalRateIsNamedAsConfigured) {
  std::deque<double> recent{kT0};
  lc::CreateAsk a = ask(kT0 + 1);
  a.creates_per_minute = 0.5;
  const auto d = lc::decide_create(a, recent);
  ASSERT_EQ(d.kind, lc::CreateDecision::Kind::refuse);
  EXPECT_STREQ(d.refusal->what(), "tenant \"acme\" may create 0.5 sessions a minute");
}

// --- the plan ---------------------------------------------------------------------------------

SandboxListing sandbox(std::string id, std::string session, double created_at, bool running = true,
                       bool spare = false) {
  SandboxListing s;
  s.sandbox_id = std::move(id);
  s.session_id = std::move(session);
  s.running = running;
  s.created_at = created_at;
  s.spare = spare;
  return s;
}

lc::Inputs inputs(lc::Pass pass) {
  lc::Inputs in;
  in.pass = pass;
  in.now = kT0 + 1000;
  in.listed_at = in.now - 0.01;
  in.orphan_grace = 60;
  return in;
}

TEST(LifecyclePlan, AtStartAReadySessionWhoseSandboxRunsIsAdopted) {
  lc::Inputs in = inputs(lc::Pass::start);
  in.sessions = {{"s1", std::string(state::ready), "s1", false}};
  in.listing = {sandbox("s1", "s1", kT0)};
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::adopt, "s1", "s1", {}}}));
}

TEST(LifecyclePlan, AtStartASpareHandedToASessionIsFoundByTheSessionItNames) {
  lc::Inputs in = inputs(lc::Pass::start);
  in.sessions = {{"s1", std::string(state::ready), "w42", false}};
  in.listing = {sandbox("w42", "s1", kT0)};
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::adopt, "s1", "w42", {}}}));
}

TEST(LifecyclePlan, AReadySessionWithoutItsSandboxIsLost) {
  lc::Inputs in = inputs(lc::Pass::start);
  in.sessions = {{"gone", std::string(state::ready), "gone", false},
                 {"ended", std::string(state::ready), "ended", false}};
  in.listing = {sandbox("ended", "ended", kT0, /*running=*/false)};
  const auto steps = lc::plan(in);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0], (lc::Step{Kind::lost,
                                "gone",
                                {},
                                "the sandbox was gone when the gateway "
                                "started"}));
  EXPECT_EQ(
      steps[1],
      (lc::Step{
          Kind::lost, "ended", {}, "the sandbox's server had ended when the gateway started"}));
  // The ended server's sandbox goes: the session that owned it is lost.
  EXPECT_EQ(steps[2], (lc::Step{Kind::remove, "ended", "ended", {}}));

  in.pass = lc::Pass::drift;
  const auto drift = lc::plan(in);
  ASSERT_EQ(drift.size(), 3u);
  EXPECT_EQ(drift[0].error, "the sandbox is gone");
  EXPECT_EQ(drift[1].error, "the sandbox's server has ended");
}

TEST(LifecyclePlan, AtStartACreateCutOffFailsAndItsSandboxGoesWhateverItsAge) {
  lc::Inputs in = inputs(lc::Pass::start);
  in.sessions = {{"s1", std::string(state::creating), "", false}};
  in.listing = {sandbox("s1", "s1", in.now - 0.5)};  // started half a second before the crash
  const auto steps = lc::plan(in);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].kind, Kind::interrupted);
  EXPECT_EQ(steps[0].error, "the gateway stopped while the sandbox was being created");
  EXPECT_EQ(steps[1], (lc::Step{Kind::remove, "s1", "s1", {}}));
}

TEST(LifecyclePlan, WhileRunningACreateInProgressIsLeftAlone) {
  lc::Inputs in = inputs(lc::Pass::drift);
  in.sessions = {{"s1", std::string(state::creating), "", false}};
  in.listing = {sandbox("s1", "s1", kT0)};  // old enough to be an orphan, but owned
  EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
}

TEST(LifecyclePlan, AnEndCutOffIsCarriedOnUnlessItIsUnderWay) {
  lc::Inputs in = inputs(lc::Pass::drift);
  in.sessions = {{"s1", std::string(state::stopping), "s1", false},
                 {"s2", std::string(state::stopping), "s2", true}};
  in.listing = {sandbox("s1", "s1", kT0), sandbox("s2", "s2", kT0)};
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::finish_stop, "s1", {}, {}}}));
}

TEST(LifecyclePlan, AnOrphanGoesOnceOlderThanTheGrace) {
  lc::Inputs in = inputs(lc::Pass::drift);
  in.sessions = {{"done", std::string(state::destroyed), "done", false}};
  in.listing = {sandbox("young", "unknown", in.now - 59), sandbox("old", "unknown", in.now - 60),
                sandbox("done", "done", in.now - 59)};
  // The young one may belong to a create whose record is not committed yet; a sandbox whose
  // session has ended is an orphan too, with the same grace.
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::remove, {}, "old", {}}}));
  in.now += 1;
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::remove, {}, "young", {}},
                                                 {Kind::remove, {}, "old", {}},
                                                 {Kind::remove, {}, "done", {}}}));
}

TEST(LifecyclePlan, AnEarlierRunsSpareGoesAtOnceAndTheRunningOnesAreNotListed) {
  lc::Inputs in = inputs(lc::Pass::start);
  in.listing = {sandbox("w1", "", in.now - 1, true, /*spare=*/true)};
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::remove, {}, "w1", {}}}));
}

TEST(LifecyclePlan, ASandboxIsRemovedOnceAndNotWhileItsRemovalIsUnderWay) {
  lc::Inputs in = inputs(lc::Pass::start);
  // The interrupted create's sandbox is also old and no longer owned: one removal.
  in.sessions = {{"s1", std::string(state::creating), "", false}};
  in.listing = {sandbox("s1", "s1", kT0), sandbox("o1", "x", kT0)};
  const auto steps = lc::plan(in);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[1], (lc::Step{Kind::remove, "s1", "s1", {}}));
  EXPECT_EQ(steps[2], (lc::Step{Kind::remove, {}, "o1", {}}));
  in.being_removed = {"s1", "o1"};
  const auto again = lc::plan(in);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].kind, Kind::interrupted);
}

TEST(LifecyclePlan, WhileRunningAReadySessionIsMatchedByItsOwnSandbox) {
  lc::Inputs in = inputs(lc::Pass::drift);
  in.sessions = {{"s1", std::string(state::ready), "w9", false}};
  // Two sandboxes name the session: the one its record names runs and stays; the other is left
  // over (a rewind's old sandbox, its removal cut off) and goes once past the grace.
  in.listing = {sandbox("w9", "s1", kT0), sandbox("s1", "s1", kT0)};
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::remove, {}, "s1", {}}}));
  in.now = kT0 + 1;  // within the grace: a sandbox just started may not be recorded yet
  EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
  in.now = inputs(lc::Pass::drift).now;
  // While a rewind of the session runs, the other is the one it starts.
  in.sessions[0].replacing = true;
  EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
  in.sessions[0].replacing = false;
  // A record naming a sandbox that is not listed: lost, though others name the session; and
  // those are then nobody's, old, and go.
  in.sessions[0].sandbox_id = "w8";
  EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::lost, "s1", {}, "the sandbox is gone"},
                                                 {Kind::remove, {}, "w9", {}},
                                                 {Kind::remove, {}, "s1", {}}}));
}

// Paused to its checkpoint, a session runs no sandbox: not lost, at start or while running; a
// sandbox that still names it (its removal cut off) is nobody's.
TEST(LifecyclePlan, ASessionPausedToItsCheckpointHasNoSandboxAndIsNotLost) {
  for (const auto pass : {lc::Pass::start, lc::Pass::drift}) {
    lc::Inputs in = inputs(pass);
    in.sessions = {{"s1", std::string(state::ready), "", false, kT0, true}};
    EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
    in.listing = {sandbox("c1", "s1", kT0)};
    EXPECT_EQ(lc::plan(in), (std::vector<lc::Step>{{Kind::remove, {}, "c1", {}}}));
    // Unless it is the one its resume is starting.
    in.sessions[0].replacing = true;
    EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
  }
}

TEST(LifecyclePlan, ASessionReadySinceTheListingWasAskedForIsNotJudgedByIt) {
  // The drift check asked for the listing; a create finished while the provider answered: the
  // listing shows its container created but not yet running. The session is not lost.
  lc::Inputs in = inputs(lc::Pass::drift);
  in.sessions = {{"s1", std::string(state::ready), "c1", false, in.listed_at + 0.003}};
  in.listing = {sandbox("c1", "s1", in.listed_at - 1, /*running=*/false)};
  EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
  // The next check's listing, asked for after the session was ready, judges it.
  in.listed_at += 1;
  in.now += 1;
  ASSERT_EQ(lc::plan(in).size(), 2u);
  EXPECT_EQ(lc::plan(in)[0].kind, Kind::lost);
  // Ready in the very millisecond the listing was asked for: not judged either.
  in.sessions[0].ready_at = in.listed_at;
  EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
}

TEST(LifecyclePlan, EndedSessionsGetNoDecision) {
  lc::Inputs in = inputs(lc::Pass::start);
  for (const auto s : {state::destroyed, state::failed, state::lost})
    in.sessions.push_back({std::string(s) + "-id", std::string(s), "", false});
  EXPECT_EQ(lc::plan(in), std::vector<lc::Step>{});
}

}  // namespace
