// ari-tune's quality term from a measured quality table (sim/quality_table.h): parsing,
// the per-token loss, and a tuning objective that changes when the table changes.
#include "sim/quality_table.h"

#include <gtest/gtest.h>

#include "sim/replay.h"
#include "sim/tune.h"
#include "tests/sim/sim_test_util.h"

namespace ari::sim {
namespace {

std::string Table(double w8_d0, double w8_d1, double w4_d0, double w4_d1) {
  auto row = [](const char* p, int d, double a) {
    return std::string("{\"precision\": \"") + p + "\", \"drop\": " + std::to_string(d) +
           ", \"blocks\": [], \"perplexity\": 5, \"mean_nll\": 1.6, \"top1_agreement\": " +
           std::to_string(a) + "}";
  };
  return "{\"format\": \"ari-quality-table-1\", \"model\": \"m.pack.gguf\", \"agreement_with\": "
         "\"fp32\", \"rows\": [" +
         row("w8a16", 0, w8_d0) + ", " + row("w8a16", 1, w8_d1) + ", " + row("w4a8", 0, w4_d0) +
         ", " + row("w4a8", 1, w4_d1) + "]}";
}

TEST(QualityTable, ParsesLossPerPrecisionAndDrop) {
  auto t = ParseQualityTableJson(Table(0.99, 0.5, 0.8, 0.4));
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ(t->model, "m.pack.gguf");
  EXPECT_NEAR(t->Loss(runtime::Precision::kW8A16, 0), 0.01, 1e-12);
  EXPECT_NEAR(t->Loss(runtime::Precision::kW4A8, 0), 0.2, 1e-12);
  EXPECT_NEAR(t->Loss(runtime::Precision::kW4A8, 1), 0.6, 1e-12);
  EXPECT_NEAR(t->Loss(runtime::Precision::kW4A8, 7), 0.6, 1e-12);  // past the end: the last
}

TEST(QualityTable, RefusesWhatIsNotATable) {
  EXPECT_FALSE(ParseQualityTableJson("{oops").has_value());
  auto no_format = ParseQualityTableJson(R"({"rows": []})", "q.json");
  ASSERT_FALSE(no_format.has_value());
  EXPECT_NE(no_format.error().message.find("q.json"), std::string::npos);
  EXPECT_NE(no_format.error().message.find("ari-ppl"), std::string::npos);
  // A gap (W4A8 has no drop 0) and a bad agreement.
  EXPECT_FALSE(ParseQualityTableJson(R"({"format": "ari-quality-table-1", "rows": [
      {"precision": "w8a16", "drop": 0, "top1_agreement": 1},
      {"precision": "w4a8", "drop": 1, "top1_agreement": 0.5}]})")
                   .has_value());
  EXPECT_FALSE(ParseQualityTableJson(R"({"format": "ari-quality-table-1", "rows": [
      {"precision": "w8a16", "drop": 0, "top1_agreement": 1.5},
      {"precision": "w4a8", "drop": 0, "top1_agreement": 0.5}]})")
                   .has_value());
  EXPECT_FALSE(LoadQualityTable("/nonexistent/q.json").has_value());
}

TEST(QualityTable, LossSumsTokensAtTheirPrecisionAndDrop) {
  ReplaySummary s;
  s.precision_tokens = {100, 50};
  s.drop_tokens = {120, 30};
  s.precision_drop_tokens[0] = {90, 10};  // W8A16: 90 at drop 0, 10 at drop 1
  s.precision_drop_tokens[1] = {30, 20};
  auto t = ParseQualityTableJson(Table(0.99, 0.5, 0.8, 0.4));
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(QualityLoss(s, &*t), 90 * 0.01 + 10 * 0.5 + 30 * 0.2 + 20 * 0.6, 1e-9);
  EXPECT_NEAR(QualityLoss(s, nullptr), 50 + 0.1 * 30, 1e-9);  // the proxy
}

// The tuner's objective follows the table: the same policy on the same log scores
// differently when W4A8 is measured cheap or costly.
TEST(QualityTable, TuneObjectiveChangesWithTheTable) {
  std::string text = "header { ambient_celsius: 25 duration_ms: 30000 }\n";
  for (int i = 0; i < 3; ++i) {
    text += "event { t_ms: " + std::to_string(1000 + 8000 * i) +
            " request { request_id: " + std::to_string(i + 1) +
            " client: \"nav\" urgency: CRITICAL prompt: \"Route home\" max_tokens: 16 } }\n";
  }
  auto log = ParseDriveLogText(text);
  ASSERT_TRUE(log.has_value()) << log.error().message;
  qos::Policy p = testing::DefaultPolicy();
  ASSERT_TRUE(ApplyTuneParam(p, "knobs.CRITICAL.*.precision", "W4A8").has_value());
  auto cost = BuiltinCostModel();
  ASSERT_TRUE(cost.has_value());
  const std::vector<const dl::DriveLog*> logs = {&*log};
  auto cheap = ParseQualityTableJson(Table(0.99, 0.5, 0.95, 0.4));
  auto costly = ParseQualityTableJson(Table(0.99, 0.5, 0.30, 0.2));
  ASSERT_TRUE(cheap && costly);
  auto a = ScorePolicy(p, logs, *cost, 0, &*cheap);
  auto b = ScorePolicy(p, logs, *cost, 0, &*costly);
  auto proxy = ScorePolicy(p, logs, *cost, 0);
  ASSERT_TRUE(a && b && proxy);
  EXPECT_NEAR(a->quality_loss, 0.05, 1e-6);  // every token at W4A8, no drop
  EXPECT_NEAR(b->quality_loss, 0.70, 1e-6);
  EXPECT_NEAR(proxy->quality_loss, 1.0, 1e-6);  // the proxy: share of W4A8 tokens
  EXPECT_TRUE(a->BetterThan(*b, 0));
}

}  // namespace
}  // namespace ari::sim
