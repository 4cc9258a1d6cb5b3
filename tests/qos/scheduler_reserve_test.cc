// The reserved slot (Policy::critical_reserved_slots): a non-CRITICAL turn never takes the
// last free slot(s), so a CRITICAL request starts at the next chunk boundary without a park
// area; a higher non-CRITICAL class still parks a lower one; one slot is always usable.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "qos/policy.h"
#include "qos/scheduler.h"
#include "tests/common/test_util.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

using testing::FakeEngine;
using testing::MakeRequest;
using testing::RecordingSink;
constexpr int64_t kMs = thermal::kNsPerMs;
constexpr int kLong = 200;  // tokens of a NORMAL turn: many chunks

struct Rig {
  Rig(int slots, int park_areas, uint32_t reserve) : engine(slots, park_areas) {
    policy = testing::TestPolicy();
    policy.critical_reserved_slots = reserve;
    SchedulerOptions o;
    o.policy = &policy;
    o.engine = &engine;
    o.clock = &clock;
    o.sink = &sink;
    o.topology = testing::TwoCpuTopology();
    auto s = Scheduler::Create(o);
    EXPECT_TRUE(s.has_value());
    sched = std::move(*s);
  }
  void Step(int n = 1) {
    for (int i = 0; i < n; ++i) {
      const StepResult r = sched->Step();
      if (r.next_step_ns > clock.NowNs() && r.next_step_ns != INT64_MAX) {
        clock.SetNs(r.next_step_ns);
      }
      clock.AdvanceNs(kMs);
    }
  }
  // Steps 30 ms apart: a queued request ages one rank per 100 ms past the running turn.
  void AgeSteps(int n) {
    for (int i = 0; i < n; ++i) {
      clock.AdvanceNs(30 * kMs);
      sched->Step();
    }
  }
  void RunAll() {
    for (int i = 0; i < 20000 && sched->live_requests() > 0; ++i) Step();
  }
  // The slots that ran a chunk of `id`.
  std::set<int32_t> SlotsOf(uint64_t id) const {
    std::set<int32_t> s;
    for (const StepInfo& st : sink.steps) {
      if (st.id == id) s.insert(st.slot);
    }
    return s;
  }
  int FirstStepOf(uint64_t id) const {
    for (size_t i = 0; i < sink.steps.size(); ++i) {
      if (sink.steps[i].id == id) return static_cast<int>(i);
    }
    return -1;
  }
  int LastStepOf(uint64_t id) const {
    int last = -1;
    for (size_t i = 0; i < sink.steps.size(); ++i) {
      if (sink.steps[i].id == id) last = static_cast<int>(i);
    }
    return last;
  }
  Policy policy;
  FakeEngine engine;
  thermal::ManualClock clock{1000 * kMs};
  RecordingSink sink;
  std::unique_ptr<Scheduler> sched;
};

// Two NORMAL turns on two slots with one reserved: they run one after the other (the second
// never takes the reserved slot), and a CRITICAL arriving mid-turn runs at the next step,
// without parking anyone.
TEST(SchedulerReserve, CriticalFindsTheReservedSlotFree) {
  Rig rig(2, 1, 1);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 16, kLong)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kNormal, 16, kLong)),
            SubmitStatus::kAdmitted);
  rig.AgeSteps(20);  // 1 is in progress; 2 has aged past it, but the free slot is reserved
  ASSERT_EQ(rig.sink.TerminalCount(1), 0u);
  EXPECT_EQ(rig.FirstStepOf(2), -1);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(9, Urgency::kCritical, 16, 8)), SubmitStatus::kAdmitted);
  const size_t before = rig.sink.steps.size();
  rig.Step();
  ASSERT_EQ(rig.sink.steps.size(), before + 1);
  EXPECT_EQ(rig.sink.steps.back().id, 9u);  // the next chunk is the CRITICAL one
  EXPECT_EQ(rig.sink.steps.back().parked_id, 0u);
  rig.RunAll();
  EXPECT_EQ(rig.engine.parks, 0);
  for (uint64_t id : {1, 2, 9}) EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone)) << id;
  EXPECT_GT(rig.FirstStepOf(2), rig.LastStepOf(1));  // one NORMAL turn at a time
  EXPECT_EQ(rig.SlotsOf(1).size(), 1u);
}

