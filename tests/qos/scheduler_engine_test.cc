// The scheduler driving the REAL engine on stories260K (converted in-test, packed with
// ari-pack's WritePack): pinning after each core-class switch (workers read back from the
// OS, and every chunk's CPUs observed inside its compute: StepInfo::ran), preemption
// (structure measured on the engine's compute_ns, not wall-clock thresholds), identical
// resume, precision switch mid-generation, cancel with the real engine.
#include <dirent.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <functional>
#include <thread>

#include "qos/scheduler.h"
#include "runtime/model/pack_file.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

using testing::MakeRequest;
using testing::RecordingSink;
constexpr int64_t kMs = thermal::kNsPerMs;

std::filesystem::path g_plain, g_pack;

class SchedulerEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!g_plain.empty()) return;
    const auto dir = ari::testing::TempDir("sched_engine");
    g_plain = testing::WriteStoriesGguf(dir);
    if (g_plain.empty()) return;
    g_pack = dir / "stories260K.pack.gguf";
    if (!runtime::WritePack(g_plain, g_pack)) g_pack.clear();
  }
  void SetUp() override {
    if (g_plain.empty())
      GTEST_SKIP() << "stories260K not found under " << ari::testing::ModelsDir();
  }
  std::unique_ptr<runtime::Engine> MakeEngine(bool pack, int slots = 2) {
    runtime::EngineOptions o;
    o.model_path = pack && !g_pack.empty() ? g_pack : g_plain;
    o.slots = slots;
    o.context_length = 512;
    o.max_chunk = 64;
    o.max_output = 256;
    o.cpus = {0, 1};
    o.threads = 2;
    auto e = runtime::Engine::Create(o);
    EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
    return e ? std::move(*e) : nullptr;
  }
  std::unique_ptr<Scheduler> MakeScheduler(const Policy& p, runtime::Engine& e, RecordingSink& s,
                                           const thermal::Clock& clock,
                                           thermal::TemperatureSource* temp = nullptr) {
    SchedulerOptions o;
    o.policy = &p;
    o.engine = &e;
    o.clock = &clock;
    o.sink = &s;
    o.temperature = temp;
    o.topology = testing::TwoCpuTopology();
    o.max_prefill_chunk = 64;
    auto r = Scheduler::Create(o);
    EXPECT_TRUE(r.has_value());
    return std::move(*r);
  }
};

// Steps with virtual time until the request ends.
void RunUntilDone(Scheduler& s, thermal::ManualClock& clock, RecordingSink& sink, uint64_t id) {
  for (int i = 0; i < 5000 && sink.TerminalCount(id) == 0; ++i) {
    StepResult r = s.Step();
    if (r.next_step_ns != INT64_MAX && r.next_step_ns > clock.NowNs()) clock.SetNs(r.next_step_ns);
    clock.AdvanceNs(kMs);
  }
}

// CPUs allowed for each thread of this process, from /proc/self/task/*/status.
std::vector<std::string> TaskCpuLists() {
  std::vector<std::string> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/status");
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        out.push_back(line.substr(line.find_first_not_of(" \t", 18)));
      }
    }
  }
  closedir(d);
  return out;
}

