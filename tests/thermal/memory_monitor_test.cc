#include "thermal/memory_monitor.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/common/test_util.h"

namespace ari::thermal {
namespace {

namespace fs = std::filesystem;

MemoryMonitorOptions Opts(const fs::path& root, std::optional<fs::path> cgroup_dir = {}) {
  MemoryMonitorOptions o;
  o.root = root;
  o.cgroup_dir = std::move(cgroup_dir);
  return o;
}

class FakeTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ari::testing::TempDir(std::string("memmon_") +
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    Write("proc/meminfo",
          "MemTotal:        4000000 kB\nMemFree:          100000 kB\n"
          "MemAvailable:    1500000 kB\nBuffers:            1000 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  fs::path root_;
};

TEST_F(FakeTree, MeminfoOnly) {
  auto mon = MemoryMonitor::Create(Opts(root_));
  ASSERT_TRUE(mon) << mon.error().ToString();
  EXPECT_EQ(mon->cgroup_version(), CgroupVersion::kNone);
  auto r = mon->Read();
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->system_available_bytes, 1500000ull * 1024);
  EXPECT_EQ(r->system_total_bytes, 4000000ull * 1024);
  EXPECT_EQ(r->available_bytes, r->system_available_bytes);
  EXPECT_FALSE(r->has_cgroup_limit);
  EXPECT_FALSE(r->has_psi);
}

TEST_F(FakeTree, CgroupV2LimitFromProcSelfCgroup) {
  Write("proc/self/cgroup", "0::/ari.slice/node\n");
  Write("sys/fs/cgroup/ari.slice/node/memory.max", "1073741824\n");
  Write("sys/fs/cgroup/ari.slice/node/memory.current", "900000000\n");
  Write("sys/fs/cgroup/ari.slice/node/memory.stat",
        "anon 500000000\nfile 400000000\ninactive_file 300000000\n");
  Write("sys/fs/cgroup/ari.slice/node/memory.pressure",
        "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=4.25 avg60=1.00 avg300=0.00 "
        "total=9\n");
  auto mon = MemoryMonitor::Create(Opts(root_));
  ASSERT_TRUE(mon);
  EXPECT_EQ(mon->cgroup_version(), CgroupVersion::kV2);
  auto r = mon->Read();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->has_cgroup_limit);
  EXPECT_EQ(r->cgroup_limit_bytes, 1073741824u);
  EXPECT_EQ(r->cgroup_usage_bytes, 600000000u);             // current - inactive_file
  EXPECT_EQ(r->available_bytes, 1073741824u - 600000000u);  // below MemAvailable
  EXPECT_TRUE(r->has_psi);
  EXPECT_DOUBLE_EQ(r->psi_some_avg10, 12.5);
  EXPECT_DOUBLE_EQ(r->psi_full_avg10, 4.25);
}

TEST_F(FakeTree, CgroupV2MaxMeansNoLimit) {
  Write("proc/self/cgroup", "0::/\n");
  Write("sys/fs/cgroup/memory.max", "max\n");
  Write("sys/fs/cgroup/memory.current", "5\n");
  auto mon = MemoryMonitor::Create(Opts(root_));
  ASSERT_TRUE(mon);
  auto r = mon->Read();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_cgroup_limit);
  EXPECT_EQ(r->available_bytes, 1500000ull * 1024);
}

TEST_F(FakeTree, CgroupV1WithLimitAndSystemPsi) {
  // The v2 hierarchy exists but has no memory controller (as on these machines).
  Write("proc/self/cgroup", "4:memory:/process_api/abc\n3:cpuset:/\n0::/\n");
  Write("sys/fs/cgroup/unified/cgroup.procs", "");
  Write("sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "536870912\n");
  Write("sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes", "500000000\n");
  Write("sys/fs/cgroup/memory/process_api/abc/memory.stat",
        "cache 1\ninactive_file 7\ntotal_inactive_file 100000000\n");
  Write("proc/pressure/memory",
        "some avg10=0.50 avg60=0.00 avg300=0.00 total=0\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  auto mon = MemoryMonitor::Create(Opts(root_));
  ASSERT_TRUE(mon);
  EXPECT_EQ(mon->cgroup_version(), CgroupVersion::kV1);
  auto r = mon->Read();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->has_cgroup_limit);
  EXPECT_EQ(r->cgroup_usage_bytes, 400000000u);
  EXPECT_EQ(r->available_bytes, 536870912u - 400000000u);
  EXPECT_TRUE(r->has_psi);
  EXPECT_DOUBLE_EQ(r->psi_some_avg10, 0.5);
}

TEST_F(FakeTree, CgroupV1UnlimitedIsIgnored) {
  Write("proc/self/cgroup", "4:memory:/\n");
  Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  Write("sys/fs/cgroup/memory/memory.usage_in_bytes", "260730880\n");
  auto mon = MemoryMonitor::Create(Opts(root_));
  ASSERT_TRUE(mon);
  auto r = mon->Read();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_cgroup_limit);
}

TEST_F(FakeTree, ExplicitCgroupDirOverridesDiscovery) {
  Write("custom/memory.max", "2000000\n");
  Write("custom/memory.current", "1000000\n");
  auto mon = MemoryMonitor::Create(Opts(root_, root_ / "custom"));
  ASSERT_TRUE(mon);
  EXPECT_EQ(mon->cgroup_version(), CgroupVersion::kV2);
  auto r = mon->Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->available_bytes, 1000000u);
}

TEST_F(FakeTree, MissingOrGarbageMeminfoIsAnError) {
  Write("proc/meminfo", "garbage without the field\n");
  auto mon = MemoryMonitor::Create(Opts(root_));
  ASSERT_TRUE(mon);
  auto r = mon->Read();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFormat);
  fs::remove(root_ / "proc/meminfo");
  EXPECT_FALSE(MemoryMonitor::Create(Opts(root_)));
}

TEST(ProcSelfCgroup, ParsesBothVersions) {
  auto m = ParseProcSelfCgroup("9:name=systemd:/\n4:cpu,memory:/a/b\n0::/x\n");
  ASSERT_TRUE(m.v1_memory_path);
  EXPECT_EQ(*m.v1_memory_path, "/a/b");
  ASSERT_TRUE(m.v2_path);
  EXPECT_EQ(*m.v2_path, "/x");
  auto none = ParseProcSelfCgroup("garbage\n::\n");
  EXPECT_FALSE(none.v1_memory_path);
}

TEST(MemoryMonitorLive, ReadsThisMachine) {
  auto mon = MemoryMonitor::Create();
  ASSERT_TRUE(mon) << mon.error().ToString();
  auto r = mon->Read();
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_GT(r->available_bytes, 0u);
  EXPECT_LE(r->available_bytes, r->system_available_bytes);
  std::cout << "memory monitor: " << mon->Describe() << ", available "
            << r->available_bytes / (1 << 20) << " MiB\n";
}

}  // namespace
}  // namespace ari::thermal
