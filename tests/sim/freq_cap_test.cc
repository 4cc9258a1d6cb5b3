// CPU frequency caps in model-mode replay: the cost model's cap factor and its JSON
// fields, the replay applying a log's cpu_frequency_cap events per cluster class.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cost_model.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "tests/common/test_util.h"
#include "tests/sim/sim_test_util.h"

namespace ari::sim {
namespace {

using testing::DefaultPolicy;
using testing::ParseLog;

using runtime::ChunkPhase;

constexpr double kExact = 1e-12;  // relative: the factor is one multiplication

// prefill 100 tok/s, decode 10 tok/s, 2 threads (as tests/sim/replay_test.cc).
CostModel BaseCost() {
  CostModel c;
  c.source = "test";
  c.layers = 10;
  c.isa_speed = DefaultIsaSpeed();
  c.thread_scaling = 1.0;
  c.efficiency_core_speed = 0.5;
  CostEntry e;
  e.threads = 2;
  e.prefill_tps = 100;
  e.decode_tps = 10;
  c.entries.push_back(e);
  e.precision = runtime::Precision::kW4A8;
  e.prefill_tps = 200;
  e.decode_tps = 20;
  c.entries.push_back(e);
  return c;
}

// Nominal 2 GHz (performance) / 1 GHz (efficiency); sensitivity prefill 1, decode 0.5.
CostModel CapCost() {
  CostModel c = BaseCost();
  c.nominal_khz_performance = 2000000;
  c.nominal_khz_efficiency = 1000000;
  c.freq_sensitivity_prefill = 1.0;
  c.freq_sensitivity_decode = 0.5;
  return c;
}

TEST(FreqCap, FactorFollowsTheDocumentedFormula) {
  const CostModel c = CapCost();
  // 1 + s * (nominal / cap - 1)
  EXPECT_DOUBLE_EQ(c.FrequencyFactor(ChunkPhase::kPrefill, false, 1000000), 2.0);
  EXPECT_DOUBLE_EQ(c.FrequencyFactor(ChunkPhase::kDecode, false, 1000000), 1.5);
  EXPECT_DOUBLE_EQ(c.FrequencyFactor(ChunkPhase::kPrefill, false, 1600000), 1.25);
  EXPECT_DOUBLE_EQ(c.FrequencyFactor(ChunkPhase::kDecode, true, 500000), 1.5);
  // No cap, cap at/above nominal, unknown nominal: no effect.
  EXPECT_EQ(c.FrequencyFactor(ChunkPhase::kPrefill, false, 0), 1.0);
  EXPECT_EQ(c.FrequencyFactor(ChunkPhase::kPrefill, false, 2000000), 1.0);
  EXPECT_EQ(c.FrequencyFactor(ChunkPhase::kPrefill, false, 3000000), 1.0);
  EXPECT_EQ(BaseCost().FrequencyFactor(ChunkPhase::kPrefill, false, 1000000), 1.0);

  runtime::ChunkKnobs k;
  k.threads = 2;
  for (bool eff : {false, true}) {
    for (ChunkPhase ph : {ChunkPhase::kPrefill, ChunkPhase::kDecode}) {
      const double base = c.ChunkSeconds(k, ph, 8, eff);
      EXPECT_EQ(c.ChunkSeconds(k, ph, 8, eff, 0), base);
      EXPECT_NEAR(c.ChunkSeconds(k, ph, 8, eff, 400000), base * c.FrequencyFactor(ph, eff, 400000),
                  kExact * base);
    }
  }
}

TEST(FreqCap, JsonFieldsRoundTripAndDefault) {
  auto m = ParseCostModelJson(CostModelToJson(CapCost()), "rt");
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->nominal_khz_performance, 2000000);
  EXPECT_EQ(m->nominal_khz_efficiency, 1000000);
  EXPECT_EQ(m->freq_sensitivity_decode, 0.5);
  // A file without the fields (the existing format): no nominal, default sensitivities.
  const std::string old_json = CostModelToJson(BaseCost());
  EXPECT_EQ(old_json.find("nominal_khz"), std::string::npos);
  EXPECT_EQ(old_json.find("freq_sensitivity"), std::string::npos);
  auto o = ParseCostModelJson(old_json, "old");
  ASSERT_TRUE(o.has_value()) << o.error().message;
  EXPECT_EQ(o->nominal_khz_performance, 0);
  EXPECT_EQ(o->nominal_khz_efficiency, 0);
  EXPECT_EQ(o->freq_sensitivity_prefill, CostModel::kDefaultFreqSensitivityPrefill);
  EXPECT_EQ(o->freq_sensitivity_decode, CostModel::kDefaultFreqSensitivityDecode);
  auto builtin = BuiltinCostModel();
  ASSERT_TRUE(builtin.has_value()) << builtin.error().message;
  // Only one of the two classes given: the other stays unknown.
  auto half = ParseCostModelJson(
      R"({"format": "ari-sim-cost-1", "nominal_khz": {"performance": 2400000},
          "freq_sensitivity": {"decode": 0.3},
          "entries": [{"precision": "w8a16", "prefill_tps": 10, "decode_tps": 5}]})");
  ASSERT_TRUE(half.has_value()) << half.error().message;
  EXPECT_EQ(half->nominal_khz_performance, 2400000);
  EXPECT_EQ(half->nominal_khz_efficiency, 0);
  EXPECT_EQ(half->freq_sensitivity_prefill, 1.0);
  EXPECT_EQ(half->freq_sensitivity_decode, 0.3);
}

