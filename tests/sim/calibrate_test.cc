// Calibration error computation (model vs live) against hand-computed numbers.
#include "sim/calibrate.h"

#include <gtest/gtest.h>

namespace ari::sim {
namespace {

RequestReport Req(uint64_t id, const char* cls, double ttft, double completion, int tokens,
                  const char* status = "DONE") {
  RequestReport r;
  r.id = id;
  r.urgency = cls;
  r.ttft_s = ttft;
  r.completion_s = completion;
  r.tokens = tokens;
  r.status = status;
  return r;
}

TEST(Calibrate, DecodeTps) {
  EXPECT_DOUBLE_EQ(DecodeTps(Req(1, "NORMAL", 0.5, 2.5, 21)), 10.0);  // 20 tokens in 2 s
  EXPECT_EQ(DecodeTps(Req(1, "NORMAL", 0.5, 2.5, 1)), -1);            // one token: no rate
  EXPECT_EQ(DecodeTps(Req(1, "NORMAL", 0.5, 2.5, 21, "DEADLINE_MISSED")), -1);
  EXPECT_EQ(DecodeTps(Req(1, "NORMAL", -1, 2.5, 21)), -1);
  EXPECT_EQ(DecodeTps(Req(1, "NORMAL", 0.5, 0.5, 21)), -1);
}

TEST(Calibrate, ErrorsPerClassAgainstHandComputedNumbers) {
  ReplayReport live, model;
  // CRITICAL: live TTFT 0.2 and 0.4 (mean 0.3); model 0.24 and 0.42 (mean 0.33):
  // error 0.33 / 0.3 - 1 = +0.10.
  // Decode: live (9 tokens / 1 s = 9, 9 / 0.5 = 18) mean 13.5; model (9 / 0.9 = 10,
  // 9 / 0.6 = 15) mean 12.5: error 12.5 / 13.5 - 1 = -0.0740741.
  live.requests = {Req(1, "CRITICAL", 0.2, 1.2, 10), Req(2, "CRITICAL", 0.4, 0.9, 10)};
  model.requests = {Req(1, "CRITICAL", 0.24, 1.14, 10), Req(2, "CRITICAL", 0.42, 1.02, 10)};
  // NORMAL: one request, live TTFT 1.0 decode 20 tok/s (21 tokens in 1 s); model TTFT
  // 0.8 (-20 %), decode 21 tokens in 0.8 s = 25 tok/s (+25 %).
  live.requests.push_back(Req(3, "NORMAL", 1.0, 2.0, 21));
  model.requests.push_back(Req(3, "NORMAL", 0.8, 1.6, 21));
  // Not in the model report: ignored. Live without a terminal: no TTFT, no decode.
  live.requests.push_back(Req(9, "NORMAL", 0.1, 0.2, 5));
  live.requests.push_back(Req(4, "HIGH", -1, -1, 0, "NO_TERMINAL"));
  model.requests.push_back(Req(4, "HIGH", 0.3, 1.0, 8));

  const Calibration c = CompareReports(live, model, 0.15);
  EXPECT_EQ(c.matched, 4);
  ASSERT_EQ(c.classes.size(), 4u);
  const ClassCalibration& crit = c.classes[0];
  EXPECT_EQ(crit.urgency, "CRITICAL");
  EXPECT_EQ(crit.ttft_n, 2);
  EXPECT_NEAR(crit.live_ttft_s, 0.3, 1e-12);
  EXPECT_NEAR(crit.model_ttft_s, 0.33, 1e-12);
  EXPECT_NEAR(crit.ttft_error, 0.10, 1e-9);
  EXPECT_EQ(crit.decode_n, 2);
  EXPECT_NEAR(crit.live_decode_tps, 13.5, 1e-9);
  EXPECT_NEAR(crit.model_decode_tps, 12.5, 1e-9);
  EXPECT_NEAR(crit.decode_error, 12.5 / 13.5 - 1, 1e-9);
  EXPECT_TRUE(crit.within_goal);  // |+10 %| and |-7.4 %| <= 15 %

  const ClassCalibration& high = c.classes[1];
  EXPECT_EQ(high.ttft_n, 0);
  EXPECT_EQ(high.decode_n, 0);
  EXPECT_TRUE(high.within_goal);  // no data: does not count

  const ClassCalibration& normal = c.classes[2];
  EXPECT_EQ(normal.ttft_n, 1);
  EXPECT_NEAR(normal.ttft_error, -0.2, 1e-9);
  EXPECT_NEAR(normal.live_decode_tps, 20, 1e-9);
  EXPECT_NEAR(normal.model_decode_tps, 25, 1e-9);
  EXPECT_NEAR(normal.decode_error, 0.25, 1e-9);
  EXPECT_FALSE(normal.within_goal);
  EXPECT_FALSE(c.within_goal);

  const std::string text = CalibrationToText(c);
  EXPECT_NE(text.find("-20.0 %"), std::string::npos) << text;
  EXPECT_NE(text.find("+25.0 %"), std::string::npos) << text;
  const std::string json = CalibrationToJson(c);
  EXPECT_NE(json.find("\"within_goal\":false"), std::string::npos);
  EXPECT_NE(json.find("\"ttft_error\":-0.2"), std::string::npos) << json;
}

TEST(Calibrate, WithMeasuredTokensSetsMaxTokens) {
  dl::DriveLog log;
  auto* e = log.add_event();
  e->mutable_request()->set_request_id(7);
  e->mutable_request()->set_max_tokens(64);
  auto* f = log.add_event();
  f->mutable_request()->set_request_id(8);
  f->mutable_request()->set_max_tokens(64);
  ReplayReport live;
  live.requests = {Req(7, "NORMAL", 0.1, 0.5, 23), Req(8, "NORMAL", -1, -1, 0, "NO_TERMINAL")};
  const dl::DriveLog out = WithMeasuredTokens(log, live);
  EXPECT_EQ(out.event(0).request().max_tokens(), 23u);
  EXPECT_EQ(out.event(1).request().max_tokens(), 64u);  // nothing measured: unchanged
}

}  // namespace
}  // namespace ari::sim
