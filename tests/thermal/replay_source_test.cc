// Replay of CSV traces in virtual time.
#include "thermal/replay_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/common/test_util.h"

namespace ari::thermal {
namespace {

constexpr int64_t kSec = kNsPerSecond;

ReplayTrace MustParse(std::string_view text) {
  auto t = ReplayTrace::Parse(text, "test.csv");
  EXPECT_TRUE(t.has_value()) << t.error().ToString();
  return t.value_or(ReplayTrace{});
}

ReplayOptions Opts(Interpolation mode = Interpolation::kLinear, int64_t max_age_ns = 5 * kSec) {
  ReplayOptions o;
  o.interpolation = mode;
  o.limits.max_age_ns = max_age_ns;
  return o;
}

TEST(ReplayTraceTest, ParsesHeaderCommentsAndAmbient) {
  ReplayTrace t = MustParse(
      "# drive to work\n"
      "time_s,celsius,ambient\r\n"
      "\n"
      "0, 40.0, 20\n"
      "1.5,42.5,21\n"
      "3,nan,22\n"
      "4,,22\n");
  ASSERT_EQ(t.points().size(), 4u);
  EXPECT_TRUE(t.has_ambient());
  EXPECT_DOUBLE_EQ(t.points()[1].time_s, 1.5);
  EXPECT_DOUBLE_EQ(t.points()[1].ambient, 21);
  EXPECT_TRUE(std::isnan(t.points()[2].celsius));
  EXPECT_FALSE(t.points()[3].present);
  EXPECT_DOUBLE_EQ(t.duration_s(), 4.0);
}

TEST(ReplayTraceTest, BadLinesNameTheLine) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"0,40\n1,41\nx,42\n", "test.csv:3:"},
      {"0,40\n# c\n\n0.5,abc\n", "test.csv:4:"},
      {"0,40\n2,41\n1,42\n", "test.csv:3:"},         // time goes back
      {"0,40,20\n1,41\n", "test.csv:2:"},            // column count changes
      {"0,40\n1,41,2,3\n", "test.csv:2:"},           // too many fields
      {"time_s,temp\n0,40\n", "test.csv:1:"},        // bad header
      {"-1,40\n", "test.csv:1:"},                    // negative time
      {"0,40,hot\n", "test.csv:1:"},                 // bad ambient
      {"0,40\n1,41\n2,42\n3,4 3\n", "test.csv:4:"},  // junk inside a number
  };
  for (const auto& c : cases) {
    auto t = ReplayTrace::Parse(c.text, "test.csv");
    ASSERT_FALSE(t.has_value()) << c.text;
    EXPECT_EQ(t.error().code, ErrorCode::kFormat);
    EXPECT_NE(t.error().message.find(c.needle), std::string::npos)
        << c.text << " -> " << t.error().message;
  }
  EXPECT_FALSE(ReplayTrace::Parse("# only a comment\n").has_value());
}

TEST(ReplayTraceTest, LoadFromFile) {
  const auto path = ari::testing::TempDir("thermal_replay") / "trace.csv";
  std::ofstream(path) << "time_s,celsius\n0,30\n10,40\n";
  auto t = ReplayTrace::Load(path);
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_EQ(t->points().size(), 2u);
  std::ofstream(path) << "0,30\n10,oops\n";
  auto bad = ReplayTrace::Load(path);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("trace.csv:2:"), std::string::npos);
  EXPECT_EQ(ReplayTrace::Load(path.string() + ".missing").error().code, ErrorCode::kIo);
}

TEST(ReplaySourceTest, LinearInterpolation) {
  ManualClock clock(100 * kSec);
  ReplaySource src(MustParse("0,40\n2,50\n4,46\n"), clock, clock.NowNs(), Opts());
  EXPECT_DOUBLE_EQ(src.Read().celsius, 40.0);
  clock.AdvanceSeconds(0.5);
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_NEAR(r.celsius, 42.5, 1e-9);
  EXPECT_EQ(r.time_ns, clock.NowNs());
  clock.AdvanceSeconds(2.5);  // t = 3
  EXPECT_NEAR(src.Read().celsius, 48.0, 1e-9);
  EXPECT_EQ(src.Read().source, "replay");
}

