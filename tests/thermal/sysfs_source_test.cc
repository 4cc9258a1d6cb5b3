// SysfsSource on fake /sys/class/thermal trees in a temp dir.
#include "thermal/sysfs_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/common/test_util.h"

namespace ari::thermal {
namespace {

namespace fs = std::filesystem;

class SysfsSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ari::testing::TempDir("thermal_sysfs") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  void Zone(int n, const std::string& type, const std::string& temp) {
    const std::string dir = "thermal_zone" + std::to_string(n);
    Write(dir + "/type", type + "\n");
    Write(dir + "/temp", temp);
  }
  SysfsOptions Options(std::vector<std::string> types = {}) {
    SysfsOptions o;
    o.root = root_;
    o.types = std::move(types);
    o.limits.max_age_ns = 2 * kNsPerSecond;
    return o;
  }

  fs::path root_;
  ManualClock clock_{1000};
};

TEST_F(SysfsSourceTest, ReadsMillidegrees) {
  Zone(0, "x86_pkg_temp", "45500\n");
  SysfsSource src(Options(), clock_);
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 45.5);
  EXPECT_EQ(r.time_ns, 1000);
  EXPECT_EQ(r.source, "sysfs:thermal_zone0(x86_pkg_temp)");
}

TEST_F(SysfsSourceTest, TypeFilterAndHottest) {
  Zone(0, "acpitz", "90000\n");
  Zone(1, "x86_pkg_temp", "61000\n");
  Zone(2, "cpu_thermal", "67000\n");
  Zone(10, "cpu_thermal", "52000\n");
  SysfsSource src(Options({"cpu_thermal", "x86_pkg_temp"}), clock_);
  EXPECT_EQ(src.zone_names(),
            (std::vector<std::string>{"thermal_zone1", "thermal_zone2", "thermal_zone10"}));
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 67.0);
  EXPECT_EQ(r.source, "sysfs:thermal_zone2(cpu_thermal)");

  SysfsSource all(Options(), clock_);
  EXPECT_DOUBLE_EQ(all.Read().celsius, 90.0);  // no filter: hottest of every zone

  SysfsOptions only = Options();
  only.zones = {"thermal_zone10"};
  SysfsSource one(only, clock_);
  EXPECT_DOUBLE_EQ(one.Read().celsius, 52.0);
}

TEST_F(SysfsSourceTest, NothingFoundIsNoSensor) {
  Zone(0, "acpitz", "30000\n");
  SysfsSource src(Options({"cpu_thermal"}), clock_);
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kNoSensor);
  EXPECT_TRUE(std::isnan(r.celsius));

  SysfsOptions missing_root = Options();
  missing_root.root = root_ / "does_not_exist";
  SysfsSource none(missing_root, clock_);
  EXPECT_EQ(none.Read().state, SensorState::kNoSensor);
}

TEST_F(SysfsSourceTest, VanishedFileAndRecovery) {
  Zone(0, "cpu_thermal", "50000\n");
  SysfsSource src(Options(), clock_);
  EXPECT_EQ(src.Read().state, SensorState::kOk);
  fs::remove(root_ / "thermal_zone0/temp");
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kVanished);
  EXPECT_DOUBLE_EQ(r.celsius, 50.0);  // last good
  Zone(0, "cpu_thermal", "51000\n");
  r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 51.0);
}

TEST_F(SysfsSourceTest, VanishedZoneFaultsTheHottestReading) {
  Zone(0, "cpu_thermal", "50000\n");
  Zone(1, "cpu_thermal", "70000\n");
  SysfsSource src(Options(), clock_);
  EXPECT_DOUBLE_EQ(src.Read().celsius, 70.0);
  fs::remove_all(root_ / "thermal_zone1");
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kVanished);
  EXPECT_DOUBLE_EQ(r.celsius, 70.0);
  EXPECT_EQ(r.source, "sysfs:thermal_zone1(cpu_thermal)");
  src.Rescan();  // accept that the zone is gone
  r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 50.0);
}

TEST_F(SysfsSourceTest, GarbageTextIsInvalid) {
  Zone(0, "cpu_thermal", "48000\n");
  SysfsSource src(Options(), clock_);
  EXPECT_EQ(src.Read().state, SensorState::kOk);
  for (const char* garbage : {"hot\n", "12abc\n", "4.5e4\n", "--1\n"}) {
    Zone(0, "cpu_thermal", garbage);
    Reading r = src.Read();
    EXPECT_EQ(r.state, SensorState::kInvalid) << garbage;
    EXPECT_DOUBLE_EQ(r.celsius, 48.0) << garbage;
  }
}

TEST_F(SysfsSourceTest, OutOfRangeIsInvalid) {
  Zone(0, "cpu_thermal", "200000\n");
  SysfsSource src(Options(), clock_);
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kInvalid);
  EXPECT_TRUE(std::isnan(r.celsius));  // no good value yet
  Zone(0, "cpu_thermal", "-273150\n");
  EXPECT_EQ(src.Read().state, SensorState::kInvalid);
  Zone(0, "cpu_thermal", "150000\n");
  EXPECT_EQ(src.Read().state, SensorState::kOk);
}

TEST_F(SysfsSourceTest, StaleWithManualClock) {
  Zone(0, "cpu_thermal", "55000\n");
  SysfsSource src(Options(), clock_);
  Reading r = src.Read();
  ASSERT_EQ(r.state, SensorState::kOk);
  const int64_t t0 = r.time_ns;
  Zone(0, "cpu_thermal", "");  // the driver has no data (empty read)
  clock_.AdvanceSeconds(1.0);
  r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);  // held value, still young
  EXPECT_EQ(r.time_ns, t0);
  EXPECT_DOUBLE_EQ(r.celsius, 55.0);
  clock_.AdvanceSeconds(1.5);
  r = src.Read();
  EXPECT_EQ(r.state, SensorState::kStale);
  EXPECT_DOUBLE_EQ(r.celsius, 55.0);
  EXPECT_EQ(r.time_ns, t0);
  Zone(0, "cpu_thermal", "56000\n");
  r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_EQ(r.time_ns, clock_.NowNs());
}

TEST_F(SysfsSourceTest, ReadIntoReusesReading) {
  Zone(0, "cpu_thermal", "42000\n");
  SysfsSource src(Options(), clock_);
  Reading r;
  src.ReadInto(r);
  const char* data = r.source.data();
  src.ReadInto(r);
  EXPECT_EQ(r.source.data(), data);  // same buffer: no new allocation
  EXPECT_DOUBLE_EQ(r.celsius, 42.0);
}

}  // namespace
}  // namespace ari::thermal
