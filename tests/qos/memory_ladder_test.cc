// The memory degrade ladder end to end on the scheduler side, with an injected memory
// source and virtual time: the shipped defaults, band transitions (deeper bands at
// once, relaxing one band per dwell, hysteresis, accumulated actions), every
// transition reported with its reason, every action reaching the engine per chunk, and
// the fallback engine (mapped on first need, new requests only, released once idle).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qos/scheduler.h"
#include "tests/common/test_util.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

using testing::FakeEngine;
using testing::MakeRequest;
using testing::RecordingSink;
constexpr int64_t kMs = thermal::kNsPerMs;
constexpr uint64_t kMB = 1024ull * 1024ull;

Policy DefaultPolicy() {
  auto p = LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  EXPECT_TRUE(p.has_value()) << p.error().ToString();
  return p ? std::move(*p) : Policy{};
}

// TestPolicy() + the default ladder with 1 s dwell everywhere.
Policy LadderPolicy() {
  Policy p = testing::TestPolicy();
  p.memory_bands = DefaultPolicy().memory_bands;
  for (MemoryBand& b : p.memory_bands) b.min_dwell_ms = 1000;
  return p;
}

// Records fallback transitions next to RecordingSink's ledger.
struct LadderSink : RecordingSink {
  struct Transition {
    FallbackEventKind kind;
    std::string reason;
    int32_t running;
    bool mapped_now;
  };
  std::vector<Transition> fallback;
  void OnFallback(const FallbackEvent& e) override {
    std::lock_guard lk(mu);
    fallback.push_back({e.kind, std::string(e.reason), e.running, e.mapped_now});
  }
};

class FakeProvider final : public FallbackEngineProvider {
 public:
  explicit FakeProvider(int slots) : slots_(slots) {}
  runtime::Result<runtime::ChunkRunner*> Acquire() override {
    ++acquired;
    if (fail) return runtime::MakeError(runtime::ErrorCode::kIo, "no such file");
    if (!engine) engine = std::make_unique<FakeEngine>(slots_);
    return engine.get();
  }
  void Release() override {
    ++released;
    engine.reset();
  }
  std::unique_ptr<FakeEngine> engine;
  int acquired = 0, released = 0;
  bool fail = false;

 private:
  int slots_;
};

struct Rig {
  explicit Rig(FallbackEngineProvider* fallback = nullptr) : policy(LadderPolicy()), engine(2) {
    SchedulerOptions o;
    o.policy = &policy;
    o.engine = &engine;
    o.clock = &clock;
    o.sink = &sink;
    o.topology = testing::TwoCpuTopology();
    o.fallback = fallback;
    o.memory = [this]() -> std::optional<thermal::MemoryReading> {
      thermal::MemoryReading r;
      r.available_bytes = avail_mb * kMB;
      return r;
    };
    auto s = Scheduler::Create(o);
    EXPECT_TRUE(s.has_value());
    sched = std::move(*s);
  }
  // One step, then 100 ms of virtual time.
  StepResult Step() {
    StepResult r = sched->Step();
    clock.AdvanceNs(100 * kMs);
    return r;
  }
  void Steps(int n) {
    for (int i = 0; i < n; ++i) Step();
  }
  Policy policy;
  FakeEngine engine;
  thermal::ManualClock clock{1000 * kMs};
  LadderSink sink;
  uint64_t avail_mb = 4000;
  std::unique_ptr<Scheduler> sched;
};

TEST(MemoryLadder, ShippedDefaultsMatchTheIssue) {
  const Policy p = DefaultPolicy();
  ASSERT_EQ(p.memory_bands.size(), 3u);
  const MemoryBand& low = p.memory_bands[0];
  const MemoryBand& tight = p.memory_bands[1];
  const MemoryBand& emergency = p.memory_bands[2];
  EXPECT_EQ(low.enter_below_bytes, 500 * kMB);
  EXPECT_TRUE(low.actions.greedy_only);
  EXPECT_TRUE(low.actions.kv_int8);
  EXPECT_EQ(tight.enter_below_bytes, 200 * kMB);
  EXPECT_EQ(tight.actions.context_cap, 512u);
  EXPECT_GT(tight.actions.output_cap, 0u);
  EXPECT_EQ(emergency.enter_below_bytes, 100 * kMB);
  EXPECT_TRUE(emergency.actions.use_fallback_model);
  for (const MemoryBand& b : p.memory_bands) {
    EXPECT_GT(b.exit_above_bytes, b.enter_below_bytes) << b.name << ": no hysteresis gap";
    EXPECT_GT(b.min_dwell_ms, 0) << b.name;
  }
}