TEST_F(SchedulerEngine, WorkersRunOnTheChosenCpusAfterEachSwitch) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs";
  auto engine = MakeEngine(true);
  ASSERT_TRUE(engine);
  Policy p = testing::TestPolicy();  // CRITICAL -> {0}, NORMAL -> {1}, BACKGROUND -> {0,1}
  RecordingSink sink;
  thermal::ManualClock clock;
  auto s = MakeScheduler(p, *engine, sink, clock);
  const struct {
    Urgency u;
    std::vector<int> cpus;
    const char* list;
  } cases[] = {{Urgency::kCritical, {0}, "0"},
               {Urgency::kNormal, {1}, "1"},
               {Urgency::kBackground, {0, 1}, "0-1"},
               {Urgency::kNormal, {1}, "1"},
               {Urgency::kCritical, {0}, "0"}};
  uint64_t id = 1;
  for (const auto& c : cases) {
    ASSERT_EQ(s->Submit(MakeRequest(id, c.u, 8, 4)), SubmitStatus::kAdmitted);
    StepResult r = s->Step();
    ASSERT_TRUE(r.ran);
    const runtime::PinningReport pin = engine->Pinning();
    EXPECT_TRUE(pin.failures.empty()) << pin.failures.front();
    EXPECT_EQ(pin.requested, c.cpus);
    ASSERT_FALSE(pin.worker_cpus.empty());
    for (const auto& w : pin.worker_cpus) EXPECT_EQ(w, c.cpus) << UrgencyName(c.u);
    // The OS view: at least one thread of this process is confined to exactly that set.
    const auto lists = TaskCpuLists();
    EXPECT_NE(std::find(lists.begin(), lists.end(), c.list), lists.end()) << c.list;
    RunUntilDone(*s, clock, sink, id);
    EXPECT_TRUE(sink.EndedOnce(id, TerminalStatus::kDone));
    // Inside the computation: every chunk of the request (the calling thread's share
    // included, all of it when threads = 1) ran on the class's CPUs.
    uint64_t mask = 0;
    for (int cpu : c.cpus) mask |= uint64_t{1} << cpu;
    int chunks = 0;
    for (const StepInfo& st : sink.steps) {
      if (st.id != id) continue;
      ++chunks;
      EXPECT_EQ(st.knobs.cpu_mask, mask);
      EXPECT_NE(st.ran.cpus, 0u);
      EXPECT_EQ(st.ran.cpus & ~mask, 0u) << UrgencyName(c.u) << " ran on " << st.ran.cpus;
      EXPECT_EQ(st.ran.pin_failures, 0);
      EXPECT_EQ(st.ran.threads, st.knobs.threads);
    }
    EXPECT_GT(chunks, 1);
    ++id;
  }
}

// Sink that lets the test thread wait for steps/terminals of the Run() thread.
struct WaitSink : RecordingSink {
  std::condition_variable cv;
  void OnStep(const StepInfo& st) override {
    RecordingSink::OnStep(st);
    cv.notify_all();
  }
  void OnTerminal(const TerminalEvent& t) override {
    RecordingSink::OnTerminal(t);
    cv.notify_all();
  }
  template <class Pred>
  bool Wait(Pred pred) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(30), [&] { return pred(); });
  }
};

