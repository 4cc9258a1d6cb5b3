// ReadingValidator rules, CombineHottest, clocks and names.
#include "thermal/source.h"

#include <gtest/gtest.h>

#include <cmath>

#include "thermal/clock.h"
#include "thermal/error.h"

namespace ari::thermal {
namespace {

constexpr int64_t kSec = kNsPerSecond;

TEST(SensorStateNameTest, AllStatesNamed) {
  EXPECT_EQ(SensorStateName(SensorState::kOk), "ok");
  EXPECT_EQ(SensorStateName(SensorState::kNoSensor), "no_sensor");
  EXPECT_EQ(SensorStateName(SensorState::kVanished), "vanished");
  EXPECT_EQ(SensorStateName(SensorState::kStale), "stale");
  EXPECT_EQ(SensorStateName(SensorState::kInvalid), "invalid");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kFormat), "format");
  EXPECT_EQ((Error{ErrorCode::kIo, "x"}).ToString(), "io: x");
}

TEST(ManualClockTest, MovesOnlyForward) {
  ManualClock clock(5);
  EXPECT_EQ(clock.NowNs(), 5);
  EXPECT_EQ(clock.AdvanceNs(10), 15);
  EXPECT_EQ(clock.AdvanceNs(-3), 15);
  EXPECT_EQ(clock.AdvanceSeconds(1.5), 15 + 1'500'000'000);
  EXPECT_FALSE(clock.SetNs(0));
  EXPECT_TRUE(clock.SetNs(4 * kSec));
  EXPECT_EQ(clock.NowNs(), 4 * kSec);
}

TEST(SteadyClockTest, Monotonic) {
  const int64_t a = SteadyClock::Instance().NowNs();
  const int64_t b = SteadyClock::Instance().NowNs();
  EXPECT_LE(a, b);
}

TEST(ReadingValidatorTest, GoodValue) {
  ReadingValidator v;
  Validated r = v.Observe(RawStatus::kValue, 55.5, 10, 10);
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 55.5);
  EXPECT_EQ(r.time_ns, 10);
}

TEST(ReadingValidatorTest, InvalidValuesKeepLastGood) {
  ReadingValidator v;
  v.Observe(RawStatus::kValue, 60.0, 1, 1);
  for (double bad : {std::nan(""), -273.0, 200.0, -40.5, 150.5, double{INFINITY}}) {
    Validated r = v.Observe(RawStatus::kValue, bad, 2, 2);
    EXPECT_EQ(r.state, SensorState::kInvalid) << bad;
    EXPECT_DOUBLE_EQ(r.celsius, 60.0) << bad;
    EXPECT_EQ(r.time_ns, 1);
  }
  // Limits are inclusive.
  EXPECT_EQ(v.Observe(RawStatus::kValue, -40.0, 3, 3).state, SensorState::kOk);
  EXPECT_EQ(v.Observe(RawStatus::kValue, 150.0, 3, 3).state, SensorState::kOk);
  EXPECT_EQ(v.Observe(RawStatus::kUnreadable, 0, 4, 4).state, SensorState::kInvalid);
}

TEST(ReadingValidatorTest, InvalidWithoutHistoryIsNaN) {
  ReadingValidator v;
  Validated r = v.Observe(RawStatus::kValue, 200.0, 7, 7);
  EXPECT_EQ(r.state, SensorState::kInvalid);
  EXPECT_TRUE(std::isnan(r.celsius));
}

TEST(ReadingValidatorTest, StaleAfterMaxAge) {
  ValidationLimits limits;
  limits.max_age_ns = 2 * kSec;
  ReadingValidator v(limits);
  v.Observe(RawStatus::kValue, 50.0, 0, 0);
  Validated r = v.Observe(RawStatus::kNoNewValue, 0, 0, 2 * kSec);
  EXPECT_EQ(r.state, SensorState::kOk);  // exactly max_age: still fresh
  EXPECT_EQ(r.time_ns, 0);
  r = v.Observe(RawStatus::kNoNewValue, 0, 0, 2 * kSec + 1);
  EXPECT_EQ(r.state, SensorState::kStale);
  EXPECT_DOUBLE_EQ(r.celsius, 50.0);
  // An old sample handed over as a value is stale too.
  r = v.Observe(RawStatus::kValue, 51.0, 1 * kSec, 10 * kSec);
  EXPECT_EQ(r.state, SensorState::kStale);
  // A fresh value recovers.
  EXPECT_EQ(v.Observe(RawStatus::kValue, 52.0, 10 * kSec, 10 * kSec).state, SensorState::kOk);
}

TEST(ReadingValidatorTest, MissingIsNoSensorThenVanished) {
  ReadingValidator v;
  EXPECT_EQ(v.Observe(RawStatus::kMissing, 0, 0, 0).state, SensorState::kNoSensor);
  v.Observe(RawStatus::kValue, 40.0, 1, 1);
  Validated r = v.Observe(RawStatus::kMissing, 0, 2, 2);
  EXPECT_EQ(r.state, SensorState::kVanished);
  EXPECT_DOUBLE_EQ(r.celsius, 40.0);

  ReadingValidator present;
  present.MarkPresent();
  EXPECT_EQ(present.Observe(RawStatus::kMissing, 0, 0, 0).state, SensorState::kVanished);
}

TEST(CombineHottestTest, AllOkPicksHottest) {
  Validated items[3] = {
      {40, SensorState::kOk, 1}, {70, SensorState::kOk, 2}, {55, SensorState::kOk, 3}};
  Validated out;
  EXPECT_EQ(CombineHottest(items, 3, 9, out), 1);
  EXPECT_DOUBLE_EQ(out.celsius, 70);
  EXPECT_EQ(out.state, SensorState::kOk);
}

TEST(CombineHottestTest, AnyFaultWinsButKeepsHottestValue) {
  Validated items[3] = {
      {40, SensorState::kOk, 1}, {70, SensorState::kStale, 2}, {65, SensorState::kVanished, 3}};
  Validated out;
  EXPECT_EQ(CombineHottest(items, 3, 9, out), 2);
  EXPECT_EQ(out.state, SensorState::kVanished);
  EXPECT_DOUBLE_EQ(out.celsius, 70);
  EXPECT_EQ(CombineHottest(items, 0, 9, out), -1);
  EXPECT_EQ(out.state, SensorState::kNoSensor);
}

}  // namespace
}  // namespace ari::thermal
