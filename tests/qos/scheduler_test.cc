// Scheduler logic on a deterministic fake engine and a ManualClock: preemption,
// resume, cancel, deadlines, refusal, aging, slots, pacing, the terminal ledger and
// the real-time Run() loop. (scheduler_engine_test.cc runs the real engine.)
#include "qos/scheduler.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <random>
#include <thread>

#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

using testing::FakeEngine;
using testing::MakeRequest;
using testing::RecordingSink;
constexpr int64_t kMs = thermal::kNsPerMs;

// No temperature source -> conservative knobs: set both tables.
void SetPause(Policy& p, Urgency u, uint32_t ms) {
  p.knobs[0][Rank(u)].pause_ms = ms;
  p.conservative[Rank(u)].pause_ms = ms;
}

struct Rig {
  explicit Rig(Policy p = testing::TestPolicy(), int slots = 2)
      : policy(std::move(p)), engine(slots) {
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
  // Steps until idle (at most n steps), advancing virtual time to each next step.
  int RunAll(int n = 10000) {
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
  Policy policy;
  FakeEngine engine;
  thermal::ManualClock clock{1000 * kMs};
  RecordingSink sink;
  std::unique_ptr<Scheduler> sched;
};

TEST(KnobMap, CoreClassesThreadsAndMemoryActions) {
  const auto topo = testing::TwoCpuTopology();
  Knobs k = testing::MakeKnobs(CoreClass::kPerformance, 4, WeightPrecision::kW8A16, 64, 8);
  MemoryActions none;
  auto c = MapKnobs(k, none, topo, runtime::KvType::kF16, 32);
  EXPECT_EQ(c.cpu_mask, 0b01u);
  EXPECT_EQ(c.threads, 1);          // clamped to the class's CPUs
  EXPECT_EQ(c.prefill_tokens, 32);  // clamped to the engine's max chunk
  EXPECT_EQ(c.decode_tokens, 8);
  EXPECT_EQ(c.precision, runtime::Precision::kW8A16);
  EXPECT_EQ(c.kv_type, runtime::KvType::kF16);
  k.core_class = CoreClass::kEfficiency;
  k.precision = WeightPrecision::kW4A8;
  k.isa = IsaTier::kAvx2;
  k.layer_drop = 2;
  c = MapKnobs(k, none, topo, runtime::KvType::kF16, 0);
  EXPECT_EQ(c.cpu_mask, 0b10u);
  EXPECT_EQ(c.precision, runtime::Precision::kW4A8);
  EXPECT_EQ(c.max_isa, runtime::kernels::IsaTier::kAvx2);
  EXPECT_EQ(c.layer_drop, 2);
  EXPECT_EQ(c.prefill_tokens, 64);
  k.core_class = CoreClass::kAny;
  MemoryActions mem;
  mem.greedy_only = mem.kv_int8 = true;
  mem.context_cap = 512;
  c = MapKnobs(k, mem, topo, runtime::KvType::kF16, 0);
  EXPECT_EQ(c.cpu_mask, 0b11u);
  EXPECT_EQ(c.threads, 2);
  EXPECT_TRUE(c.greedy_only);
  EXPECT_EQ(c.context_cap, 512);
  EXPECT_EQ(c.kv_type, runtime::KvType::kInt8);
  // No efficiency cores: efficiency knobs use the performance cores.
  thermal::CpuTopology uniform;
  uniform.performance = {0, 1};
  EXPECT_EQ(CpusFor(CoreClass::kEfficiency, uniform), (std::vector<int>{0, 1}));
}

TEST(Scheduler, CriticalPreemptsNormalWhichResumesIdentically) {
  // Reference: NORMAL alone.
  Rig ref;
  ASSERT_EQ(ref.sched->Submit(MakeRequest(1, Urgency::kNormal, 64, 12)), SubmitStatus::kAdmitted);
  ref.RunAll();
  ASSERT_TRUE(ref.sink.EndedOnce(1, TerminalStatus::kDone));

  Rig rig;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 64, 12)), SubmitStatus::kAdmitted);
  StepResult r = rig.sched->Step();  // one NORMAL prefill chunk (16 of 64 tokens)
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.info->phase, runtime::ChunkPhase::kPrefill);
  EXPECT_EQ(r.info->prompt_remaining, 48);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kCritical, 8, 8)), SubmitStatus::kAdmitted);
  const size_t mark = rig.sink.steps.size();
  rig.RunAll();
  // After the CRITICAL arrived, its chunks all ran before any NORMAL chunk.
  bool critical_done = false;
  for (size_t i = mark; i < rig.sink.steps.size(); ++i) {
    const StepInfo& s = rig.sink.steps[i];
    if (s.id == 2 && s.finished) critical_done = true;
    if (!critical_done) {
      EXPECT_EQ(s.id, 2u) << "step " << i;
    }
  }
  EXPECT_TRUE(critical_done);
  EXPECT_NE(rig.sink.steps[mark].slot, rig.sink.steps[0].slot);  // own slot
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));
  EXPECT_EQ(rig.sink.text[1], ref.sink.text[1]);  // resumed where it stopped
  EXPECT_EQ(rig.engine.starts, 2);                // the NORMAL turn was not restarted
  // Chunk sequence numbers are contiguous.
  for (auto& [id, seqs] : rig.sink.seqs) {
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i);
  }
  // The knobs followed the running class: CRITICAL on CPU 0, NORMAL on CPU 1.
  for (const StepInfo& s : rig.sink.steps) {
    EXPECT_EQ(s.knobs.cpu_mask, s.urgency == Urgency::kCritical ? 1u : 2u);
  }
}