TEST(MemoryLadder, DeeperBandsAtOnceRelaxOneBandPerDwellWithReasons) {
  Rig rig;
  rig.Step();
  EXPECT_EQ(rig.sched->last_decision().memory_band, -1);
  rig.avail_mb = 50;  // straight to the bottom: every action at once
  rig.Step();
  const Decision& d = rig.sched->last_decision();
  EXPECT_EQ(d.memory_band, 2);
  EXPECT_TRUE(d.memory.greedy_only && d.memory.kv_int8 && d.memory.use_fallback_model);
  EXPECT_EQ(d.memory.context_cap, 512u);
  EXPECT_EQ(d.memory.output_cap, 256u);
  EXPECT_EQ(d.knobs.kv_precision, KvPrecision::kInt8);
  std::string why(d.Reason());
  EXPECT_NE(why.find("memory emergency (50 MB < 100 enter)"), std::string::npos) << why;
  EXPECT_NE(why.find("greedy KV-int8 ctx<=512 out<=256 fallback-model"), std::string::npos) << why;

  rig.avail_mb = 4000;  // pressure gone: one band per dwell (1 s = 10 steps)
  std::vector<int> bands;
  for (int i = 0; i < 40; ++i) {
    rig.Step();
    bands.push_back(rig.sched->last_decision().memory_band);
  }
  // Held for the dwell, then emergency -> tight -> low -> ok, one band each time.
  std::vector<int> changes = {2};
  for (int b : bands) {
    if (b != changes.back()) changes.push_back(b);
  }
  EXPECT_EQ(changes, (std::vector<int>{2, 1, 0, -1}));
  int first_change = 0;
  while (bands[static_cast<size_t>(first_change)] == 2) ++first_change;
  EXPECT_GE(first_change, 9);  // not before the dwell

  // Every transition was emitted (OnDecision) with its reason.
  std::vector<std::string> transitions;
  for (const Decision& e : rig.sink.decision_log) {
    if (e.memory_changed) transitions.emplace_back(e.Reason());
  }
  ASSERT_EQ(transitions.size(), 4u);
  EXPECT_NE(transitions[0].find("memory emergency (50 MB < 100 enter)"), std::string::npos);
  EXPECT_NE(transitions[1].find("memory tight (4000 MB > 150 exit emergency)"), std::string::npos)
      << transitions[1];
  EXPECT_NE(transitions[2].find("memory low (4000 MB > 300 exit tight)"), std::string::npos)
      << transitions[2];
  EXPECT_NE(transitions[3].find("memory ok (4000 MB > 600 exit low)"), std::string::npos)
      << transitions[3];
}

TEST(MemoryLadder, RelaxingIsHeldByTheDwellAndSaysSo) {
  Rig rig;
  rig.avail_mb = 150;
  rig.Step();
  EXPECT_EQ(rig.sched->last_decision().memory_band, 1);
  rig.avail_mb = 4000;
  rig.Step();
  EXPECT_EQ(rig.sched->last_decision().memory_band, 1);
  std::string why(rig.sched->last_decision().Reason());
  EXPECT_NE(why.find("memory tight held by dwell (4000 MB > 300 exit; 100/1000 ms)"),
            std::string::npos)
      << why;
  // Pressure returning during the dwell does not restart it from a lower band.
  rig.avail_mb = 250;  // inside tight's gap: stays, dwell keeps counting
  rig.Steps(12);
  EXPECT_EQ(rig.sched->last_decision().memory_band, 1);
  rig.avail_mb = 4000;
  rig.Step();
  EXPECT_EQ(rig.sched->last_decision().memory_band, 0);  // dwell already served
}

