// CPU topology on fake /sys/devices/system/cpu trees.
#include "thermal/topology.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/common/test_util.h"

namespace ari::thermal {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int>;

TEST(ParseCpuListTest, Ranges) {
  EXPECT_EQ(*ParseCpuList("0-3,6\n"), (Ids{0, 1, 2, 3, 6}));
  EXPECT_EQ(*ParseCpuList("0"), (Ids{0}));
  EXPECT_EQ(*ParseCpuList(""), Ids{});
  EXPECT_EQ(*ParseCpuList("4-5,0-1,5"), (Ids{0, 1, 4, 5}));
  for (const char* bad : {"3-1", "a", "1,,2", "0-", "-1", "1-2-3", "0x1"}) {
    auto r = ParseCpuList(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kFormat);
  }
  EXPECT_EQ(FormatCpuList({6, 0, 1, 2, 3}), "0-3,6");
  EXPECT_EQ(FormatCpuList({}), "");
}

class TopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ari::testing::TempDir("thermal_topo") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  void Cpu(int id, int64_t capacity, int64_t max_freq) {
    const std::string dir = "cpu" + std::to_string(id);
    fs::create_directories(root_ / dir);
    if (capacity > 0) Write(dir + "/cpu_capacity", std::to_string(capacity) + "\n");
    if (max_freq > 0) Write(dir + "/cpufreq/cpuinfo_max_freq", std::to_string(max_freq) + "\n");
  }
  TopologyOptions Options() {
    TopologyOptions o;
    o.root = root_;
    return o;
  }

  fs::path root_;
};

TEST_F(TopologyTest, BigLittleByCapacity) {
  Write("online", "0-7\n");
  for (int i = 0; i < 4; ++i) Cpu(i, 446, 2000000);
  for (int i = 4; i < 8; ++i) Cpu(i, 1024, 2000000);  // freq equal: capacity decides
  auto t = DetectTopology(Options());
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_EQ(t->basis, TopologyBasis::kCapacity);
  EXPECT_EQ(t->performance, (Ids{4, 5, 6, 7}));
  EXPECT_EQ(t->efficiency, (Ids{0, 1, 2, 3}));
  EXPECT_TRUE(t->heterogeneous());
  EXPECT_EQ(t->cpus[0].core_class, CoreClass::kEfficiency);
  EXPECT_EQ(t->cpus[7].core_class, CoreClass::kPerformance);
  EXPECT_EQ(t->cpus[7].capacity, 1024);
}

TEST_F(TopologyTest, ThreeClustersSplitAtLargestGap) {
  Write("online", "0-7\n");
  for (int i = 0; i < 4; ++i) Cpu(i, 400, 0);
  for (int i = 4; i < 7; ++i) Cpu(i, 900, 0);
  Cpu(7, 1024, 0);
  auto t = DetectTopology(Options());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->performance, (Ids{4, 5, 6, 7}));
  EXPECT_EQ(t->efficiency, (Ids{0, 1, 2, 3}));
}

TEST_F(TopologyTest, ByMaxFreqWhenNoCapacity) {
  Write("online", "0-5\n");
  for (int i = 0; i < 2; ++i) Cpu(i, 0, 3000000);
  for (int i = 2; i < 6; ++i) Cpu(i, 0, 1800000);
  auto t = DetectTopology(Options());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->basis, TopologyBasis::kMaxFreq);
  EXPECT_EQ(t->performance, (Ids{0, 1}));
  EXPECT_EQ(t->efficiency, (Ids{2, 3, 4, 5}));
  EXPECT_EQ(t->cpus[2].max_freq_khz, 1800000);
}

TEST_F(TopologyTest, EqualCoresAreOneClass) {
  Write("online", "0-1\n");
  Cpu(0, 1024, 2400000);
  Cpu(1, 1024, 2400000);
  auto t = DetectTopology(Options());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->performance, (Ids{0, 1}));
  EXPECT_TRUE(t->efficiency.empty());
  EXPECT_FALSE(t->heterogeneous());
}

TEST_F(TopologyTest, NoMetricIsUniform) {
  Write("online", "0-2\n");
  for (int i = 0; i < 3; ++i) Cpu(i, 0, 0);
  Cpu(1, 0, 1000000);  // only one CPU has a frequency: not usable
  auto t = DetectTopology(Options());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->basis, TopologyBasis::kUniform);
  EXPECT_EQ(t->performance, (Ids{0, 1, 2}));
}

TEST_F(TopologyTest, OnlyOnlineCpus) {
  Write("online", "0-1,3\n");  // cpu2 offline (its files still exist)
  Cpu(0, 512, 0);
  Cpu(1, 512, 0);
  Cpu(2, 1024, 0);
  Cpu(3, 1024, 0);
  auto t = DetectTopology(Options());
  ASSERT_TRUE(t.has_value());
  ASSERT_EQ(t->cpus.size(), 3u);
  EXPECT_EQ(t->performance, (Ids{3}));
  EXPECT_EQ(t->efficiency, (Ids{0, 1}));
}

TEST_F(TopologyTest, NoOnlineFileUsesCpuDirs) {
  Cpu(0, 0, 0);
  Cpu(1, 0, 0);
  fs::create_directories(root_ / "cpufreq");  // not a cpuN directory
  fs::create_directories(root_ / "cpuidle");
  auto t = DetectTopology(Options());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->performance, (Ids{0, 1}));
}

TEST_F(TopologyTest, ConfigOverride) {
  Write("online", "0-3\n");
  for (int i = 0; i < 4; ++i) Cpu(i, 1024, 0);
  TopologyOptions o = Options();
  o.efficiency_cpus = Ids{1};
  auto t = DetectTopology(o);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->basis, TopologyBasis::kConfig);
  EXPECT_EQ(t->performance, (Ids{0, 2, 3}));
  EXPECT_EQ(t->efficiency, (Ids{1}));
  EXPECT_EQ(t->cpus[1].core_class, CoreClass::kEfficiency);

  o = Options();
  o.performance_cpus = Ids{3, 2};
  t = DetectTopology(o);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->performance, (Ids{2, 3}));
  EXPECT_EQ(t->efficiency, (Ids{0, 1}));

  o.efficiency_cpus = Ids{0};  // both given: cpu1 is left out
  t = DetectTopology(o);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->efficiency, (Ids{0}));
  EXPECT_EQ(t->cpus.size(), 3u);
}

TEST_F(TopologyTest, BadOverridesAndTrees) {
  Write("online", "0-1\n");
  Cpu(0, 0, 0);
  Cpu(1, 0, 0);
  TopologyOptions o = Options();
  o.performance_cpus = Ids{0, 5};
  auto t = DetectTopology(o);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(t.error().message.find("CPU 5"), std::string::npos);

  o.performance_cpus = Ids{0};
  o.efficiency_cpus = Ids{0, 1};
  EXPECT_FALSE(DetectTopology(o).has_value());

  Write("online", "zero\n");
  t = DetectTopology(Options());
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code, ErrorCode::kFormat);

  TopologyOptions missing;
  missing.root = root_ / "nope";
  EXPECT_FALSE(DetectTopology(missing).has_value());
}

TEST(TopologyHostTest, ThisMachineDetects) {
  auto t = DetectTopology();
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_FALSE(t->performance.empty());
  EXPECT_EQ(t->performance.size() + t->efficiency.size(), t->cpus.size());
}

}  // namespace
}  // namespace ari::thermal