TEST(ReplaySourceTest, StepMode) {
  ManualClock clock;
  ReplaySource src(MustParse("0,40\n2,50\n"), clock, 0, Opts(Interpolation::kStep));
  clock.AdvanceSeconds(1.9);
  Reading r = src.Read();
  EXPECT_DOUBLE_EQ(r.celsius, 40.0);
  EXPECT_EQ(r.time_ns, 0);  // held value measured at t = 0
  clock.AdvanceSeconds(0.1);
  EXPECT_DOUBLE_EQ(src.Read().celsius, 50.0);
}

TEST(ReplaySourceTest, BeforeStartEndAndGaps) {
  ManualClock clock;
  // Starts at t=1; gap 2 -> 20 is longer than max_age (5 s): held, then stale.
  ReplaySource src(MustParse("1,40\n2,41\n20,60\n"), clock, 0, Opts());
  EXPECT_EQ(src.Read().state, SensorState::kNoSensor);
  clock.SetNs(2 * kSec + kSec / 2);
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 41.0);  // not interpolated across the gap
  clock.SetNs(8 * kSec);
  r = src.Read();
  EXPECT_EQ(r.state, SensorState::kStale);
  EXPECT_DOUBLE_EQ(r.celsius, 41.0);
  clock.SetNs(20 * kSec);
  EXPECT_EQ(src.Read().state, SensorState::kOk);
  clock.SetNs(24 * kSec);
  EXPECT_EQ(src.Read().state, SensorState::kOk);  // end of trace, still young
  clock.SetNs(26 * kSec);
  EXPECT_EQ(src.Read().state, SensorState::kStale);  // trace ended
}

TEST(ReplaySourceTest, FaultInjection) {
  ManualClock clock;
  ReplaySource src(MustParse("0,40\n1,nan\n2,-273\n3,200\n4,\n5,45\n"), clock, 0,
                   Opts(Interpolation::kLinear));
  EXPECT_EQ(src.Read().state, SensorState::kOk);
  for (int t = 1; t <= 3; ++t) {
    clock.SetNs(t * kSec);
    Reading r = src.Read();
    EXPECT_EQ(r.state, SensorState::kInvalid) << t;
    EXPECT_DOUBLE_EQ(r.celsius, 40.0) << t;
  }
  clock.SetNs(4 * kSec);
  EXPECT_EQ(src.Read().state, SensorState::kVanished);
  clock.SetNs(5 * kSec);
  EXPECT_EQ(src.Read().state, SensorState::kOk);
  // The segment 0..1 interpolates toward NaN? No: it holds 40.
  ManualClock c2;
  ReplaySource s2(MustParse("0,40\n1,nan\n"), c2, 0, Opts());
  c2.SetNs(kSec / 2);
  EXPECT_DOUBLE_EQ(s2.Read().celsius, 40.0);
  // A trace that starts silent never answered: kNoSensor.
  ManualClock c3;
  ReplaySource s3(MustParse("0,\n1,50\n"), c3, 0, Opts());
  EXPECT_EQ(s3.Read().state, SensorState::kNoSensor);
}

TEST(ReplaySourceTest, LoopAndAmbient) {
  ManualClock clock;
  ReplayOptions o = Opts(Interpolation::kLinear, 20 * kSec);  // samples 10 s apart
  o.loop = true;
  o.label = "replay:loop";
  ReplaySource src(MustParse("0,40,10\n10,60,30\n"), clock, 0, o);
  clock.SetNs(5 * kSec);
  EXPECT_NEAR(src.Read().celsius, 50.0, 1e-9);
  EXPECT_NEAR(src.AmbientNow(), 20.0, 1e-9);
  clock.SetNs(12 * kSec);  // wraps to t = 2
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_NEAR(r.celsius, 44.0, 1e-9);
  EXPECT_EQ(r.source, "replay:loop");
  EXPECT_NEAR(src.TraceTime(12 * kSec), 2.0, 1e-12);
}

TEST(ReplayTraceTest, FromPointsValidates) {
  std::vector<TracePoint> pts = {{0, 40, true, 20}, {1, 41, true, 20}};
  EXPECT_TRUE(ReplayTrace::FromPoints(pts, true).has_value());
  pts[1].time_s = 0;
  auto bad = ReplayTrace::FromPoints(pts, true);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(ReplayTrace::FromPoints({}, false).has_value());
}

}  // namespace
}  // namespace ari::thermal
