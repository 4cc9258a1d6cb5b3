// Memory yield through the scheduler with the REAL engine (stories260K pack, two slots, one
// park area): what the scheduler does at its boundaries after RequestStandby / Resume is
// checked against what ran, not only against its events:
//  - FINISH: the turn in flight ends DONE, then the engine's memory is released (the
//    engine says so); new NORMAL work is held (no chunk runs) until RESUME and then gives
//    the tokens an undisturbed run gives; a CRITICAL request during standby re-warms the
//    engine, is answered with the undisturbed tokens, and the node yields again after it;
//  - PARK: a NORMAL turn in flight is parked at once, the memory released, and after
//    RESUME the turn continues token for token (F16 and INT8 KV);
//  - REFUSE: a CRITICAL request during standby ends REJECTED, with the reason;
//  - answers: STANDBY twice, RESUME while active, RESUME while re-warming;
//  - a held request whose deadline passes ends DEADLINE_MISSED: one terminal each.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "qos/scheduler.h"
#include "runtime/model/pack_file.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

namespace fs = std::filesystem;
using testing::MakeRequest;
constexpr int64_t kMs = thermal::kNsPerMs;

struct StandbySink : testing::RecordingSink {
  std::vector<StandbyEventKind> events;
  std::vector<int32_t> parked;
  void OnStandby(const StandbyEvent& e) override {
    events.push_back(e.kind);
    parked.push_back(e.parked);
  }
};

fs::path StoriesPack() {
  static const fs::path pack = [] {
    const auto dir = ari::testing::TempDir("sched_standby");
    const auto plain = testing::WriteStoriesGguf(dir);
    if (plain.empty()) return fs::path();
    auto p = dir / "stories260K.pack.gguf";
    return runtime::WritePack(plain, p) ? p : fs::path();
  }();
  return pack;
}

std::unique_ptr<runtime::Engine> MakeEngine(runtime::KvType kv) {
  runtime::EngineOptions o;
  o.model_path = StoriesPack();
  o.slots = 2;
  o.context_length = 512;
  o.max_chunk = 64;
  o.max_output = 128;
  o.threads = 1;
  o.kv_type = kv;
  o.park_areas = 1;
  auto e = runtime::Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

SchedRequest Req(uint64_t id, Urgency u, int max_tokens = 40, int64_t deadline_ns = 0) {
  SchedRequest r = MakeRequest(id, u, 10, max_tokens, 0, deadline_ns);
  r.sampling.temperature = 0.8f;
  r.sampling.top_k = 40;
  r.sampling.seed = 500;  // same seed, same prompt: the same answer whoever runs it
  return r;
}

// Runs the runner's Rewarm through `on_rewarm` first (a RESUME arriving meanwhile).
class HookRunner final : public runtime::ChunkRunner {
 public:
  explicit HookRunner(runtime::Engine& e) : e_(e) {}
  std::function<void()> on_rewarm;
  int32_t num_slots() const override { return e_.num_slots(); }
  runtime::Result<void> StartTurn(int32_t s, const runtime::TurnSpec& t) override {
    return e_.StartTurn(s, t);
  }
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t s, const runtime::ChunkKnobs& k) override {
    if (e_.memory_released()) ++chunks_while_released;
    return e_.RunChunk(s, k);
  }
  int32_t num_park_areas() const override { return e_.num_park_areas(); }
  runtime::Result<runtime::ParkId> ParkSlot(int32_t s) override { return e_.ParkSlot(s); }
  runtime::Result<void> ResumeParked(runtime::ParkId id, int32_t s) override {
    return e_.ResumeParked(id, s);
  }
  void DropParked(runtime::ParkId id) override { e_.DropParked(id); }
  runtime::Result<runtime::MemoryYield> ReleaseMemory(bool drop) override {
    return e_.ReleaseMemory(drop);
  }
  runtime::Result<uint64_t> Rewarm() override {
    if (on_rewarm) on_rewarm();
    return e_.Rewarm();
  }
  bool memory_released() const override { return e_.memory_released(); }
  int chunks_while_released = 0;

 private:
  runtime::Engine& e_;
};

