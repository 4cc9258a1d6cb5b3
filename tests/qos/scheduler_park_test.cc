// Slot parking on the deterministic fake engine (park areas enabled) and a ManualClock:
// every class mix with all slots busy (2 and 3 slots), aging, full park areas, cancel and
// deadline while parked, a parked session turn, a random ledger with parking.
#include <gtest/gtest.h>

#include <random>

#include "qos/scheduler.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

using testing::FakeEngine;
using testing::MakeRequest;
using testing::RecordingSink;
constexpr int64_t kMs = thermal::kNsPerMs;
constexpr int kMax = 200;  // tokens of every test request (prompt 16)

struct ParkSink : RecordingSink {
  std::vector<ParkEvent> parks;
  void OnPark(const ParkEvent& e) override {
    std::lock_guard lk(mu);
    parks.push_back(e);
  }
};

struct Rig {
  explicit Rig(int slots, int park_areas = 4, Policy p = testing::TestPolicy())
      : policy(std::move(p)), engine(slots, park_areas) {
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
  int RunAll(int n = 20000) {
    int steps = 0;
    for (; steps < n; ++steps) {
      StepResult r = sched->Step();
      if (r.idle) break;
      if (r.next_step_ns > clock.NowNs() && r.next_step_ns != INT64_MAX) {
        clock.SetNs(r.next_step_ns);
      }
      clock.AdvanceNs(kMs);
    }
    return steps;
  }
  bool Ran(uint64_t id) {
    for (const StepInfo& s : sink.steps) {
      if (s.id == id) return true;
    }
    return false;
  }
  // Submits `id` and steps until its turn started (it then holds a slot): 30 ms apart, so
  // the queued request ages (100 ms a rank) past the turns that ran in between; its far
  // deadline, earlier than theirs, puts it first among equals.
  void Start(uint64_t id, Urgency u) {
    const int64_t dl = (1000000 - 1000 * static_cast<int64_t>(id)) * 1000 * kMs;
    ASSERT_EQ(sched->Submit(MakeRequest(id, u, 16, kMax, 0, dl)), SubmitStatus::kAdmitted);
    for (int i = 0; i < 50 && !Ran(id); ++i) {
      clock.AdvanceNs(30 * kMs);
      sched->Step();
    }
    ASSERT_TRUE(Ran(id)) << id;
  }
  Policy policy;
  FakeEngine engine;
  thermal::ManualClock clock{1000 * kMs};
  ParkSink sink;
  std::unique_ptr<Scheduler> sched;
};

// The tokens of a request run alone (the fake engine's tokens depend on the position only).
std::vector<runtime::TokenId> Alone(Urgency u, int prompt, int max_tokens) {
  Rig ref(1);
  EXPECT_EQ(ref.sched->Submit(MakeRequest(1, u, prompt, max_tokens)), SubmitStatus::kAdmitted);
  ref.RunAll();
  return ref.sink.tokens[1];
}

void CheckLedger(Rig& rig, const std::vector<uint64_t>& ids) {
  const auto alone = Alone(Urgency::kNormal, 16, kMax);
  for (uint64_t id : ids) {
    EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone)) << id;
    EXPECT_EQ(rig.sink.tokens[id], alone) << id;  // parked or not: the same tokens
    const auto& seqs = rig.sink.seqs[id];
    for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i) << id;
  }
  EXPECT_EQ(rig.engine.ParkedNow(), 0);
  EXPECT_EQ(rig.engine.parks, rig.engine.resumes);
}

