// libsensors source: on this VM libsensors finds no chips -> kNoSensor.
#include "thermal/sensors_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/common/test_util.h"

namespace ari::thermal {
namespace {

namespace fs = std::filesystem;

fs::path WriteConfig(const std::string& name, const std::string& text) {
  fs::path p = ari::testing::TempDir("thermal_sensors") / name;
  std::ofstream(p) << text;
  return p;
}

TEST(SensorsSourceTest, CpuChipPrefixes) {
  EXPECT_TRUE(IsCpuChipPrefix("coretemp"));
  EXPECT_TRUE(IsCpuChipPrefix("k10temp"));
  EXPECT_TRUE(IsCpuChipPrefix("cpu_thermal"));
  EXPECT_TRUE(IsCpuChipPrefix("soc_thermal"));
  EXPECT_TRUE(IsCpuChipPrefix("CPU0_thermal"));
  EXPECT_FALSE(IsCpuChipPrefix("nvme"));
  EXPECT_FALSE(IsCpuChipPrefix("acpitz"));
  EXPECT_FALSE(IsCpuChipPrefix("iwlwifi_1"));
}

// Runs on any machine: either a CPU sensor is found and reads ok, or (this VM)
// nothing is found and every read is kNoSensor, never a crash.
TEST(SensorsSourceTest, DefaultSelectionOnThisMachine) {
  ManualClock clock(77);
  auto src = SensorsSource::Open(SensorsOptions{}, clock);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  EXPECT_EQ(SensorsLibraryRef::ActiveRefs(), 1);
  Reading r = (*src)->Read();
  std::error_code ec;
  const bool no_hwmon = !fs::exists("/sys/class/hwmon", ec) || fs::is_empty("/sys/class/hwmon", ec);
  if (no_hwmon) {
    // A VM without hwmon devices (this build machine): must be kNoSensor.
    EXPECT_TRUE((*src)->input_names().empty());
  }
  if ((*src)->input_names().empty()) {
    EXPECT_EQ(r.state, SensorState::kNoSensor);
    EXPECT_TRUE(std::isnan(r.celsius));
    EXPECT_EQ(r.source, "libsensors");
    EXPECT_NE((*src)->detail().find("no temperature input"), std::string::npos);
  } else {
    EXPECT_NE(r.state, SensorState::kNoSensor);
  }
  src->reset();
  EXPECT_EQ(SensorsLibraryRef::ActiveRefs(), 0);
}

TEST(SensorsSourceTest, NamedChipNotPresentIsNoSensor) {
  ManualClock clock;
  SensorsOptions o;
  o.chip = "ari_fake_chip-*";
  o.feature = "temp1";
  auto src = SensorsSource::Open(o, clock);
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  EXPECT_TRUE((*src)->input_names().empty());
  EXPECT_EQ((*src)->Read().state, SensorState::kNoSensor);
  EXPECT_NE((*src)->detail().find("ari_fake_chip-*"), std::string::npos);
}

TEST(SensorsSourceTest, ConfigFileParsed) {
  const fs::path conf = WriteConfig("good.conf",
                                    "# fake lm-sensors config\n"
                                    "chip \"coretemp-*\"\n"
                                    "  label temp1 \"Package\"\n"
                                    "  set temp1_max 90\n");
  ManualClock clock;
  SensorsOptions o;
  o.config_file = conf;
  auto a = SensorsSource::Open(o, clock);
  ASSERT_TRUE(a.has_value()) << a.error().ToString();
  auto b = SensorsSource::Open(o, clock);  // same config: shares the library
  ASSERT_TRUE(b.has_value()) << b.error().ToString();
  EXPECT_EQ(SensorsLibraryRef::ActiveRefs(), 2);

  auto other = SensorsSource::Open(SensorsOptions{}, clock);  // different config: refused
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error().code, ErrorCode::kUnavailable);

  if ((*a)->input_names().empty()) {
    EXPECT_EQ((*a)->Read().state, SensorState::kNoSensor);
  }
  a->reset();
  EXPECT_EQ(SensorsLibraryRef::ActiveRefs(), 1);
  b->reset();
  EXPECT_EQ(SensorsLibraryRef::ActiveRefs(), 0);
}

TEST(SensorsSourceTest, BadConfigNamesLine) {
  const fs::path conf = WriteConfig("bad.conf",
                                    "chip \"coretemp-*\"\n"
                                    "  label temp1 \"CPU\"\n"
                                    "  this is not a statement\n");
  ManualClock clock;
  SensorsOptions o;
  o.config_file = conf;
  auto src = SensorsSource::Open(o, clock);
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().code, ErrorCode::kFormat);
  EXPECT_NE(src.error().message.find("line 3: "), std::string::npos) << src.error().message;
  std::printf("error text: %s\n", src.error().ToString().c_str());
  EXPECT_EQ(SensorsLibraryRef::ActiveRefs(), 0);

  // The library is usable again afterwards.
  auto ok = SensorsSource::Open(SensorsOptions{}, clock);
  EXPECT_TRUE(ok.has_value());
}

TEST(SensorsSourceTest, MissingConfigIsIoError) {
  ManualClock clock;
  SensorsOptions o;
  o.config_file = "/nonexistent/ari/sensors.conf";
  auto src = SensorsSource::Open(o, clock);
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().code, ErrorCode::kIo);
}

TEST(SensorsSourceTest, BadChipPattern) {
  ManualClock clock;
  SensorsOptions o;
  o.chip = "coretemp-isa-zz-??";
  auto src = SensorsSource::Open(o, clock);
  ASSERT_FALSE(src.has_value());
  EXPECT_EQ(src.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(SensorsLibraryRef::ActiveRefs(), 0);
}

}  // namespace
}  // namespace ari::thermal