TEST_F(SchedulerEngine, CriticalPreemptsPrefillAndNormalResumesIdentically) {
  auto engine = MakeEngine(true);
  ASSERT_TRUE(engine);
  Policy p = testing::TestPolicy(/*prefill=*/32, /*decode=*/4);
  for (auto* t : {&p.knobs[0], &p.conservative}) {
    (*t)[Rank(Urgency::kNormal)].core_class = CoreClass::kAny;
    (*t)[Rank(Urgency::kCritical)].core_class = CoreClass::kAny;
    (*t)[Rank(Urgency::kNormal)].threads = (*t)[Rank(Urgency::kCritical)].threads = 2;
    (*t)[Rank(Urgency::kNormal)].pause_ms = 3;  // paced chat, as in the default policy
  }
  SchedRequest normal = MakeRequest(1, Urgency::kNormal, 400, 24);
  normal.sampling.temperature = 0.9f;
  normal.sampling.top_p = 0.9f;
  normal.sampling.seed = 1234;
  // Reference: the NORMAL request alone.
  std::vector<runtime::TokenId> reference;
  {
    RecordingSink sink;
    thermal::ManualClock clock;
    auto s = MakeScheduler(p, *engine, sink, clock);
    ASSERT_EQ(s->Submit(normal), SubmitStatus::kAdmitted);
    RunUntilDone(*s, clock, sink, 1);
    ASSERT_TRUE(sink.EndedOnce(1, TerminalStatus::kDone));
    reference = sink.tokens[1];
    ASSERT_EQ(reference.size(), 24u);
  }
  // Real time: Run() on its own thread; CRITICAL arrives during the NORMAL prefill.
  WaitSink sink;
  auto s = MakeScheduler(p, *engine, sink, thermal::SteadyClock::Instance());
  std::jthread loop([&](const std::stop_token& st) { s->Run(st); });
  normal.id = 2;
  ASSERT_EQ(s->Submit(normal), SubmitStatus::kAdmitted);
  ASSERT_TRUE(sink.Wait([&] { return sink.steps.size() >= 2; }));
  size_t mark = 0;
  {
    std::lock_guard lk(sink.mu);
    mark = sink.steps.size();
    ASSERT_GT(sink.steps.back().prompt_remaining, 0) << "NORMAL prefill already over";
  }
  ASSERT_EQ(s->Submit(MakeRequest(3, Urgency::kCritical, 24, 8)), SubmitStatus::kAdmitted);
  ASSERT_TRUE(sink.Wait([&] { return sink.terminals.count(2) && sink.terminals.count(3); }));
  loop.request_stop();
  loop.join();
  // Between the CRITICAL's arrival and its first token: at most one NORMAL chunk (the
  // one in flight), then only CRITICAL chunks (its own prefill).
  int normal_chunks = 0;
  int64_t normal_ns = 0, critical_ns = 0, max_normal_chunk_ns = 0;
  bool first_token = false;
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    const StepInfo& st = sink.steps[i];
    if (st.id == 2) max_normal_chunk_ns = std::max(max_normal_chunk_ns, st.compute_ns);
    if (i < mark || first_token) continue;
    if (st.id == 2) {
      ++normal_chunks;
      normal_ns += st.compute_ns;
    } else {
      critical_ns += st.compute_ns;
      if (st.new_tokens > 0) first_token = true;
    }
  }
  EXPECT_TRUE(first_token);
  EXPECT_LE(normal_chunks, 1);
  EXPECT_LE(normal_ns + critical_ns, max_normal_chunk_ns + critical_ns);
  EXPECT_TRUE(sink.EndedOnce(3, TerminalStatus::kDone));
  ASSERT_TRUE(sink.EndedOnce(2, TerminalStatus::kDone));
  EXPECT_EQ(sink.tokens[2], reference);  // resumed in its own slot: same tokens, same seed
}

// Moves virtual time by each chunk's engine-reported compute time, so the scheduler's
// clock (admission, first token) is made of engine chunk times only. `mid`, when set,
// runs once halfway through the next chunk: a request arriving while a chunk computes.
class EngineTimeRunner final : public runtime::ChunkRunner {
 public:
  EngineTimeRunner(runtime::Engine& e, thermal::ManualClock& clock) : e_(e), clock_(clock) {}
  int32_t num_slots() const override { return e_.num_slots(); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& t) override {
    return e_.StartTurn(slot, t);
  }
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& k) override {
    auto r = e_.RunChunk(slot, k);
    if (!r) return r;
    const int64_t half = r->compute_ns / 2;
    if (mid) {
      clock_.AdvanceNs(half);
      auto f = std::move(mid);
      mid = nullptr;
      f();
      clock_.AdvanceNs(r->compute_ns - half);
    } else {
      clock_.AdvanceNs(r->compute_ns);
    }
    return r;
  }
  std::function<void()> mid;

 private:
  runtime::Engine& e_;
  thermal::ManualClock& clock_;
};