struct Rig {
  Policy policy = testing::TestPolicy();
  thermal::ManualClock clock;
  StandbySink sink;
  std::unique_ptr<runtime::Engine> engine;
  std::unique_ptr<HookRunner> runner;
  std::unique_ptr<Scheduler> sched;
  explicit Rig(runtime::KvType kv, StandbyOptions so = {}) {
    engine = MakeEngine(kv);
    if (!engine) return;
    runner = std::make_unique<HookRunner>(*engine);
    SchedulerOptions o;
    o.policy = &policy;
    o.engine = runner.get();
    o.clock = &clock;
    o.sink = &sink;
    o.topology = testing::TwoCpuTopology();
    o.max_prefill_chunk = 64;
    o.standby = so;
    auto s = Scheduler::Create(o);
    EXPECT_TRUE(s.has_value());
    if (s) sched = std::move(*s);
  }
  // Steps until `done` (at most n steps); 1 ms of virtual time per step.
  template <typename Pred>
  void StepUntil(Pred done, int n = 5000) {
    for (int i = 0; i < n && !done(); ++i) {
      StepResult st = sched->Step();
      if (st.next_step_ns != INT64_MAX && st.next_step_ns > clock.NowNs()) {
        clock.SetNs(st.next_step_ns);
      }
      clock.AdvanceNs(kMs);
    }
  }
  void Steps(int n) {
    StepUntil([] { return false; }, n);
  }
};

// The answer an undisturbed scheduler gives Req(id, u).
std::vector<runtime::TokenId> Undisturbed(runtime::KvType kv, Urgency u) {
  Rig r(kv);
  EXPECT_TRUE(r.sched);
  if (!r.sched) return {};
  EXPECT_EQ(r.sched->Submit(Req(1, u)), SubmitStatus::kAdmitted);
  r.StepUntil([&] { return r.sink.TerminalCount(1) > 0; });
  EXPECT_TRUE(r.sink.EndedOnce(1, TerminalStatus::kDone));
  return r.sink.tokens[1];
}

#define REQUIRE_STORIES()    \
  if (StoriesPack().empty()) \
  GTEST_SKIP() << "stories260K not found under " << ari::testing::ModelsDir()

TEST(SchedulerStandby, FinishHoldServeCriticalAndResume) {
  REQUIRE_STORIES();
  const auto want_normal = Undisturbed(runtime::KvType::kF16, Urgency::kNormal);
  const auto want_critical = Undisturbed(runtime::KvType::kF16, Urgency::kCritical);
  ASSERT_GT(want_normal.size(), 8u);
  Rig r(runtime::KvType::kF16);
  ASSERT_TRUE(r.sched);
  Scheduler& s = *r.sched;
  ASSERT_EQ(s.Submit(Req(1, Urgency::kNormal)), SubmitStatus::kAdmitted);
  r.Steps(3);  // turn 1 in flight
  ASSERT_EQ(r.sink.TerminalCount(1), 0u);
  EXPECT_EQ(s.RequestStandby(), StandbyAnswer::kAccepted);
  EXPECT_EQ(s.RequestStandby(), StandbyAnswer::kAlready);
  EXPECT_EQ(s.standby_state(), StandbyState::kEntering);
  r.StepUntil([&] { return r.engine->memory_released(); });
  EXPECT_TRUE(r.sink.EndedOnce(1, TerminalStatus::kDone));  // finished first
  EXPECT_EQ(r.sink.tokens[1], want_normal);
  EXPECT_EQ(s.standby_state(), StandbyState::kStandby);

  ASSERT_EQ(s.Submit(Req(2, Urgency::kNormal)), SubmitStatus::kAdmitted);
  const size_t steps_before = r.sink.steps.size();
  r.Steps(50);
  EXPECT_EQ(r.sink.steps.size(), steps_before) << "a chunk ran in standby";
  EXPECT_EQ(r.sink.TerminalCount(2), 0u);

  ASSERT_EQ(s.Submit(Req(3, Urgency::kCritical)), SubmitStatus::kAdmitted);
  r.StepUntil([&] { return r.sink.TerminalCount(3) > 0; });
  EXPECT_TRUE(r.sink.EndedOnce(3, TerminalStatus::kDone));
  EXPECT_EQ(r.sink.tokens[3], want_critical);
  r.Steps(3);
  EXPECT_TRUE(r.engine->memory_released()) << "not yielded again after the CRITICAL request";
  EXPECT_EQ(r.sink.TerminalCount(2), 0u);

  EXPECT_EQ(s.RequestResume(), StandbyAnswer::kAccepted);
  r.StepUntil([&] { return r.sink.TerminalCount(2) > 0; });
  EXPECT_TRUE(r.sink.EndedOnce(2, TerminalStatus::kDone));
  EXPECT_EQ(r.sink.tokens[2], want_normal);
  EXPECT_EQ(s.standby_state(), StandbyState::kActive);
  EXPECT_EQ(s.RequestResume(), StandbyAnswer::kAlready);
  EXPECT_EQ(r.runner->chunks_while_released, 0);
  EXPECT_EQ(r.sink.events, (std::vector<StandbyEventKind>{
                               StandbyEventKind::kEntering, StandbyEventKind::kReleased,
                               StandbyEventKind::kAutoResumed, StandbyEventKind::kReleased,
                               StandbyEventKind::kResumed}));
}