TEST(MemoryLadder, HysteresisGapNeverFlips) {
  Rig rig;
  rig.avail_mb = 450;
  rig.Step();
  EXPECT_EQ(rig.sched->last_decision().memory_band, 0);
  // A sawtooth between 450 and 590 MB (inside low's 500/600 gap) never leaves "low",
  // however long it lasts; 150..250 around tight's 200 enters tight once and stays.
  for (int i = 0; i < 60; ++i) {
    rig.avail_mb = (i % 2) ? 450 : 590;
    rig.Step();
    EXPECT_EQ(rig.sched->last_decision().memory_band, 0) << i;
  }
  for (int i = 0; i < 60; ++i) {
    rig.avail_mb = (i % 2) ? 290 : 190;
    rig.Step();
    EXPECT_EQ(rig.sched->last_decision().memory_band, 1) << i;
  }
  int changes = 0;
  for (const Decision& e : rig.sink.decision_log) changes += e.memory_changed ? 1 : 0;
  EXPECT_EQ(changes, 2);
}

TEST(MemoryLadder, EveryActionReachesTheEngineEveryChunk) {
  Rig rig;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 8, 400)), SubmitStatus::kAdmitted);
  rig.Steps(5);  // prefill + decode without pressure
  const size_t before = rig.engine.knobs_log.size();
  ASSERT_GT(before, 2u);
  for (const auto& k : rig.engine.knobs_log) {
    EXPECT_FALSE(k.greedy_only);
    EXPECT_EQ(k.kv_type, runtime::KvType::kF16);
    EXPECT_EQ(k.context_cap, 0);
  }
  rig.avail_mb = 450;  // low: greedy + KV int8 on the running request's next chunks
  rig.Steps(3);
  for (size_t i = before; i < rig.engine.knobs_log.size(); ++i) {
    EXPECT_TRUE(rig.engine.knobs_log[i].greedy_only) << i;
    EXPECT_EQ(rig.engine.knobs_log[i].kv_type, runtime::KvType::kInt8) << i;
    EXPECT_EQ(rig.engine.knobs_log[i].context_cap, 0) << i;
  }
  const size_t low_end = rig.engine.knobs_log.size();
  rig.avail_mb = 150;  // tight: + context cap 512, output capped at 256 tokens
  for (int i = 0; i < 200 && rig.sink.TerminalCount(1) == 0; ++i) rig.Step();
  ASSERT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_EQ(rig.sink.terminals[1][0].message, "output capped (memory)");
  EXPECT_EQ(rig.sink.terminals[1][0].ev.tokens_generated, 256);
  ASSERT_GT(rig.engine.knobs_log.size(), low_end);
  for (size_t i = low_end; i < rig.engine.knobs_log.size(); ++i) {
    EXPECT_TRUE(rig.engine.knobs_log[i].greedy_only);
    EXPECT_EQ(rig.engine.knobs_log[i].kv_type, runtime::KvType::kInt8);
    EXPECT_EQ(rig.engine.knobs_log[i].context_cap, 512);
  }
  // A request that starts in "tight" gets the output cap as its max_tokens.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kNormal, 4, 300)), SubmitStatus::kAdmitted);
  for (int i = 0; i < 200 && rig.sink.TerminalCount(2) == 0; ++i) rig.Step();
  ASSERT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));
  EXPECT_EQ(rig.sink.terminals[2][0].ev.tokens_generated, 256);
  // Relaxed (after the dwells): the knobs go back to normal.
  rig.avail_mb = 4000;
  rig.Steps(40);
  EXPECT_EQ(rig.sched->last_decision().memory_band, -1);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kNormal, 4, 12)), SubmitStatus::kAdmitted);
  const size_t relaxed = rig.engine.knobs_log.size();
  for (int i = 0; i < 50 && rig.sink.TerminalCount(3) == 0; ++i) rig.Step();
  ASSERT_TRUE(rig.sink.EndedOnce(3, TerminalStatus::kDone));
  for (size_t i = relaxed; i < rig.engine.knobs_log.size(); ++i) {
    EXPECT_FALSE(rig.engine.knobs_log[i].greedy_only);
    EXPECT_EQ(rig.engine.knobs_log[i].kv_type, runtime::KvType::kF16);
    EXPECT_EQ(rig.engine.knobs_log[i].context_cap, 0);
  }
}