// The same while the NORMAL request is decoding: CRITICAL runs at the next boundary,
// the NORMAL answer continues in its own slot with the same tokens as alone.
TEST(Scheduler, CriticalPreemptsNormalDecodingWhichResumesIdentically) {
  Rig ref;
  ASSERT_EQ(ref.sched->Submit(MakeRequest(1, Urgency::kNormal, 8, 24)), SubmitStatus::kAdmitted);
  ref.RunAll();
  ASSERT_TRUE(ref.sink.EndedOnce(1, TerminalStatus::kDone));

  Rig rig;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 8, 24)), SubmitStatus::kAdmitted);
  while (rig.sink.tokens[1].size() < 8) ASSERT_TRUE(rig.sched->Step().ran);
  ASSERT_EQ(rig.sink.steps.back().phase, runtime::ChunkPhase::kDecode);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kCritical, 8, 8)), SubmitStatus::kAdmitted);
  const size_t mark = rig.sink.steps.size();
  rig.RunAll();
  bool critical_done = false;
  for (size_t i = mark; i < rig.sink.steps.size(); ++i) {
    const StepInfo& st = rig.sink.steps[i];
    if (!critical_done) {
      EXPECT_EQ(st.id, 2u) << "step " << i;
    }
    if (st.id == 2 && st.finished) critical_done = true;
  }
  EXPECT_TRUE(critical_done);
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));
  EXPECT_EQ(rig.sink.tokens[1], ref.sink.tokens[1]);
  EXPECT_EQ(rig.engine.starts, 2);  // the NORMAL turn was not restarted
}

TEST(Scheduler, CancelQueuedPrefillingAndDecoding) {
  Rig rig(testing::TestPolicy(), 3);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 64, 8)), SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kHigh, 4, 40)), SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kBackground, 4, 8)), SubmitStatus::kAdmitted);
  rig.sched->Step();                  // HIGH prefill (4 tokens)
  rig.sched->Step();                  // HIGH decode
  EXPECT_TRUE(rig.sched->Cancel(2));  // mid-decode
  EXPECT_TRUE(rig.sched->Cancel(2));  // twice: still one terminal
  rig.sched->Step();                  // cancels 2, runs NORMAL prefill
  EXPECT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kCancelled));
  EXPECT_TRUE(rig.sched->Cancel(1));  // mid-prefill
  EXPECT_TRUE(rig.sched->Cancel(3));  // still queued
  rig.RunAll();
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kCancelled));
  EXPECT_TRUE(rig.sink.EndedOnce(3, TerminalStatus::kCancelled));
  EXPECT_FALSE(rig.sched->Cancel(1));  // no longer live
  EXPECT_FALSE(rig.sched->Cancel(99));
  EXPECT_EQ(rig.sched->live_requests(), 0u);
}

TEST(Scheduler, DeadlinesStopOrFinishDegraded) {
  Policy p = testing::TestPolicy();
  p.classes[Rank(Urgency::kHigh)].deadline_miss = DeadlineMissAction::kFinishDegraded;
  p.classes[Rank(Urgency::kBackground)].default_deadline_ms = 5;
  Rig rig(p, 2);
  const int64_t t0 = rig.clock.NowNs();
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 8, 50, 0, t0 + 10 * kMs)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kHigh, 8, 20, 0, t0 + 10 * kMs)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kBackground, 8, 8)),  // default 5 ms
            SubmitStatus::kAdmitted);
  rig.sched->Step();  // HIGH
  rig.sched->Step();  // HIGH
  rig.clock.AdvanceNs(20 * kMs);
  rig.RunAll();
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDeadlineMissed));  // NORMAL: stop
  EXPECT_TRUE(rig.sink.EndedOnce(3, TerminalStatus::kDeadlineMissed));  // queued, expired
  ASSERT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));            // HIGH: degraded
  EXPECT_TRUE(rig.sink.terminals[2][0].ev.deadline_missed);
  EXPECT_EQ(rig.sink.tokens[2].size(), 20u);
  // After the deadline, HIGH's chunks ran at W4A8.
  EXPECT_EQ(rig.engine.knobs_log.back().precision, runtime::Precision::kW4A8);
  EXPECT_EQ(rig.engine.knobs_log.front().precision, runtime::Precision::kW8A16);
}