TEST(SchedulerStandby, ParkedTurnContinuesTokenForTokenAfterResume) {
  REQUIRE_STORIES();
  for (runtime::KvType kv : {runtime::KvType::kF16, runtime::KvType::kInt8}) {
    SCOPED_TRACE(kv == runtime::KvType::kF16 ? "F16" : "INT8");
    const auto want = Undisturbed(kv, Urgency::kNormal);
    Rig r(kv, StandbyOptions{StandbyInFlight::kPark, StandbyCritical::kServe, false});
    ASSERT_TRUE(r.sched);
    ASSERT_EQ(r.sched->Submit(Req(1, Urgency::kNormal)), SubmitStatus::kAdmitted);
    r.StepUntil([&] { return r.sink.tokens[1].size() >= 8; });  // mid-decode
    ASSERT_EQ(r.sink.TerminalCount(1), 0u);
    ASSERT_EQ(r.sched->RequestStandby(), StandbyAnswer::kAccepted);
    r.Steps(1);  // one boundary: parked and released at once
    EXPECT_TRUE(r.engine->memory_released());
    ASSERT_FALSE(r.sink.parked.empty());
    EXPECT_EQ(r.sink.parked[0], 1);
    EXPECT_EQ(r.sink.TerminalCount(1), 0u);
    r.Steps(20);
    EXPECT_EQ(r.sink.TerminalCount(1), 0u);
    ASSERT_EQ(r.sched->RequestResume(), StandbyAnswer::kAccepted);
    r.StepUntil([&] { return r.sink.TerminalCount(1) > 0; });
    EXPECT_TRUE(r.sink.EndedOnce(1, TerminalStatus::kDone));
    EXPECT_EQ(r.sink.tokens[1], want);
    EXPECT_EQ(r.runner->chunks_while_released, 0);
  }
}

TEST(SchedulerStandby, RefusedCriticalAndDeadlinesEachEndOnce) {
  REQUIRE_STORIES();
  Rig r(runtime::KvType::kF16,
        StandbyOptions{StandbyInFlight::kFinish, StandbyCritical::kRefuse, false});
  ASSERT_TRUE(r.sched);
  Scheduler& s = *r.sched;
  ASSERT_EQ(s.RequestStandby(), StandbyAnswer::kAccepted);
  r.Steps(1);
  EXPECT_TRUE(r.engine->memory_released());
  ASSERT_EQ(s.Submit(Req(1, Urgency::kCritical)), SubmitStatus::kAdmitted);
  ASSERT_EQ(s.Submit(Req(2, Urgency::kNormal, 40, r.clock.NowNs() + 30 * kMs)),
            SubmitStatus::kAdmitted);
  ASSERT_EQ(s.Submit(Req(3, Urgency::kHigh)), SubmitStatus::kAdmitted);
  r.Steps(60);
  ASSERT_TRUE(r.sink.EndedOnce(1, TerminalStatus::kRejected));
  EXPECT_NE(r.sink.terminals[1][0].message.find("node in standby"), std::string::npos);
  EXPECT_TRUE(r.sink.EndedOnce(2, TerminalStatus::kDeadlineMissed));
  EXPECT_EQ(r.sink.TerminalCount(3), 0u);
  EXPECT_TRUE(r.engine->memory_released());  // the refusal did not re-warm
  // A RESUME arriving while the engine is re-warmed is answered "in progress"; a STANDBY
  // then is accepted and carried out after the re-warm.
  StandbyAnswer during = StandbyAnswer::kAccepted;
  StandbyAnswer standby_during = StandbyAnswer::kAlready;
  r.runner->on_rewarm = [&] {
    during = s.RequestResume();
    standby_during = s.RequestStandby();
    r.runner->on_rewarm = nullptr;
  };
  ASSERT_EQ(s.RequestResume(), StandbyAnswer::kAccepted);
  r.Steps(1);
  EXPECT_EQ(during, StandbyAnswer::kInProgress);
  EXPECT_EQ(standby_during, StandbyAnswer::kAccepted);
  r.Steps(2);
  EXPECT_TRUE(r.engine->memory_released());  // the second STANDBY took effect
  EXPECT_EQ(r.sink.TerminalCount(3), 0u);
  ASSERT_EQ(s.RequestResume(), StandbyAnswer::kAccepted);
  r.StepUntil([&] { return r.sink.TerminalCount(3) > 0; });
  EXPECT_TRUE(r.sink.EndedOnce(3, TerminalStatus::kDone));
  s.Shutdown();
  for (uint64_t id : {1, 2, 3}) EXPECT_EQ(r.sink.TerminalCount(id), 1u) << id;
}

}  // namespace
}  // namespace ari::qos