TEST(FreqCap, BadJsonFieldsGiveClearErrors) {
  auto parse = [](const std::string& extra) {
    return ParseCostModelJson(
        R"({"format": "ari-sim-cost-1", )" + extra +
            R"(, "entries": [{"precision": "w8a16", "prefill_tps": 10, "decode_tps": 5}]})",
        "bad.json");
  };
  struct Case {
    std::string extra, expect;
  };
  const std::vector<Case> cases = {
      {R"("nominal_khz": 2000000)", "\"nominal_khz\" must be an object"},
      {R"("nominal_khz": {"big": 2000000})", "unknown key \"big\""},
      {R"("nominal_khz": {"performance": "2GHz"})", "nominal_khz\".performance must be a number"},
      {R"("nominal_khz": {"efficiency": -5})", "nominal_khz values must be in [0"},
      {R"("freq_sensitivity": {"decode": 1.5})", "freq_sensitivity values must be in [0, 1]"},
      {R"("freq_sensitivity": {"prefill": -0.1})", "freq_sensitivity values must be in [0, 1]"},
      {R"("freq_sensitivity": [1, 0.5])", "\"freq_sensitivity\" must be an object"},
      {R"("freq_sensitivity": {"compute": 1})", "expected prefill, decode"},
  };
  for (const Case& c : cases) {
    auto m = parse(c.extra);
    ASSERT_FALSE(m.has_value()) << c.extra;
    EXPECT_NE(m.error().message.find(c.expect), std::string::npos)
        << c.extra << " -> " << m.error().message;
    EXPECT_NE(m.error().message.find("bad.json"), std::string::npos) << m.error().message;
  }
}

// Two identical CRITICAL requests (performance class); the big cluster is capped to
// 1 GHz (half the 2 GHz nominal) at t = 10 s, between them.
constexpr std::string_view kHeaderAndFirst = R"(
  header { ambient_celsius: 25 duration_ms: 20000 }
  event { soc_temperature { celsius: 40 } }
  event { cpu_frequency_cap { clusters { cluster: 0 name: "little" } clusters { cluster: 1 name: "big" } } }
  event { t_ms: 1000 request { request_id: 1 client: "nav" urgency: CRITICAL prompt: "Route home" max_tokens: 16 deadline_ms: 5000 } }
)";
constexpr std::string_view kCap = R"(
  event { t_ms: 10000 cpu_frequency_cap { clusters { cluster: 0 name: "little" } clusters { cluster: 1 name: "big" max_khz: 1000000 } } }
)";
constexpr std::string_view kSecond = R"(
  event { t_ms: 11000 request { request_id: 2 client: "nav" urgency: CRITICAL prompt: "Route home" max_tokens: 16 deadline_ms: 5000 } }
)";

struct RunResult {
  ReplayReport report;
  std::vector<ChunkTrace> chunks;
};

RunResult Replay(const dl::DriveLog& log, const CostModel& cost) {
  const qos::Policy policy = DefaultPolicy();
  RunResult run;
  ReplayOptions o;
  o.policy = &policy;
  o.cost = &cost;
  o.on_chunk = [&run](const ChunkTrace& t) { run.chunks.push_back(t); };
  auto r = ReplayModel(log, o);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  if (r) run.report = std::move(*r);
  return run;
}

