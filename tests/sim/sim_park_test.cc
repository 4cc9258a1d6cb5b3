// Slot parking in virtual time: the real scheduler over the SimEngine (built-in cost
// model), both slots busy with NORMAL turns, a CRITICAL request submitted in the middle of
// a chunk. With a park area its queue wait is the rest of the chunk in flight plus the
// park cost (CostModel::ParkSeconds); without one it waits for a whole turn to end. Under
// the memory ladder's park_to_disk the parked turn's KV also goes to disk: the wait is the
// same (the write comes after the CRITICAL chunk), the spill and restore costs are charged.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "qos/scheduler.h"
#include "sim/compare_cli.h"
#include "sim/cost_model.h"
#include "sim/sim_engine.h"

namespace ari::sim {
namespace {

constexpr int64_t kMs = thermal::kNsPerMs;
constexpr int kNormalTokens = 1500;  // long enough for the second turn to age in (15 s)

struct Sink : qos::ChunkSink {
  std::map<uint64_t, int> terminals;
  std::map<uint64_t, qos::TerminalEvent> last;
  std::map<uint64_t, int32_t> tokens;
  std::vector<qos::StepInfo> steps;
  int parks = 0, resumes = 0;
  void OnChunk(const qos::ChunkEvent& c) override {
    tokens[c.id] += static_cast<int32_t>(c.tokens.size());
  }
  void OnTerminal(const qos::TerminalEvent& t) override {
    ++terminals[t.id];
    last[t.id] = t;
  }
  void OnDecision(const qos::Decision&, int64_t) override {}
  void OnStep(const qos::StepInfo& s) override { steps.push_back(s); }
  void OnPark(const qos::ParkEvent& e) override {
    parks += e.kind == qos::ParkEventKind::kParked;
    resumes += e.kind == qos::ParkEventKind::kResumed;
  }
};

// Once armed, submits the CRITICAL request in the middle of the next chunk.
struct Arrival : ChunkObserver {
  qos::Scheduler* sched = nullptr;
  thermal::ManualClock* clock = nullptr;
  bool armed = false;
  int64_t at_ns = INT64_MAX, chunk_end_ns = 0;
  bool submitted = false;
  void OnChunkBegin(const runtime::ChunkKnobs&, runtime::ChunkPhase, int, double seconds, bool,
                    uint32_t) override {
    if (!armed || at_ns != INT64_MAX) return;
    const int64_t ns = thermal::SecondsToNs(seconds);
    at_ns = clock->NowNs() + ns / 2;
    chunk_end_ns = clock->NowNs() + std::max<int64_t>(1, ns);
  }
  void OnChunkEnd() override {}
  int64_t NextTickNs() const override { return submitted ? INT64_MAX : at_ns; }
  void OnTick() override {
    if (submitted || clock->NowNs() < at_ns) return;
    qos::SchedRequest r;
    r.id = 9;
    r.urgency = qos::Urgency::kCritical;
    r.prompt.assign(16, 1);
    r.max_tokens = 8;
    r.deadline_ns = clock->NowNs() + 60000 * kMs;
    submitted = sched->Submit(std::move(r)) == qos::SubmitStatus::kAdmitted;
  }
};

struct RunResult {
  int64_t offloaded = 0;  // parked turns moved to disk (park_to_disk)
  double spill_s = 0;     // virtual time charged for it (spill + restore)
  int64_t queue_wait_ns = -1;
  int64_t submit_ns = 0, chunk_end_ns = 0;  // the chunk in flight at the arrival ends
  int parks = 0, resumes = 0;
  bool all_done = false;
};

RunResult RunBusySlots(int park_areas, const CostModel& cost, bool park_to_disk = false) {
  RunResult res;
  auto policy = LoadPolicyByName("default");
  EXPECT_TRUE(policy.has_value());
  if (!policy) return res;
  // Every slot busy: the parking path (the shipped reserve would keep one slot free for
  // CRITICAL; tests/qos/scheduler_reserve_test.cc covers that path).
  policy->critical_reserved_slots = 0;
  if (park_to_disk) policy->memory_bands[0].actions.park_to_disk = true;
  thermal::ManualClock clock(1000 * kMs);
  Arrival arrival;
  arrival.clock = &clock;
  SimEngine engine(cost, clock, 2, 0, &arrival, 4096, park_areas);
  Sink sink;
  qos::SchedulerOptions o;
  o.policy = &*policy;
  o.engine = &engine;
  o.clock = &clock;
  o.sink = &sink;
  if (park_to_disk) {  // the mildest memory band in force the whole run
    const uint64_t below = policy->memory_bands[0].enter_below_bytes - 1;
    o.memory = [below] {
      thermal::MemoryReading m;
      m.available_bytes = below;
      return std::optional<thermal::MemoryReading>(m);
    };
  }
  thermal::CpuTopology topo;
  topo.cpus = {thermal::CpuInfo{0, thermal::CoreClass::kPerformance, 0, 0},
               thermal::CpuInfo{1, thermal::CoreClass::kPerformance, 0, 0}};
  topo.performance = {0, 1};
  topo.basis = thermal::TopologyBasis::kConfig;
  o.topology = topo;
  auto s = qos::Scheduler::Create(o);
  EXPECT_TRUE(s.has_value());
  if (!s) return res;
  arrival.sched = s->get();
  for (uint64_t id : {1, 2}) {
    qos::SchedRequest r;
    r.id = id;
    r.urgency = qos::Urgency::kNormal;
    r.prompt.assign(300, 1);
    r.max_tokens = kNormalTokens;
    r.deadline_ns = clock.NowNs() + 3600000 * kMs;
    EXPECT_EQ((*s)->Submit(std::move(r)), qos::SubmitStatus::kAdmitted);
  }
  // Both NORMAL turns in progress (both slots busy; the second one started when it aged
  // past the first), then the CRITICAL arrives mid-chunk.
  for (int i = 0; i < 100000 && (*s)->live_requests() > 0; ++i) {
    if (!sink.steps.empty() && sink.steps.back().id == 2 && sink.terminals.empty()) {
      arrival.armed = true;
    }
    const qos::StepResult st = (*s)->Step();
    if (!st.ran && st.next_step_ns > clock.NowNs() && st.next_step_ns != INT64_MAX) {
      clock.SetNs(st.next_step_ns);
    }
  }
  res.queue_wait_ns = sink.last[9].queue_wait_ns;
  res.submit_ns = arrival.at_ns;
  res.chunk_end_ns = arrival.chunk_end_ns;
  res.parks = sink.parks;
  res.resumes = sink.resumes;
  res.offloaded = engine.parks_offloaded();
  res.spill_s = engine.spill_seconds();
  res.all_done = true;
  for (uint64_t id : {1, 2, 9}) {
    res.all_done = res.all_done && sink.terminals[id] == 1 &&
                   sink.last[id].status == qos::TerminalStatus::kDone &&
                   sink.tokens[id] == (id == 9 ? 8 : kNormalTokens);
  }
  return res;
}

TEST(SimPark, CriticalWaitIsChunkInFlightPlusParkCost) {
  auto builtin = BuiltinCostModel();
  ASSERT_TRUE(builtin.has_value());
  CostModel cost = *builtin;
  cost.park_ms_per_1k_positions = 40;  // large enough to see in the wait
  const RunResult parked = RunBusySlots(1, cost);
  ASSERT_TRUE(parked.all_done);
  EXPECT_EQ(parked.parks, 1);
  EXPECT_EQ(parked.resumes, 1);
  ASSERT_GT(parked.chunk_end_ns, parked.submit_ns);
  // The wait: the rest of the chunk in flight, then the park of a turn of at most 1800
  // positions (300 prompt + 1500 output), nothing more.
  const int64_t rest = parked.chunk_end_ns - parked.submit_ns;
  const int64_t park_max = thermal::SecondsToNs(cost.ParkSeconds(300 + kNormalTokens));
  EXPECT_GE(parked.queue_wait_ns, rest);
  EXPECT_LE(parked.queue_wait_ns, rest + park_max + 1);
  EXPECT_GT(parked.queue_wait_ns, rest);  // the park cost was charged

  const RunResult waited = RunBusySlots(0, cost);
  ASSERT_TRUE(waited.all_done);
  EXPECT_EQ(waited.parks, 0);
  EXPECT_GT(waited.queue_wait_ns, 10 * parked.queue_wait_ns);  // a turn had to end
  EXPECT_EQ(parked.offloaded, 0);

  const RunResult disk = RunBusySlots(1, cost, true);
  ASSERT_TRUE(disk.all_done);
  EXPECT_EQ(disk.parks, 1);
  EXPECT_EQ(disk.offloaded, 1);
  const double io_max =
      cost.SpillSeconds(300 + kNormalTokens) + cost.RestoreSeconds(300 + kNormalTokens);
  EXPECT_GT(disk.spill_s, 0);
  EXPECT_LE(disk.spill_s, io_max + 1e-9);
  // CRITICAL's wait is still the chunk in flight plus the RAM park: the write comes after.
  EXPECT_LE(disk.queue_wait_ns, disk.chunk_end_ns - disk.submit_ns +
                                    thermal::SecondsToNs(cost.ParkSeconds(300 + kNormalTokens)) +
                                    1);
}

}  // namespace
}  // namespace ari::sim
