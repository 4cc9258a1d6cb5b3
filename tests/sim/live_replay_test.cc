// Live-mode replay end to end: a hand-written text log (requests of two classes, a SoC
// temperature ramp) replayed against a real ari-node started here (own domain id,
// loopback config, sensor kind SENSOR_DDS_REPLAY, stories260K).
#include "sim/live_replay.h"

#include <gtest/gtest.h>

#include "sim/drive_log.h"
#include "sim/report.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

using namespace std::chrono_literals;

// Time-scaled by 2 in the test: 9 s of log in ~4.5 s. The governor's band dwell times
// are real time: normal holds >= 2 s from the first reading (at the first request), so
// the jump to 90 C at 3 s of log (1.5 s wall) takes effect by request 3 at 8 s of log.
constexpr char kLog[] = R"(
header { scenario: "live-test" ambient_celsius: 30 duration_ms: 9000 }
event { ambient_temperature { celsius: 30 } }
event { soc_temperature { celsius: 45 sensor: "soc-die" } }
event { memory_available { bytes: 2000000000 } }
event { t_ms: 1000 request { request_id: 1 client: "nav" urgency: CRITICAL prompt: "Once upon a time" max_tokens: 12 deadline_ms: 10000 category: NAVIGATION } }
event { t_ms: 1200 request { request_id: 2 client: "assistant" urgency: NORMAL prompt: "Tell me a story about a cat" max_tokens: 20 category: CHAT } }
event { t_ms: 1500 soc_temperature { celsius: 60 } }
event { t_ms: 2000 cpu_frequency_cap { clusters { cluster: 1 name: "big" max_khz: 1600000 } } }
event { t_ms: 3000 soc_temperature { celsius: 90 } }
event { t_ms: 5000 soc_temperature { celsius: 90.5 } }
event { t_ms: 8000 request { request_id: 3 client: "nav" urgency: CRITICAL prompt: "The little dog" max_tokens: 12 deadline_ms: 10000 category: NAVIGATION } }
event { t_ms: 8200 request { request_id: 4 client: "assistant" urgency: NORMAL prompt: "Lily went to the park" max_tokens: 20 category: CHAT } }
)";