// Runs until `id` has its terminal (at most n steps); true when it has.
bool RunUntilDone(Rig& rig, uint64_t id, int n = 300) {
  for (int i = 0; i < n && rig.sink.TerminalCount(id) == 0; ++i) rig.Step();
  return rig.sink.TerminalCount(id) > 0;
}

bool RanOn(const Rig& rig, uint64_t id, bool fallback) {
  bool any = false;
  for (const StepInfo& s : rig.sink.steps) {
    if (s.id != id) continue;
    if (s.fallback != fallback) return false;
    any = true;
  }
  return any;
}

TEST(MemoryLadder, NewRequestsGoToTheFallbackWhichIsReleasedOnceIdle) {
  FakeProvider provider(2);
  Rig rig(&provider);
  // A long request starts on the main engine without pressure.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 8, 200)), SubmitStatus::kAdmitted);
  rig.Steps(4);
  EXPECT_EQ(provider.acquired, 0);  // lazily: nothing mapped yet
  EXPECT_FALSE(rig.sched->fallback_mapped());

  rig.avail_mb = 60;  // emergency
  rig.Step();
  EXPECT_EQ(provider.acquired, 1);
  EXPECT_TRUE(rig.sched->fallback_mapped());
  EXPECT_TRUE(rig.sched->fallback_routing());
  ASSERT_EQ(rig.sink.fallback.size(), 1u);
  EXPECT_EQ(rig.sink.fallback[0].kind, FallbackEventKind::kEngaged);
  EXPECT_TRUE(rig.sink.fallback[0].mapped_now);
  EXPECT_NE(rig.sink.fallback[0].reason.find("memory emergency (60 MB < 100 enter)"),
            std::string::npos)
      << rig.sink.fallback[0].reason;

  // New requests (a CRITICAL one too) start on the fallback; request 1 stays on main.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kNormal, 4, 150)), SubmitStatus::kAdmitted);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kCritical, 4, 10)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 3));
  rig.avail_mb = 4000;  // pressure gone; emergency's dwell (1 s) first
  ASSERT_TRUE(RunUntilDone(rig, 1));
  ASSERT_TRUE(RunUntilDone(rig, 2));
  EXPECT_TRUE(RanOn(rig, 1, false));
  EXPECT_TRUE(RanOn(rig, 2, true));
  EXPECT_TRUE(RanOn(rig, 3, true));
  rig.Steps(20);
  EXPECT_EQ(provider.released, 1);
  EXPECT_FALSE(rig.sched->fallback_mapped());
  EXPECT_EQ(provider.engine, nullptr);

  ASSERT_EQ(rig.sink.fallback.size(), 3u);
  EXPECT_EQ(rig.sink.fallback[1].kind, FallbackEventKind::kDisengaged);
  EXPECT_NE(rig.sink.fallback[1].reason.find("exit emergency"), std::string::npos)
      << rig.sink.fallback[1].reason;
  EXPECT_EQ(rig.sink.fallback[2].kind, FallbackEventKind::kReleased);
  EXPECT_EQ(rig.sink.fallback[2].running, 0);

  // After relaxing: new requests run on the main engine again.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(4, Urgency::kNormal, 4, 8)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 4));
  EXPECT_TRUE(RanOn(rig, 4, false));
  for (uint64_t id = 1; id <= 4; ++id) {
    EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone)) << id;
  }
  EXPECT_EQ(provider.acquired, 1);
}

TEST(MemoryLadder, FallbackStillRunningIsReleasedOnlyWhenItsTurnEnds) {
  FakeProvider provider(2);
  Rig rig(&provider);
  rig.avail_mb = 60;
  rig.Step();
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 4, 250)), SubmitStatus::kAdmitted);
  rig.Steps(3);
  rig.avail_mb = 4000;
  rig.Steps(15);  // emergency relaxed (dwell 1 s), request 1 still decoding on the fallback
  ASSERT_EQ(rig.sink.TerminalCount(1), 0u);
  EXPECT_FALSE(rig.sched->fallback_routing());
  EXPECT_TRUE(rig.sched->fallback_mapped());
  EXPECT_EQ(provider.released, 0);
  ASSERT_GE(rig.sink.fallback.size(), 2u);
  EXPECT_EQ(rig.sink.fallback[1].kind, FallbackEventKind::kDisengaged);
  EXPECT_EQ(rig.sink.fallback[1].running, 1);
  // A request arriving now runs on main while 1 finishes on the fallback.
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kCritical, 4, 8)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 2));
  EXPECT_TRUE(RanOn(rig, 2, false));
  EXPECT_TRUE(rig.sched->fallback_mapped());
  ASSERT_TRUE(RunUntilDone(rig, 1));
  rig.Step();
  EXPECT_EQ(provider.released, 1);
  EXPECT_FALSE(rig.sched->fallback_mapped());
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_TRUE(rig.sink.EndedOnce(2, TerminalStatus::kDone));
}