// All slots busy with every mix of classes (2 and 3 slots), then each class arrives: it
// parks the lowest-class turn (the most recently started among equals) at the next boundary
// when it is of a strictly higher class, never otherwise; everything then finishes once,
// with the tokens of an unparked run.
TEST(SchedulerPark, EveryClassMixWithAllSlotsBusy) {
  for (int slots : {2, 3}) {
    int mixes = 1;
    for (int i = 0; i < slots; ++i) mixes *= kNumUrgencies;
    for (int mix = 0; mix < mixes; ++mix) {
      for (int nc = 0; nc < kNumUrgencies; ++nc) {
        SCOPED_TRACE("slots " + std::to_string(slots) + " mix " + std::to_string(mix) +
                     " newcomer " + std::to_string(nc));
        Rig rig(slots);
        std::vector<uint64_t> ids;
        int lowest = -1;
        uint64_t victim = 0;
        for (int i = 0, m = mix; i < slots; ++i, m /= kNumUrgencies) {
          const int rank = m % kNumUrgencies;
          const uint64_t id = static_cast<uint64_t>(i) + 1;
          rig.Start(id, UrgencyFromRank(rank));
          ids.push_back(id);
          if (rank >= lowest) {  // later started wins ties
            lowest = rank;
            victim = id;
          }
        }
        ASSERT_EQ(rig.engine.parks, 0);
        for (uint64_t id : ids) ASSERT_EQ(rig.sink.TerminalCount(id), 0u);  // all slots busy
        const uint64_t w = 100;
        ASSERT_EQ(rig.sched->Submit(MakeRequest(w, UrgencyFromRank(nc), 16, kMax)),
                  SubmitStatus::kAdmitted);
        ids.push_back(w);
        StepResult r = rig.sched->Step();
        ASSERT_TRUE(r.ran);
        if (nc < lowest) {
          EXPECT_EQ(r.info->id, w);
          EXPECT_EQ(r.info->parked_id, victim);
          EXPECT_EQ(rig.engine.parks, 1);
          ASSERT_EQ(rig.sink.parks.size(), 1u);
          EXPECT_EQ(rig.sink.parks[0].kind, ParkEventKind::kParked);
          EXPECT_EQ(rig.sink.parks[0].id, victim);
          EXPECT_EQ(rig.sink.parks[0].for_id, w);
          EXPECT_EQ(rig.sink.parks[0].slot, r.info->slot);
        } else {
          EXPECT_NE(r.info->id, w);
          EXPECT_EQ(r.info->parked_id, 0u);
          EXPECT_EQ(rig.engine.parks, 0);
        }
        rig.RunAll();
        CheckLedger(rig, ids);
        if (nc < lowest) {
          EXPECT_EQ(rig.sink.terminals[w][0].ev.queue_wait_ns, 0);  // at the next boundary
          int resumed = 0;
          for (const StepInfo& s : rig.sink.steps) resumed += s.resumed && s.id == victim;
          EXPECT_EQ(resumed, 1);
        }
      }
    }
  }
}

// A queued NORMAL that aged to the top rank never parks a NORMAL turn; it starts when a
// turn ends.
TEST(SchedulerPark, AgingDoesNotPark) {
  Rig rig(2);
  rig.Start(1, Urgency::kNormal);
  rig.Start(2, Urgency::kNormal);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kNormal, 16, kMax)), SubmitStatus::kAdmitted);
  rig.clock.AdvanceNs(2000 * kMs);  // aged past CRITICAL's rank
  for (int i = 0; i < 3; ++i) {
    StepResult r = rig.sched->Step();
    ASSERT_TRUE(r.ran);
    EXPECT_NE(r.info->id, 3u);
  }
  rig.RunAll();
  EXPECT_EQ(rig.engine.parks, 0);
  CheckLedger(rig, {1, 2, 3});
}

// One park area: HIGH parks a NORMAL; a CRITICAL then finds the area full and waits for a
// turn to end (no error, no lost request).
TEST(SchedulerPark, FullParkAreaFallsBackToWaiting) {
  Rig rig(2, /*park_areas=*/1);
  rig.Start(1, Urgency::kNormal);
  rig.Start(2, Urgency::kNormal);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kHigh, 16, kMax)), SubmitStatus::kAdmitted);
  StepResult r = rig.sched->Step();
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.info->id, 3u);
  EXPECT_EQ(r.info->parked_id, 2u);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(4, Urgency::kCritical, 16, kMax)),
            SubmitStatus::kAdmitted);
  r = rig.sched->Step();
  ASSERT_TRUE(r.ran);
  EXPECT_NE(r.info->id, 4u);
  EXPECT_EQ(rig.engine.parks, 1);
  rig.RunAll();
  CheckLedger(rig, {1, 2, 3, 4});
}

// The engine cannot park (no park areas): today's behaviour, the CRITICAL waits.
TEST(SchedulerPark, RunnerWithoutParkingWaits) {
  Rig rig(2, /*park_areas=*/0);
  rig.Start(1, Urgency::kBackground);
  rig.Start(2, Urgency::kBackground);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kCritical, 16, kMax)),
            SubmitStatus::kAdmitted);
  StepResult r = rig.sched->Step();
  ASSERT_TRUE(r.ran);
  EXPECT_NE(r.info->id, 3u);
  rig.RunAll();
  EXPECT_TRUE(rig.sink.parks.empty());
  CheckLedger(rig, {1, 2, 3});
}