TEST(Scheduler, FullQueueRefusesAndCriticalEvicts) {
  Rig rig;
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_EQ(rig.sched->Submit(MakeRequest(id, Urgency::kNormal, 4, 4)), SubmitStatus::kAdmitted);
  }
  EXPECT_EQ(rig.sched->Submit(MakeRequest(5, Urgency::kNormal, 4, 4)), SubmitStatus::kBusy);
  EXPECT_EQ(rig.sched->Submit(MakeRequest(4, Urgency::kHigh, 4, 4)), SubmitStatus::kDuplicate);
  EXPECT_EQ(rig.sched->Submit(MakeRequest(0, Urgency::kHigh, 4, 4)), SubmitStatus::kInvalid);
  EXPECT_EQ(rig.sched->Submit(MakeRequest(6, Urgency::kHigh, 0, 4)), SubmitStatus::kInvalid);
  for (uint64_t id = 10; id < 14; ++id) {
    ASSERT_EQ(rig.sched->Submit(MakeRequest(id, Urgency::kCritical, 4, 4)),
              SubmitStatus::kAdmitted);
  }
  // CRITICAL full: the next one evicts a queued NORMAL, which ends REJECTED.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(14, Urgency::kCritical, 4, 4)), SubmitStatus::kAdmitted);
  rig.RunAll();
  int rejected = 0;
  for (uint64_t id = 1; id <= 4; ++id) {
    EXPECT_EQ(rig.sink.TerminalCount(id), 1u);
    rejected += rig.sink.EndedOnce(id, TerminalStatus::kRejected);
  }
  EXPECT_EQ(rejected, 1);
  for (uint64_t id = 10; id <= 14; ++id) EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone));
  EXPECT_EQ(rig.sink.TerminalCount(5), 0u);  // refused at once: never admitted
}

TEST(Scheduler, BackgroundIsNotStarvedBySteadyCriticalLoad) {
  Rig rig;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kBackground, 8, 8)), SubmitStatus::kAdmitted);
  uint64_t next = 100;
  int steps = 0;
  for (; steps < 2000 && rig.sink.TerminalCount(1) == 0; ++steps) {
    // Keep two CRITICAL requests waiting at all times.
    while (rig.sched->QueueDepths()[0] < 2) {
      ASSERT_EQ(rig.sched->Submit(MakeRequest(next++, Urgency::kCritical, 4, 4)),
                SubmitStatus::kAdmitted);
    }
    rig.sched->Step();
    rig.clock.AdvanceNs(5 * kMs);
  }
  // Aging: 3 levels x 100 ms = 300 ms of waiting at 5 ms per step, plus its own chunks.
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_LT(steps, 200);
  rig.sched->Shutdown();
  for (uint64_t id = 100; id < next; ++id) EXPECT_EQ(rig.sink.TerminalCount(id), 1u) << id;
}

TEST(Scheduler, SessionsKeepSlotsAndEvictLowestUrgencyLeastRecentlyUsed) {
  Rig rig;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kCritical, 4, 2, /*session=*/77)),
            SubmitStatus::kAdmitted);
  rig.RunAll();
  const int slot_a = rig.sink.steps.back().slot;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kBackground, 4, 2, 88)),
            SubmitStatus::kAdmitted);
  rig.RunAll();
  const int slot_b = rig.sink.steps.back().slot;
  EXPECT_NE(slot_a, slot_b);
  // Second turn of session 77: same slot, conversation kept.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kNormal, 4, 2, 77)), SubmitStatus::kAdmitted);
  rig.sched->Step();
  EXPECT_EQ(rig.sink.steps.back().slot, slot_a);
  EXPECT_TRUE(rig.engine.last_keep_context);
  rig.RunAll();
  // New session 99: both slots idle; 88 (BACKGROUND) goes first although 77 is older? No:
  // 77's last turn was NORMAL, 88's BACKGROUND -> evict 88 (lowest urgency first).
  ASSERT_EQ(rig.sched->Submit(MakeRequest(4, Urgency::kNormal, 4, 2, 99)), SubmitStatus::kAdmitted);
  rig.sched->Step();
  EXPECT_EQ(rig.sink.steps.back().slot, slot_b);
  EXPECT_FALSE(rig.engine.last_keep_context);
  rig.RunAll();
  // Session 88 lost its slot: its next turn starts a fresh context in the LRU slot.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(5, Urgency::kNormal, 4, 2, 88)), SubmitStatus::kAdmitted);
  rig.sched->Step();
  EXPECT_FALSE(rig.engine.last_keep_context);
  EXPECT_EQ(rig.sink.steps.back().slot, slot_a);  // 77 and 99 both NORMAL; 77 is older
  rig.RunAll();
}