TEST(MemoryLadder, IdleSchedulerKeepsPollingUntilTheLadderIsAtRest) {
  FakeProvider provider(2);
  Rig rig(&provider);
  EXPECT_EQ(rig.Step().next_step_ns, INT64_MAX);  // at rest and idle: wait for input
  rig.avail_mb = 60;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 4, 4)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 1));
  StepResult r = rig.sched->Step();
  EXPECT_TRUE(r.idle);
  EXPECT_EQ(r.next_step_ns, rig.clock.NowNs() + 250 * kMs);  // idle_memory_poll_ms
  rig.avail_mb = 4000;
  int polls = 0;
  for (; polls < 100 && r.next_step_ns != INT64_MAX; ++polls) {
    rig.clock.SetNs(r.next_step_ns);
    r = rig.sched->Step();
  }
  EXPECT_EQ(r.next_step_ns, INT64_MAX);
  EXPECT_EQ(rig.sched->last_decision().memory_band, -1);
  EXPECT_FALSE(rig.sched->fallback_mapped());
  EXPECT_EQ(provider.released, 1);
  EXPECT_GE(polls, 3 * 4 - 1);  // three bands, 1 s dwell each, 250 ms polls
}

TEST(MemoryLadder, FallbackThatCannotBeMappedKeepsServingOnMain) {
  FakeProvider provider(2);
  provider.fail = true;
  Rig rig(&provider);
  rig.avail_mb = 60;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 4, 8)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 1));
  EXPECT_TRUE(rig.sink.EndedOnce(1, TerminalStatus::kDone));
  EXPECT_TRUE(RanOn(rig, 1, false));
  EXPECT_EQ(provider.acquired, 1);  // not retried at every step
  ASSERT_EQ(rig.sink.fallback.size(), 1u);
  EXPECT_EQ(rig.sink.fallback[0].kind, FallbackEventKind::kFailed);
  EXPECT_NE(rig.sink.fallback[0].reason.find("no such file"), std::string::npos);
}

TEST(MemoryLadder, SessionMovesToTheEngineOfItsNextTurn) {
  FakeProvider provider(2);
  Rig rig(&provider);
  ASSERT_EQ(rig.sched->Submit(MakeRequest(1, Urgency::kNormal, 4, 4, /*session=*/77)),
            SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 1));
  rig.avail_mb = 60;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(2, Urgency::kNormal, 4, 4, 77)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 2));
  EXPECT_TRUE(RanOn(rig, 2, true));
  ASSERT_NE(provider.engine, nullptr);
  EXPECT_FALSE(provider.engine->last_keep_context);  // fresh context on the fallback
  ASSERT_EQ(rig.sched->Submit(MakeRequest(3, Urgency::kNormal, 4, 4, 77)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 3));
  EXPECT_TRUE(provider.engine->last_keep_context);  // continues there
  rig.avail_mb = 4000;
  rig.Steps(15);
  EXPECT_FALSE(rig.sched->fallback_mapped());
  const int starts = rig.engine.starts;
  ASSERT_EQ(rig.sched->Submit(MakeRequest(4, Urgency::kNormal, 4, 4, 77)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(RunUntilDone(rig, 4));
  EXPECT_EQ(rig.engine.starts, starts + 1);
  EXPECT_FALSE(rig.engine.last_keep_context);  // main's old slot forgot the session
  for (uint64_t id = 1; id <= 4; ++id) EXPECT_TRUE(rig.sink.EndedOnce(id, TerminalStatus::kDone));
}

}  // namespace
}  // namespace ari::qos