// A parked turn that is cancelled, or whose deadline passes, ends once; its area frees.
TEST(SchedulerPark, CancelAndDeadlineWhileParked) {
  Rig rig(1);
  rig.Start(1, Urgency::kNormal);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kCritical, 16, kMax)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Step().info->parked_id, 1u);
  EXPECT_EQ(rig.engine.ParkedNow(), 1);
  ASSERT_TRUE(rig.sched->Cancel(1));
  rig.RunAll();
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kCancelled));
  EXPECT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));
  EXPECT_EQ(rig.engine.ParkedNow(), 0);

  const int64_t dl = rig.clock.NowNs() + 2000 * kMs;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kNormal, 16, kMax, 0, dl)),
            SubmitStatus::kAdmitted);
  rig.sched->Step();
  ASSERT_EQ(rig.sched->Submit(MakeRequest(4, Urgency::kCritical, 16, 400)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Step().info->parked_id, 3u);
  rig.clock.AdvanceNs(3000 * kMs);
  rig.RunAll();
  ASSERT_EQ(rig.sink.TerminalCount(3), 1u);
  EXPECT_EQ(rig.sink.terminals[3][0].status, TerminalStatus::kDeadlineMissed);
  EXPECT_EQ(rig.sink.terminals[3][0].message, "deadline passed while parked");
  EXPECT_TRUE(rig.sink.EndedOnce(4, TerminalStatus::kDone));
  EXPECT_EQ(rig.engine.ParkedNow(), 0);
}

// A session's turn parked keeps its conversation: the session's next turn waits for it,
// then continues the context in the slot where the turn resumed.
TEST(SchedulerPark, ParkedSessionTurnKeepsItsSession) {
  Rig rig(2);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 16, kMax, /*session=*/7)),
            SubmitStatus::kAdmitted);
  rig.sched->Step();
  rig.Start(2, Urgency::kBackground);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kHigh, 16, kMax)), SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Step().info->parked_id, 2u);  // BACKGROUND is the lowest class
  ASSERT_EQ(rig.sched->Submit(MakeRequest(4, Urgency::kCritical, 16, kMax)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Step().info->parked_id, 1u);  // then the NORMAL session turn
  ASSERT_EQ(rig.sched->Submit(MakeRequest(5, Urgency::kCritical, 4, 4, /*session=*/7)),
            SubmitStatus::kAdmitted);  // its session's turn is parked: it waits
  rig.RunAll();
  for (uint64_t id : {1, 2, 3, 4, 5}) EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone));
  int resumed_slot = -1;
  size_t first5 = 0;
  for (size_t i = 0; i < rig.sink.steps.size(); ++i) {
    const StepInfo& s = rig.sink.steps[i];
    if (s.id == 1 && s.resumed) resumed_slot = s.slot;
    if (s.id == 5 && first5 == 0) first5 = i;
  }
  ASSERT_GE(resumed_slot, 0);
  ASSERT_GT(first5, 0u);
  EXPECT_EQ(rig.sink.steps[first5].slot, resumed_slot);
  EXPECT_TRUE(rig.engine.last_keep_context);  // 5 started last: it continued session 7
  EXPECT_EQ(rig.engine.ParkedNow(), 0);
}

// Random arrivals of every class, cancels and deadlines on 2 slots with parking: every
// admitted request ends exactly once, every DONE one with the tokens of an unparked run.
TEST(SchedulerPark, RandomLedgerWithParking) {
  Rig rig(2, 2);
  std::mt19937 rng(11);
  std::vector<uint64_t> admitted;
  uint64_t id = 1;
  for (int step = 0; step < 600; ++step) {
    if (rng() % 4 == 0) {
      const auto u = UrgencyFromRank(static_cast<int>(rng() % 4));
      const int64_t dl =
          rng() % 6 == 0 ? rig.clock.NowNs() + static_cast<int64_t>(rng() % 40) * kMs : 0;
      if (rig.sched->Submit(MakeRequest(id, u, 16, kMax, 0, dl)) == SubmitStatus::kAdmitted) {
        admitted.push_back(id);
      }
      ++id;
    }
    if (rng() % 25 == 0 && !admitted.empty()) {
      (void)rig.sched->Cancel(admitted[rng() % admitted.size()]);  // false once ended
    }
    rig.sched->Step();
    rig.clock.AdvanceNs(kMs);
  }
  rig.RunAll();
  const auto alone = Alone(Urgency::kNormal, 16, kMax);
  for (uint64_t a : admitted) {
    ASSERT_EQ(rig.sink.TerminalCount(a), 1u) << a;
    if (rig.sink.terminals[a][0].status == TerminalStatus::kDone) {
      EXPECT_EQ(rig.sink.tokens[a], alone) << a;
    }
  }
  EXPECT_GT(rig.engine.parks, 0);
  EXPECT_EQ(rig.engine.ParkedNow(), 0);
}

}  // namespace
}  // namespace ari::qos
