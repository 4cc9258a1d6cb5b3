// Slot parking with the REAL engine (stories260K converted in-test and packed): both slots
// busy with sampled NORMAL turns, a CRITICAL request parks one; both answers equal their
// unparked runs token for token (F16 and INT8 KV).
#include <gtest/gtest.h>

#include "qos/scheduler.h"
#include "runtime/model/pack_file.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

using testing::MakeRequest;
using testing::RecordingSink;
constexpr int64_t kMs = thermal::kNsPerMs;

// The pack of stories260K (empty when the model data is absent).
std::filesystem::path StoriesPack() {
  static const std::filesystem::path pack = [] {
    const auto dir = ari::testing::TempDir("sched_park_engine");
    const auto plain = testing::WriteStoriesGguf(dir);
    if (plain.empty()) return std::filesystem::path();
    auto p = dir / "stories260K.pack.gguf";
    return runtime::WritePack(plain, p) ? p : std::filesystem::path();
  }();
  return pack;
}

std::unique_ptr<Scheduler> MakeScheduler(const Policy& p, runtime::Engine& e, RecordingSink& s,
                                         const thermal::Clock& clock) {
  SchedulerOptions o;
  o.policy = &p;
  o.engine = &e;
  o.clock = &clock;
  o.sink = &s;
  o.topology = testing::TwoCpuTopology();
  o.max_prefill_chunk = 64;
  auto r = Scheduler::Create(o);
  EXPECT_TRUE(r.has_value());
  return r ? std::move(*r) : nullptr;
}

// Steps with virtual time until the request ends.
void RunUntilDone(Scheduler& s, thermal::ManualClock& clock, RecordingSink& sink, uint64_t id) {
  for (int i = 0; i < 5000 && sink.TerminalCount(id) == 0; ++i) {
    StepResult r = s.Step();
    if (r.next_step_ns != INT64_MAX && r.next_step_ns > clock.NowNs()) clock.SetNs(r.next_step_ns);
    clock.AdvanceNs(kMs);
  }
}

// Both slots busy with sampled NORMAL turns on the real engine (F16 and INT8 KV): a
// CRITICAL request parks the most recently started one at the next boundary; both NORMAL
// answers equal their unparked runs token for token and text for text.
TEST(SchedulerParkEngine, ParkedTurnResumesTokenForTokenWithBothSlotsBusy) {
  const std::filesystem::path model = StoriesPack();
  if (model.empty()) GTEST_SKIP() << "stories260K not found under " << ari::testing::ModelsDir();
  for (runtime::KvType kv : {runtime::KvType::kF16, runtime::KvType::kInt8}) {
    auto engine = [&] {
      runtime::EngineOptions o;
      o.model_path = model;
      o.slots = 2;
      o.context_length = 512;
      o.max_chunk = 64;
      o.max_output = 256;
      o.threads = 1;
      o.kv_type = kv;
      o.park_areas = 1;
      auto e = runtime::Engine::Create(o);
      EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
      return e ? std::move(*e) : nullptr;
    };
    auto req = [](uint64_t id, Urgency u) {
      SchedRequest r = MakeRequest(id, u, 20 + static_cast<int>(id), 60);
      r.sampling.temperature = 0.8f;
      r.sampling.top_k = 40;
      r.sampling.seed = 100 + id;
      return r;
    };
    const Policy p = testing::TestPolicy();
    auto ref_engine = engine();
    ASSERT_TRUE(ref_engine);
    RecordingSink ref;
    thermal::ManualClock ref_clock;
    auto rs = MakeScheduler(p, *ref_engine, ref, ref_clock);
    ASSERT_TRUE(rs);
    for (uint64_t id : {1, 2}) {
      ASSERT_EQ(rs->Submit(req(id, Urgency::kNormal)), SubmitStatus::kAdmitted);
      RunUntilDone(*rs, ref_clock, ref, id);
      ASSERT_TRUE(ref.EndedOnce(id, TerminalStatus::kDone));
    }

    auto park_engine = engine();
    ASSERT_TRUE(park_engine);
    RecordingSink sink;
    thermal::ManualClock clock;
    auto s = MakeScheduler(p, *park_engine, sink, clock);
    ASSERT_TRUE(s);
    ASSERT_EQ(s->Submit(req(1, Urgency::kNormal)), SubmitStatus::kAdmitted);
    ASSERT_EQ(s->Submit(req(2, Urgency::kNormal)), SubmitStatus::kAdmitted);
    for (int i = 0; i < 100 && (sink.steps.empty() || sink.steps.back().id != 2); ++i) {
      s->Step();
      clock.AdvanceNs(60 * kMs);  // 2 ages past 1 (100 ms a rank) and starts
    }
    ASSERT_EQ(sink.steps.back().id, 2u);
    ASSERT_EQ(sink.TerminalCount(1), 0u);  // both slots have a turn in progress
    ASSERT_EQ(s->Submit(req(3, Urgency::kCritical)), SubmitStatus::kAdmitted);
    StepResult r = s->Step();
    ASSERT_TRUE(r.ran);
    EXPECT_EQ(r.info->id, 3u);
    EXPECT_EQ(r.info->parked_id, 2u);  // the most recently started NORMAL turn
    for (uint64_t id : {1, 2, 3}) RunUntilDone(*s, clock, sink, id);
    for (uint64_t id : {1, 2, 3}) EXPECT_TRUE(sink.EndedOnce(id, TerminalStatus::kDone)) << id;
    for (uint64_t id : {1, 2}) {
      EXPECT_EQ(sink.tokens[id], ref.tokens[id]) << id;
      EXPECT_EQ(sink.text[id], ref.text[id]) << id;
      const auto& seqs = sink.seqs[id];
      for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i);
    }
    int resumed = 0;
    for (const StepInfo& st : sink.steps) resumed += st.resumed ? 1 : 0;
    EXPECT_EQ(resumed, 1);
  }
}

}  // namespace
}  // namespace ari::qos
