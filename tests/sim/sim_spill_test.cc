// Parked sessions on disk in virtual time: the real scheduler over the SimEngine with one
// slot; session 7's idle conversation is evicted by session 8 (spilled), then restored on
// its next turn. The virtual time charged is the cost model's SpillSeconds/RestoreSeconds
// of the sessions' positions (what spill_bench measures), so a costlier disk delays the
// restored turn's first token by exactly the difference: ari-tune can weigh it.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "qos/scheduler.h"
#include "sim/compare_cli.h"
#include "sim/cost_model.h"
#include "sim/sim_engine.h"

namespace ari::sim {
namespace {

constexpr int64_t kMs = thermal::kNsPerMs;

struct Sink : qos::ChunkSink {
  std::map<uint64_t, qos::TerminalEvent> last;
  std::vector<qos::ParkEventKind> parks;
  void OnChunk(const qos::ChunkEvent&) override {}
  void OnTerminal(const qos::TerminalEvent& t) override { last[t.id] = t; }
  void OnDecision(const qos::Decision&, int64_t) override {}
  void OnPark(const qos::ParkEvent& e) override { parks.push_back(e.kind); }
};

struct SpillRun {
  double spill_s = 0;
  int64_t spills = 0, restores = 0;
  int64_t first_token_ns = -1;  // of session 7's second turn, from its admission
  std::vector<qos::ParkEventKind> parks;
};

SpillRun RunSessions(const CostModel& cost) {
  SpillRun res;
  auto policy = LoadPolicyByName("default");
  EXPECT_TRUE(policy.has_value());
  if (!policy) return res;
  policy->critical_reserved_slots = 0;
  thermal::ManualClock clock(1000 * kMs);
  SimEngine engine(cost, clock, 1, 0, nullptr, 4096, 0);
  Sink sink;
  qos::SchedulerOptions o;
  o.policy = &*policy;
  o.engine = &engine;
  o.clock = &clock;
  o.sink = &sink;
  thermal::CpuTopology topo;
  topo.cpus = {thermal::CpuInfo{0, thermal::CoreClass::kPerformance, 0, 0}};
  topo.performance = {0};
  topo.basis = thermal::TopologyBasis::kConfig;
  o.topology = topo;
  auto s = qos::Scheduler::Create(o);
  EXPECT_TRUE(s.has_value());
  if (!s) return res;
  const uint64_t sessions[] = {7, 8, 7};
  for (uint64_t id = 1; id <= 3; ++id) {
    qos::SchedRequest r;
    r.id = id;
    r.urgency = qos::Urgency::kNormal;
    r.session_id = sessions[id - 1];
    r.prompt.assign(300, 1);
    r.max_tokens = 100;
    r.deadline_ns = clock.NowNs() + 3600000 * kMs;
    EXPECT_EQ((*s)->Submit(std::move(r)), qos::SubmitStatus::kAdmitted);
    for (int i = 0; i < 100000 && (*s)->live_requests() > 0; ++i) {
      const qos::StepResult st = (*s)->Step();
      if (!st.ran && st.next_step_ns > clock.NowNs() && st.next_step_ns != INT64_MAX) {
        clock.SetNs(st.next_step_ns);
      }
    }
    EXPECT_EQ(sink.last[id].status, qos::TerminalStatus::kDone) << id;
  }
  res.spill_s = engine.spill_seconds();
  res.spills = engine.spills();
  res.restores = engine.restores();
  res.first_token_ns = sink.last[3].first_token_ns;
  res.parks = sink.parks;
  return res;
}

TEST(SimSpill, SpillAndRestoreCostsComeFromTheCostModel) {
  auto builtin = BuiltinCostModel();
  ASSERT_TRUE(builtin.has_value());
  CostModel cheap = *builtin;
  cheap.spill_ms_per_1k_positions = 0;
  cheap.restore_ms_per_1k_positions = 0;
  CostModel slow = *builtin;
  slow.spill_ms_per_1k_positions = 50;
  slow.restore_ms_per_1k_positions = 20;
  const SpillRun a = RunSessions(cheap);
  const SpillRun b = RunSessions(slow);
  EXPECT_EQ(b.spills, 2);  // session 7 by 8, then 8 by 7's second turn
  EXPECT_EQ(b.restores, 1);
  EXPECT_EQ(b.parks, (std::vector<qos::ParkEventKind>{qos::ParkEventKind::kSpilled,
                                                      qos::ParkEventKind::kSpilled,
                                                      qos::ParkEventKind::kRestored}));
  // Each session holds 300 prompt + 100 generated positions when spilled.
  const double want = 2 * slow.SpillSeconds(400) + slow.RestoreSeconds(400);
  EXPECT_NEAR(b.spill_s, want, 1e-9);
  EXPECT_EQ(a.spill_s, 0.0);
  // The restored turn's first token comes later by the spill of 8 plus the restore of 7.
  ASSERT_GT(a.first_token_ns, 0);
  const double delta_s = static_cast<double>(b.first_token_ns - a.first_token_ns) * 1e-9;
  EXPECT_NEAR(delta_s, slow.SpillSeconds(400) + slow.RestoreSeconds(400), 1e-6);
}

}  // namespace
}  // namespace ari::sim