TEST(FreqCap, ChunksAfterTheCapTakeLongerByTheFactor) {
  const CostModel cost = CapCost();
  const dl::DriveLog log =
      ParseLog(std::string(kHeaderAndFirst) + std::string(kCap) + std::string(kSecond));
  const RunResult run = Replay(log, cost);
  ASSERT_EQ(run.report.requests.size(), 2u);
  int before = 0, after_prefill = 0, after_decode = 0;
  double capped_busy = 0;
  for (const ChunkTrace& t : run.chunks) {
    ASSERT_FALSE(t.efficiency);  // CRITICAL runs on the performance class
    const double base = cost.ChunkSeconds(t.knobs, t.phase, t.tokens, t.efficiency);
    if (t.t_s < 10.0) {
      ++before;
      EXPECT_EQ(t.cap_khz, 0u);
      EXPECT_EQ(t.seconds, base);
    } else {
      EXPECT_EQ(t.cap_khz, 1000000u);
      // 2 GHz / 1 GHz: prefill x (1 + 1.0 * 1) = 2, decode x (1 + 0.5 * 1) = 1.5.
      const double factor = t.phase == ChunkPhase::kPrefill ? 2.0 : 1.5;
      EXPECT_NEAR(t.seconds, base * factor, kExact * base) << t.t_s;
      (t.phase == ChunkPhase::kPrefill ? after_prefill : after_decode)++;
      capped_busy += t.seconds;
    }
  }
  EXPECT_GT(before, 0);
  EXPECT_GT(after_prefill, 0);
  EXPECT_GT(after_decode, 0);
  const RequestReport& a = run.report.requests[0];
  const RequestReport& b = run.report.requests[1];
  EXPECT_EQ(a.status, "DONE");
  EXPECT_EQ(b.status, "DONE");
  EXPECT_GT(b.completion_s, a.completion_s * 1.4);
  const ReplaySummary& s = run.report.summary;
  EXPECT_NEAR(s.cap_time_s[0], s.duration_s - 10.0, 1e-9);
  EXPECT_EQ(s.cap_time_s[1], 0.0);
  EXPECT_NEAR(s.capped_busy_s[0], capped_busy, 1e-9);
  EXPECT_EQ(s.capped_busy_s[1], 0.0);
  const std::string json = ReportToJson(run.report);
  EXPECT_NE(json.find("\"cap_time_s\":{\"performance\":10,"), std::string::npos);
  EXPECT_NE(ReportToText(run.report).find("time capped: performance 10 s"), std::string::npos);
  // Deterministic.
  EXPECT_EQ(ReportToJson(Replay(log, cost).report), json);
}

TEST(FreqCap, UncappedLogUnchanged) {
  // No cap in force: the cap-aware cost model gives the same bytes as one without
  // nominal frequencies, and no cap keys appear in the report.
  const dl::DriveLog log = ParseLog(std::string(kHeaderAndFirst) + std::string(kSecond));
  const RunResult with = Replay(log, CapCost());
  const RunResult without = Replay(log, BaseCost());
  const std::string json = ReportToJson(with.report);
  EXPECT_EQ(json, ReportToJson(without.report));
  EXPECT_EQ(json.find("cap_time_s"), std::string::npos);
  for (const ChunkTrace& t : with.chunks) EXPECT_EQ(t.cap_khz, 0u);
  // A cap in the log but no nominal frequency in the cost model: same timings.
  const dl::DriveLog capped =
      ParseLog(std::string(kHeaderAndFirst) + std::string(kCap) + std::string(kSecond));
  const RunResult no_nominal = Replay(capped, BaseCost());
  ASSERT_EQ(no_nominal.report.requests.size(), without.report.requests.size());
  for (size_t i = 0; i < without.report.requests.size(); ++i) {
    EXPECT_EQ(no_nominal.report.requests[i].completion_s, without.report.requests[i].completion_s);
  }
  EXPECT_EQ(no_nominal.report.summary.capped_busy_s[0], 0.0);
  EXPECT_GT(no_nominal.report.summary.cap_time_s[0], 0.0);  // the cap was in force
}

TEST(FreqCap, ClustersMapToClassesByNameThenIndex) {
  auto caps = [](std::string_view clusters) {
    const dl::DriveLog log =
        ParseLog(std::string(R"(header { ambient_celsius: 25 duration_ms: 4000 }
      event { t_ms: 1000 cpu_frequency_cap { )") +
                 std::string(clusters) + " } }");
    return Replay(log, CapCost()).report.summary.cap_time_s;
  };
  // Unnamed: index 0 = efficiency, >= 1 = performance.
  auto c = caps("clusters { cluster: 0 max_khz: 500000 }");
  EXPECT_EQ(c[0], 0.0);
  EXPECT_NEAR(c[1], 3.0, 1e-9);
  c = caps("clusters { cluster: 2 max_khz: 500000 }");
  EXPECT_NEAR(c[0], 3.0, 1e-9);
  EXPECT_EQ(c[1], 0.0);
  // Names win over the index.
  c = caps("clusters { cluster: 1 name: \"little\" max_khz: 500000 }");
  EXPECT_EQ(c[0], 0.0);
  EXPECT_NEAR(c[1], 3.0, 1e-9);
  c = caps("clusters { cluster: 0 name: \"BIG\" max_khz: 500000 }");
  EXPECT_NEAR(c[0], 3.0, 1e-9);
  // max_khz 0 = uncapped.
  c = caps("clusters { cluster: 1 name: \"big\" }");
  EXPECT_EQ(c[0], 0.0);
  EXPECT_EQ(c[1], 0.0);
}

}  // namespace
}  // namespace ari::sim