// The latency rule in engine time: a CRITICAL request that arrives halfway
// through a NORMAL prefill chunk gets its first token after the rest of that chunk plus
// its own chunks up to the first token, nothing else (no second NORMAL chunk, no NORMAL
// pacing pause), and so within one NORMAL chunk time plus its own prefill.
TEST_F(SchedulerEngine, PreemptionLatencyIsRestOfChunkInFlightPlusOwnPrefill) {
  auto engine = MakeEngine(true);
  ASSERT_TRUE(engine);
  Policy p = testing::TestPolicy(/*prefill=*/32, /*decode=*/4);
  for (auto* t : {&p.knobs[0], &p.conservative}) {
    (*t)[Rank(Urgency::kNormal)].core_class = CoreClass::kAny;
    (*t)[Rank(Urgency::kNormal)].threads = 2;
    (*t)[Rank(Urgency::kNormal)].pause_ms = 50;  // must not delay CRITICAL
  }
  RecordingSink sink;
  thermal::ManualClock clock;
  EngineTimeRunner runner(*engine, clock);
  SchedulerOptions o;
  o.policy = &p;
  o.engine = &runner;
  o.clock = &clock;
  o.sink = &sink;
  o.topology = testing::TwoCpuTopology();
  o.max_prefill_chunk = 64;
  auto created = Scheduler::Create(o);
  ASSERT_TRUE(created.has_value());
  Scheduler& s = **created;
  ASSERT_EQ(s.Submit(MakeRequest(1, Urgency::kNormal, 300, 8)), SubmitStatus::kAdmitted);
  auto step = [&] {
    StepResult r = s.Step();
    if (!r.ran && r.next_step_ns != INT64_MAX && r.next_step_ns > clock.NowNs()) {
      clock.SetNs(r.next_step_ns);
    }
    return r;
  };
  while (sink.steps.size() < 2) step();  // two NORMAL prefill chunks (paced in between)
  int64_t arrival = -1;
  runner.mid = [&] {
    arrival = clock.NowNs();
    ASSERT_EQ(s.Submit(MakeRequest(2, Urgency::kCritical, 24, 6)), SubmitStatus::kAdmitted);
  };
  size_t in_flight = 0;
  while (arrival < 0) {
    if (step().ran) in_flight = sink.steps.size() - 1;
  }
  ASSERT_EQ(sink.steps[in_flight].id, 1u);
  ASSERT_EQ(sink.steps[in_flight].phase, runtime::ChunkPhase::kPrefill);
  for (int i = 0; i < 2000 && !sink.TerminalCount(2); ++i) step();
  ASSERT_TRUE(sink.EndedOnce(2, TerminalStatus::kDone));

  const int64_t chunk_ns = sink.steps[in_flight].compute_ns;
  const int64_t rest_ns = chunk_ns - chunk_ns / 2;
  int64_t own_ns = 0, max_normal_chunk_ns = 0;
  bool first_token = false;
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    const StepInfo& st = sink.steps[i];
    if (st.id == 1) max_normal_chunk_ns = std::max(max_normal_chunk_ns, st.compute_ns);
    if (i <= in_flight || first_token) continue;
    EXPECT_EQ(st.id, 2u) << "a NORMAL chunk ran before the CRITICAL request's first token";
    own_ns += st.compute_ns;
    first_token = st.new_tokens > 0;
  }
  ASSERT_TRUE(first_token);
  const int64_t ttft = sink.terminals[2][0].ev.first_token_ns;
  EXPECT_EQ(ttft, rest_ns + own_ns);
  EXPECT_LE(ttft, max_normal_chunk_ns + own_ns);
  // The NORMAL request then resumes and finishes.
  for (int i = 0; i < 5000 && !sink.TerminalCount(1); ++i) step();
  EXPECT_TRUE(sink.EndedOnce(1, TerminalStatus::kDone));
}

// A settable temperature.
struct KnobSource : thermal::TemperatureSource {
  double celsius = 40.0;
  void ReadInto(thermal::Reading& out) override {
    out.celsius = celsius;
    out.state = thermal::SensorState::kOk;
    out.source = "test";
  }
  std::string_view name() const override { return "test"; }
};