TEST(LiveReplay, RampedLogAgainstRealNode) {
  const auto dir = TempDir("live_replay");
  const auto model = Stories260K(dir);
  if (model.empty()) {
    GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  }
  // The node runs the plain GGUF on the fp32 reference path (asked for: reference_path), so
  // the test checks a node that cannot switch precision reports so, chunk by chunk.
  auto cfg = WriteNodeConfig(dir, model, "reference_path: true\n");
  {
    std::ifstream in(cfg);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const std::string from = "sensor { kind: SENSOR_NONE }";
    text.replace(text.find(from), from.size(), "sensor { kind: SENSOR_DDS_REPLAY }");
    std::ofstream(cfg) << text;
  }
  NodeProcess node;
  ASSERT_TRUE(node.Start(cfg, dir / "node.log"));

  auto log = sim::ParseDriveLogText(kLog, "inline");
  ASSERT_TRUE(log.has_value()) << log.error().message;
  auto policy = qos::ParsePolicyText(DefaultPolicyWith(), "policy");
  ASSERT_TRUE(policy.has_value());
  sim::LiveReplayOptions o;
  o.policy = &*policy;
  o.domain.domain_id = static_cast<uint32_t>(TestDomainId());
  o.domain.config = LoopbackConfigUri();
  o.time_scale = 2;
  o.sample_period_ms = 500;
  o.drain_timeout = 30s;
  auto report = sim::ReplayLive(*log, o);
  ASSERT_TRUE(report.has_value()) << report.error().message << "\n" << node.Log();
  EXPECT_EQ(node.Stop(SIGTERM), 0) << node.Log();

  // Every request got exactly one terminal chunk, recorded in the report.
  ASSERT_EQ(report->requests.size(), 4u);
  for (const auto& r : report->requests) {
    SCOPED_TRACE("request " + std::to_string(r.id));
    ASSERT_FALSE(r.chunk_log.empty());
    int terminals = 0;
    for (const auto& c : r.chunk_log) terminals += c.terminal;
    EXPECT_EQ(terminals, 1);
    EXPECT_TRUE(r.chunk_log.back().terminal);
    EXPECT_EQ(r.status, "DONE") << r.message;
    EXPECT_GT(r.tokens, 0);
    EXPECT_GE(r.ttft_s, 0);
    EXPECT_GE(r.completion_s, r.ttft_s);
    for (size_t i = 0; i < r.chunk_log.size(); ++i) EXPECT_EQ(r.chunk_log[i].seq, i);
  }
  EXPECT_EQ(report->Class(qos::Urgency::kCritical).requests, 2);
  EXPECT_EQ(report->Class(qos::Urgency::kNormal).requests, 2);

  // The node used the replayed temperature: its status reported 90 C and the hot band,
  // and request 3 (after the ramp) ran with the hot band's CRITICAL knobs.
  const int hot = policy->ThermalBandIndex("hot");
  bool hot_sample = false;
  for (const auto& s : report->samples) hot_sample |= s.die_c >= 89.9 && s.band == hot;
  EXPECT_TRUE(hot_sample) << sim::ReportToJson(*report);
  EXPECT_GE(report->summary.peak_die_c, 89.9);
  // The chunk texts of CRITICAL's knobs in the hot and the normal band (from the policy
  // file, so a retuned default policy does not break the test).
  auto chunk_text = [&](size_t band) {
    const qos::Knobs& k = policy->KnobsFor(qos::Urgency::kCritical, band);
    return "chunk " + std::to_string(k.prefill_chunk) + "/" +
           std::to_string(k.decode_tokens_per_chunk) + ", pause " + std::to_string(k.pause_ms) +
           " ms";
  };
  const std::string hot_text = chunk_text(static_cast<size_t>(hot)), normal_text = chunk_text(0);
  ASSERT_NE(hot_text, normal_text);
  bool hot_knobs = false;
  for (const auto& c : report->requests[2].chunk_log) {
    hot_knobs |= c.decision.find(hot_text) != std::string::npos;
  }
  EXPECT_TRUE(hot_knobs) << hot_text << "\n" << node.Log();
  const auto& first = report->requests[0].chunk_log;
  EXPECT_NE(first.front().decision.find(normal_text), std::string::npos)  // normal band then
      << first.front().decision;

  // What ran, per chunk: the node serves a plain GGUF, so every chunk with tokens ran the
  // fp32 reference path, whatever precision the policy decided, and the summary counts
  // its tokens from what ran (not from the decision text); nothing says W4A8.
  int64_t traced_tokens = 0;
  for (const auto& r : report->requests) {
    for (const auto& c : r.chunk_log) {
      if (c.terminal) {
        EXPECT_FALSE(c.has_trace);
        continue;
      }
      ASSERT_TRUE(c.has_trace);
      EXPECT_EQ(c.ran_precision, "fp32-reference");
      EXPECT_EQ(c.ran_threads, 1);
      EXPECT_NE(c.ran_cpus, 0u);
      EXPECT_EQ(c.ran_cpus & ~c.decided_cpus, 0u);
      EXPECT_EQ(c.pin_failures, 0);
      EXPECT_EQ(c.decision.find("W4A8"), std::string::npos) << c.decision;
      traced_tokens += c.tokens;
    }
  }
  EXPECT_GT(traced_tokens, 0);
  EXPECT_EQ(report->summary.reference_tokens, traced_tokens);
  EXPECT_EQ(report->summary.precision_tokens[0] + report->summary.precision_tokens[1], 0);
  EXPECT_EQ(node.Log().find("W4A8"), std::string::npos) << node.Log();
  EXPECT_NE(node.Log().find("| ran fp32-reference"), std::string::npos) << node.Log();

  // The report (same format as model mode) carries the per-chunk records.
  const std::string json = sim::ReportToJson(*report);
  EXPECT_NE(json.find("\"mode\":\"live\""), std::string::npos);
  EXPECT_NE(json.find("\"chunk_log\":[{"), std::string::npos);
  EXPECT_NE(json.find("\"ran\":{\"precision\":\"fp32-reference\""), std::string::npos);
  EXPECT_EQ(json.find("nan"), std::string::npos);
  EXPECT_NE(sim::ReportToHtml(*report).find("<canvas"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
