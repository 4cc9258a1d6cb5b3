// Model-mode replay: hand-computed timings, determinism, thermal coupling, accounting.
#include "sim/replay.h"

#include <gtest/gtest.h>

#include "sim/report.h"
#include "sim/scenarios.h"
#include "tests/common/test_util.h"
#include "tests/sim/sim_test_util.h"

namespace ari::sim {
namespace {

using testing::DefaultPolicy;
using testing::ParseLog;
using testing::SimpleCost;

TEST(Replay, OneCriticalRequestMatchesHandComputedTimes) {
  // "Route home" = 10 bytes -> 3 + 8 = 11 prompt tokens. CRITICAL, band normal:
  // perf x2, W8A16, chunk 64/8. Prefill 11 / 100 = 0.11 s; decode 16 tokens in two
  // chunks of 8 at 10 tok/s = 0.8 s each. TTFT 0.91 s, completion 1.71 s.
  const dl::DriveLog log = ParseLog(R"(
    header { scenario: "" ambient_celsius: 25 duration_ms: 10000 }
    event { soc_temperature { celsius: 40 } }
    event { t_ms: 1000 request { request_id: 1 client: "nav" urgency: CRITICAL prompt: "Route home" max_tokens: 16 deadline_ms: 3000 } }
  )");
  const qos::Policy policy = DefaultPolicy();
  const CostModel cost = SimpleCost();
  ReplayOptions o;
  o.policy = &policy;
  o.cost = &cost;
  auto r = ReplayModel(log, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->requests.size(), 1u);
  const RequestReport& q = r->requests[0];
  EXPECT_EQ(q.status, "DONE");
  EXPECT_EQ(q.prompt_tokens, 11);
  EXPECT_EQ(q.tokens, 16);
  EXPECT_EQ(q.chunks, 3);
  constexpr double kTol = 1e-6;
  EXPECT_NEAR(q.queue_wait_s, 0.0, kTol);
  EXPECT_NEAR(q.ttft_s, 0.91, kTol);
  EXPECT_NEAR(q.completion_s, 1.71, kTol);
  EXPECT_FALSE(q.deadline_missed);
  EXPECT_NEAR(r->summary.busy_s, 1.71, kTol);
  EXPECT_EQ(r->summary.precision_tokens[0], 11 + 16);
  EXPECT_NEAR(r->summary.duration_s, 10.0, kTol);
  double band_total = 0;
  for (double t : r->summary.band_time_s) band_total += t;
  EXPECT_NEAR(band_total, r->summary.duration_s, 1e-6);
  ASSERT_FALSE(q.decisions.empty());
  EXPECT_NE(q.decisions[0].knobs.find("W8A16"), std::string::npos);
  // Energy: idle power all along plus 2 busy W8A16 performance cores for 1.71 s.
  const thermal::RcParams rc;
  EXPECT_NEAR(r->summary.energy_j, rc.idle_power_w * 10.0 + 2 * rc.w8a16_power_per_core_w * 1.71,
              1e-6);
  EXPECT_GT(r->summary.peak_die_c, 40.0);
}

// A structured answer (response_format) pays the cost model's mask per decoded token,
// counted in the chunk's compute time, the request's mask_s and the summary.
TEST(Replay, ResponseFormatChargesMaskCost) {
  const char* kLog = R"(
    header { ambient_celsius: 25 duration_ms: 10000 }
    event { t_ms: 0 request { request_id: 1 client: "nav" urgency: CRITICAL prompt: "Take me home" max_tokens: 16 %s } }
  )";
  char with[512], without[512];
  std::snprintf(with, sizeof(with), kLog, "response_format: \"navigation_destination\"");
  std::snprintf(without, sizeof(without), kLog, "");
  const qos::Policy policy = DefaultPolicy();
  CostModel cost = SimpleCost();
  cost.mask_us_per_token = 5000;  // 5 ms per token: visible against 100 ms per token
  ReplayOptions o;
  o.policy = &policy;
  o.cost = &cost;
  auto plain = ReplayModel(ParseLog(without), o);
  auto masked = ReplayModel(ParseLog(with), o);
  ASSERT_TRUE(plain.has_value() && masked.has_value());
  const RequestReport& p = plain->requests[0];
  const RequestReport& m = masked->requests[0];
  EXPECT_EQ(m.response_format, "navigation_destination");
  EXPECT_EQ(p.tokens, 16);
  EXPECT_EQ(m.tokens, 16);
  EXPECT_EQ(plain->summary.masked_tokens, 0);
  EXPECT_EQ(masked->summary.masked_tokens, 16);
  constexpr double kTol = 1e-6;
  EXPECT_NEAR(p.mask_s, 0.0, kTol);
  EXPECT_NEAR(m.mask_s, 16 * 5e-3, kTol);
  EXPECT_NEAR(masked->summary.mask_s, 16 * 5e-3, kTol);
  EXPECT_NEAR(m.completion_s - p.completion_s, 16 * 5e-3, kTol);
  EXPECT_NEAR(masked->summary.busy_s - plain->summary.busy_s, 16 * 5e-3, kTol);
}

TEST(Replay, TightDeadlineIsMissedAndStopped) {
  const dl::DriveLog log = ParseLog(R"(
    header { ambient_celsius: 25 duration_ms: 5000 }
    event { t_ms: 0 request { request_id: 7 client: "nav" urgency: CRITICAL prompt: "Route home" max_tokens: 40 deadline_ms: 1000 } }
  )");
  const qos::Policy policy = DefaultPolicy();
  const CostModel cost = SimpleCost();
  ReplayOptions o;
  o.policy = &policy;
  o.cost = &cost;
  auto r = ReplayModel(log, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->requests[0].status, "DEADLINE_MISSED");  // CRITICAL: deadline_miss STOP
  EXPECT_TRUE(r->requests[0].deadline_missed);
  EXPECT_EQ(r->Class(qos::Urgency::kCritical).deadline_misses, 1);
}

TEST(Replay, PreemptionServesCriticalFirst) {
  // A long NORMAL answer is running when a CRITICAL request arrives: the CRITICAL one
  // waits at most one NORMAL chunk.
  const dl::DriveLog log = ParseLog(R"(
    header { ambient_celsius: 25 duration_ms: 60000 }
    event { t_ms: 0 request { request_id: 1 client: "chat" urgency: NORMAL prompt: "Tell me a long story about the sea" max_tokens: 200 } }
    event { t_ms: 3000 request { request_id: 2 client: "nav" urgency: CRITICAL prompt: "Route home" max_tokens: 8 deadline_ms: 3000 } }
  )");
  const qos::Policy policy = DefaultPolicy();
  const CostModel cost = SimpleCost();
  ReplayOptions o;
  o.policy = &policy;
  o.cost = &cost;
  auto r = ReplayModel(log, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const RequestReport& crit = r->requests[1];
  EXPECT_EQ(crit.status, "DONE");
  // NORMAL decode chunk: 8 tokens at 20 tok/s x 0.5 (efficiency) = 0.8 s at most.
  EXPECT_LE(crit.queue_wait_s, 0.8 + 1e-6);
  EXPECT_LT(crit.completion_s, r->requests[0].completion_s);
  EXPECT_EQ(r->requests[0].status, "DONE");
}

TEST(Replay, DeterministicAndHeatsUnderLoad) {
  ScenarioOptions so;
  so.scenario = "summer-heat-soak";
  so.duration_ms = uint64_t{10} * 60 * 1000;
  so.seed = 3;
  auto log = GenerateScenario(so);
  ASSERT_TRUE(log.has_value()) << log.error().message;
  const qos::Policy policy = DefaultPolicy();
  const CostModel cost = SimpleCost();
  ReplayOptions o;
  o.policy = &policy;
  o.cost = &cost;
  auto a = ReplayModel(*log, o);
  auto b = ReplayModel(*log, o);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(ReportToJson(*a), ReportToJson(*b));
  EXPECT_GT(a->requests.size(), 10u);
  EXPECT_GE(a->summary.duration_s, 600.0);
  EXPECT_EQ(a->samples.size(), b->samples.size());
  EXPECT_GE(a->samples.size(), 600u);
  // Starts at the log's soaked 55 C; the die never cools below the 45 C ambient.
  EXPECT_NEAR(a->samples.front().die_c, 55.0, 0.5);
  for (const Sample& s : a->samples) EXPECT_GT(s.die_c, 44.0);
  EXPECT_GE(a->summary.peak_die_c, 55.0);
  int answered = 0;
  for (const RequestReport& q : a->requests) answered += q.status.empty() ? 0 : 1;
  EXPECT_EQ(answered, static_cast<int>(a->requests.size()));  // every request has an end
}

TEST(Replay, RejectsMissingInputs) {
  ReplayOptions o;
  EXPECT_FALSE(ReplayModel(dl::DriveLog{}, o).has_value());
}

}  // namespace
}  // namespace ari::sim