// Without the reserve the second NORMAL turn takes the other slot (both in progress), and a
// CRITICAL can only start by parking one of them.
TEST(SchedulerReserve, WithoutReserveCriticalMustPark) {
  Rig rig(2, 1, 0);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 16, kLong)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kNormal, 16, kLong)),
            SubmitStatus::kAdmitted);
  rig.AgeSteps(20);
  ASSERT_EQ(rig.sink.TerminalCount(1), 0u);
  ASSERT_GE(rig.FirstStepOf(2), 0);
  ASSERT_LT(rig.FirstStepOf(2), rig.LastStepOf(1));  // interleaved
  ASSERT_EQ(rig.sched->Submit(MakeRequest(9, Urgency::kCritical, 16, 8)), SubmitStatus::kAdmitted);
  rig.Step();
  EXPECT_EQ(rig.sink.steps.back().id, 9u);
  EXPECT_NE(rig.sink.steps.back().parked_id, 0u);
  rig.RunAll();
  EXPECT_EQ(rig.engine.parks, 1);
  for (uint64_t id : {1, 2, 9}) EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone)) << id;
}

// HIGH does not take the reserved slot: it parks the NORMAL turn (strictly higher class),
// and a CRITICAL then still finds the reserved slot free.
TEST(SchedulerReserve, HighParksNormalAndLeavesTheReserve) {
  Rig rig(2, 1, 1);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 16, kLong)),
            SubmitStatus::kAdmitted);
  rig.Step(5);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(5, Urgency::kHigh, 16, kLong)), SubmitStatus::kAdmitted);
  rig.Step();
  EXPECT_EQ(rig.sink.steps.back().id, 5u);
  EXPECT_EQ(rig.sink.steps.back().parked_id, 1u);
  EXPECT_EQ(rig.SlotsOf(5), rig.SlotsOf(1));  // the parked turn's slot, not the reserved one
  rig.Step(3);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(9, Urgency::kCritical, 16, 8)), SubmitStatus::kAdmitted);
  rig.Step();
  EXPECT_EQ(rig.sink.steps.back().id, 9u);
  EXPECT_EQ(rig.sink.steps.back().parked_id, 0u);
  rig.RunAll();
  EXPECT_EQ(rig.engine.parks, 1);
  EXPECT_EQ(rig.engine.resumes, 1);
  for (uint64_t id : {1, 5, 9}) EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone)) << id;
}

// One slot: the reserve is capped at slots - 1 = 0, so NORMAL work still runs.
TEST(SchedulerReserve, OneSlotIsAlwaysUsable) {
  Rig rig(1, 0, 3);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 16, 20)), SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kBackground, 16, 20)),
            SubmitStatus::kAdmitted);
  rig.RunAll();
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));
}

// The shipped policies reserve one slot; the field survives a text round trip and an
// impossible value is refused with its line.
TEST(SchedulerReserve, PolicyField) {
  for (const char* name : {"policy_default", "policy_a76_4gb_tuned", "policy_static_performance",
                           "policy_static_eco"}) {
    auto p =
        LoadPolicyFile(ari::testing::SourceDir() / "config" / (std::string(name) + ".textproto"));
    ASSERT_TRUE(p.has_value()) << name << ": " << p.error().ToString();
    EXPECT_EQ(p->critical_reserved_slots, 1u) << name;
    auto back = ParsePolicyText(PolicyToText(*p), "roundtrip");
    ASSERT_TRUE(back.has_value()) << back.error().ToString();
    EXPECT_EQ(back->critical_reserved_slots, 1u);
  }
  auto p = LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  ASSERT_TRUE(p.has_value());
  std::string text = PolicyToText(*p);
  const size_t at = text.find("critical_reserved_slots: 1");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 26, "critical_reserved_slots: 65");
  auto bad = ParsePolicyText(text, "p.textproto");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("critical_reserved_slots"), std::string::npos)
      << bad.error().message;
  EXPECT_NE(bad.error().message.find("p.textproto:"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace ari::qos