TEST(Scheduler, PacingDelaysOnlyThePacedClassAndLessUrgentOnes) {
  Policy p = testing::TestPolicy();
  SetPause(p, Urgency::kNormal, 50);
  Rig rig(p);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 4, 8)), SubmitStatus::kAdmitted);
  StepResult r = rig.sched->Step();
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.next_step_ns, rig.clock.NowNs() + 50 * kMs);
  r = rig.sched->Step();  // too early: nothing runs
  EXPECT_FALSE(r.ran);
  EXPECT_FALSE(r.idle);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kCritical, 4, 4)), SubmitStatus::kAdmitted);
  r = rig.sched->Step();  // CRITICAL is not paced by NORMAL's pause
  ASSERT_TRUE(r.ran);
  EXPECT_EQ(r.info->id, 2u);
  rig.RunAll();
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));
}

TEST(Scheduler, LedgerEveryAdmittedRequestEndsExactlyOnce) {
  Policy p = testing::TestPolicy();
  SetPause(p, Urgency::kBackground, 3);
  Rig rig(p, 3);
  std::mt19937 rng(7);
  std::vector<uint64_t> admitted;
  uint64_t id = 1;
  for (int step = 0; step < 400; ++step) {
    if (rng() % 3 == 0) {
      const auto u = UrgencyFromRank(static_cast<int>(rng() % 4));
      const int64_t dl =
          rng() % 5 == 0 ? rig.clock.NowNs() + static_cast<int64_t>(rng() % 30) * kMs : 0;
      const uint64_t session = rng() % 4 == 0 ? 1 + rng() % 3 : 0;
      if (rig.sched->Submit(MakeRequest(id, u, 1 + static_cast<int>(rng() % 40),
                                        1 + static_cast<int>(rng() % 20), session, dl)) ==
          SubmitStatus::kAdmitted) {
        admitted.push_back(id);
      }
      ++id;
    }
    if (!admitted.empty() && rng() % 7 == 0) rig.sched->Cancel(admitted[rng() % admitted.size()]);
    rig.sched->Step();
    rig.clock.AdvanceNs(static_cast<int64_t>(rng() % 3) * kMs);
  }
  rig.sched->Shutdown("test over");
  EXPECT_EQ(rig.sched->Submit(MakeRequest(id, Urgency::kCritical, 4, 4)), SubmitStatus::kShutdown);
  std::map<TerminalStatus, int> by_status;
  for (uint64_t a : admitted) {
    ASSERT_EQ(rig.sink.TerminalCount(a), 1u) << "request " << a;
    ++by_status[rig.sink.terminals[a][0].status];
  }
  EXPECT_EQ(rig.sink.terminals.size(), admitted.size());
  EXPECT_GT(by_status[TerminalStatus::kDone], 0);
  EXPECT_GT(by_status[TerminalStatus::kCancelled], 0);
}

// The real-time loop: a waiting Run() thread wakes on Submit, answers, and stops.
struct WaitingSink : RecordingSink {
  std::condition_variable cv;
  void OnTerminal(const TerminalEvent& t) override {
    RecordingSink::OnTerminal(t);
    cv.notify_all();
  }
  bool WaitFor(uint64_t id) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(20), [&] { return terminals.count(id) > 0; });
  }
};

TEST(Scheduler, RunLoopWakesOnSubmitAndStops) {
  Policy policy = testing::TestPolicy();
  SetPause(policy, Urgency::kNormal, 2);
  FakeEngine engine(2);
  WaitingSink sink;
  SchedulerOptions o;
  o.policy = &policy;
  o.engine = &engine;
  o.clock = &thermal::SteadyClock::Instance();
  o.sink = &sink;
  o.topology = testing::TwoCpuTopology();
  auto s = Scheduler::Create(o);
  ASSERT_TRUE(s.has_value());
  Scheduler& sched = **s;
  std::jthread loop([&](const std::stop_token& st) { sched.Run(st); });
  ASSERT_EQ(sched.Submit(MakeRequest(1, Urgency::kNormal, 16, 16)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(sink.WaitFor(1));
  ASSERT_EQ(sched.Submit(MakeRequest(2, Urgency::kCritical, 16, 16)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(sink.WaitFor(2));
  EXPECT_TRUE(sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_TRUE(sink.EndedOnce(2, TerminalStatus::kDone));
  loop.request_stop();
  loop.join();
  ASSERT_EQ(sched.Submit(MakeRequest(3, Urgency::kNormal, 16, 16)), SubmitStatus::kAdmitted);
  sched.Shutdown();
  EXPECT_TRUE(sink.EndedOnce(3, TerminalStatus::kShutdown));
}

}  // namespace
}  // namespace ari::qos