TEST_F(SchedulerEngine, PrecisionSwitchMidGenerationContinuesValidly) {
  if (g_pack.empty()) GTEST_SKIP() << "pack not available";
  auto engine = MakeEngine(true);
  auto plain = MakeEngine(false, 1);
  ASSERT_TRUE(engine && plain);
  Policy p = testing::TestPolicy(16, 4);
  p.thermal_bands.push_back(ThermalBand{"hot", 80.0, 75.0, 0});
  p.knobs.push_back(p.knobs[0]);
  p.knobs[0][Rank(Urgency::kNormal)].precision = WeightPrecision::kW8A16;
  p.knobs[1][Rank(Urgency::kNormal)].precision = WeightPrecision::kW4A8;
  KnobSource temp;
  RecordingSink sink;
  thermal::ManualClock clock;
  auto s = MakeScheduler(p, *engine, sink, clock, &temp);
  SchedRequest req = MakeRequest(1, Urgency::kNormal, 0, 48);
  req.prompt = {1, 403, 407, 261, 378, 425};  // BOS + a few story tokens
  ASSERT_EQ(s->Submit(req), SubmitStatus::kAdmitted);
  for (int i = 0; i < 500 && !sink.TerminalCount(1); ++i) {
    if (sink.tokens[1].size() >= 16) temp.celsius = 90.0;  // hot: switch to W4A8
    s->Step();
    clock.AdvanceNs(kMs);
  }
  ASSERT_TRUE(sink.EndedOnce(1, TerminalStatus::kDone));
  const auto& gen = sink.tokens[1];
  ASSERT_GE(gen.size(), 20u);
  // What ran, chunk by chunk (the engine's report, not the decision log): W8A16 first,
  // W4A8 after the switch, each chunk as decided.
  bool saw8 = false, saw4 = false, switched = false;
  for (const StepInfo& st : sink.steps) {
    EXPECT_EQ(st.ran.precision, st.knobs.precision);
    if (st.ran.precision == runtime::Precision::kW4A8) switched = saw4 = true;
    if (st.ran.precision == runtime::Precision::kW8A16) {
      saw8 = true;
      EXPECT_FALSE(switched) << "back to W8A16 while hot";
    }
  }
  EXPECT_TRUE(saw8 && saw4);
  // Valid continuation: teacher-forced on the fp32 reference model, each token after the
  // switch is what the reference predicts (greedy) most of the time.
  std::vector<runtime::TokenId> ctx(req.prompt.begin(), req.prompt.end());
  size_t agree = 0, total = 0;
  for (size_t i = 0; i < gen.size(); ++i) {
    if (i >= 16) {
      runtime::TurnSpec t;
      t.prompt = ctx;
      t.max_tokens = 1;
      t.keep_context = false;
      ASSERT_TRUE(plain->StartTurn(0, t));
      runtime::ChunkKnobs k;
      k.prefill_tokens = 64;
      runtime::ChunkResult r;
      do {
        auto cr = plain->RunChunk(0, k);
        ASSERT_TRUE(cr.has_value());
        r = *cr;
      } while (!r.finished);
      ASSERT_EQ(r.tokens.size(), 1u);
      agree += r.tokens[0] == gen[i];
      ++total;
    }
    ctx.push_back(gen[i]);
  }
  EXPECT_GE(agree * 10, total * 7) << agree << "/" << total;
}

TEST_F(SchedulerEngine, CancelMidPrefillAndMidDecodeEndOnce) {
  auto engine = MakeEngine(true);
  ASSERT_TRUE(engine);
  Policy p = testing::TestPolicy(16, 2);
  RecordingSink sink;
  thermal::ManualClock clock;
  auto s = MakeScheduler(p, *engine, sink, clock);
  ASSERT_EQ(s->Submit(MakeRequest(1, Urgency::kNormal, 100, 20)), SubmitStatus::kAdmitted);
  s->Step();
  ASSERT_EQ(sink.steps.back().phase, runtime::ChunkPhase::kPrefill);
  EXPECT_TRUE(s->Cancel(1));
  ASSERT_EQ(s->Submit(MakeRequest(2, Urgency::kNormal, 8, 40)), SubmitStatus::kAdmitted);
  s->Step();  // cancels 1, starts 2
  EXPECT_TRUE(sink.EndedOnce(1, TerminalStatus::kCancelled));
  while (sink.tokens[2].size() < 4) s->Step();
  EXPECT_TRUE(s->Cancel(2));
  s->Step();
  EXPECT_TRUE(sink.EndedOnce(2, TerminalStatus::kCancelled));
  EXPECT_EQ(sink.terminals[2][0].ev.tokens_generated, static_cast<int32_t>(sink.tokens[2].size()));
  // The freed slot serves a new request normally.
  ASSERT_EQ(s->Submit(MakeRequest(3, Urgency::kCritical, 8, 6)), SubmitStatus::kAdmitted);
  RunUntilDone(*s, clock, sink, 3);
  EXPECT_TRUE(sink.EndedOnce(3, TerminalStatus::kDone));
}

}  // namespace
}  // namespace ari::qos
