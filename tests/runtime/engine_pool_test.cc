// The engine's pool memory (engine_internal::PoolBuffer): aligned as asked, 2 MiB aligned
// and advised MADV_HUGEPAGE from 2 MiB up, and, where transparent huge pages are on, backed
// by huge pages once prefaulted (read back from /proc/self/smaps); move-only ownership.
// Without huge pages: MADV_NOHUGEPAGE, none. PrefaultOnPool writes and times every unit;
// ChooseHugePages follows the virtio balloon's free page reporting (a sysfs test tree).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine/engine_memory.h"

namespace ari::runtime::engine_internal {
namespace {

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// "always" / "madvise" / "never", or "" when the kernel has no transparent huge pages.
std::string ThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all;
  std::getline(in, all);
  const size_t a = all.find('['), b = all.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : all.substr(a + 1, b - a - 1);
}

uint64_t VmStat(const std::string& key) {
  std::ifstream in("/proc/vmstat");
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// AnonHugePages of the mapping(s) of /proc/self/smaps overlapping [p, p + bytes), bytes.
uint64_t AnonHugeBytes(const void* p, size_t bytes) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool ours = false;
  uint64_t kb = 0;
  while (std::getline(in, line)) {
    unsigned long long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &a, &b) == 2 && line.find(':') > line.find(' ')) {
      ours = a < hi && b > lo;
    } else if (ours && line.rfind("AnonHugePages:", 0) == 0) {
      kb += std::stoull(line.substr(14));
    }
  }
  return kb * 1024;
}

TEST(PoolBuffer, SmallBufferKeepsTheAskedAlignmentAndNoAdvice) {
  PoolBuffer b(4096 + 7, 128);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_TRUE(Aligned(b.data(), 128));
  EXPECT_EQ(b.bytes(), 4096u + 7);
  EXPECT_FALSE(b.huge_pages_advised());
  Prefault(b.data(), b.bytes());
  EXPECT_EQ(b.data()[b.bytes() - 1], std::byte{0});
}

TEST(PoolBuffer, MemoryItCannotHaveIsAValueNotAnException) {
  PoolBuffer b(size_t{1} << 60, 128);  // beyond any address space: mmap refuses
  EXPECT_FALSE(b.allocated());
  EXPECT_EQ(b.data(), nullptr);
  PoolBuffer ok(4 * PoolBuffer::kHugePage, 128);
  EXPECT_TRUE(ok.allocated());
}

TEST(PoolBuffer, EmptyBufferHoldsNothing) {
  PoolBuffer b(0, 128);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_FALSE(b.huge_pages_advised());
}

TEST(PoolBuffer, LargeBufferIsHugePageAlignedAndBackedByHugePages) {
  const size_t bytes = 8 * PoolBuffer::kHugePage + 12345;  // a tail that cannot be huge
  PoolBuffer b(bytes, 128);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_TRUE(Aligned(b.data(), PoolBuffer::kHugePage));
  const std::string mode = ThpMode();
  if (mode.empty() || mode == "never") {
    GTEST_SKIP() << "transparent huge pages are " << (mode.empty() ? "not built in" : "off")
                 << " here: the pool keeps 4 kB pages (alignment checked)";
  }
  EXPECT_TRUE(b.huge_pages_advised()) << "THP mode " << mode << " but MADV_HUGEPAGE refused";
  const uint64_t fallback = VmStat("thp_fault_fallback");
  Prefault(b.data(), b.bytes());
  const uint64_t huge = AnonHugeBytes(b.data(), b.bytes());
  std::printf("measured: THP %s, %llu of %zu bytes in huge pages\n", mode.c_str(),
              static_cast<unsigned long long>(huge), bytes);
  if (huge == 0 && VmStat("thp_fault_fallback") > fallback) {
    GTEST_SKIP() << "the kernel found no free huge page (thp_fault_fallback rose)";
  }
  EXPECT_GE(huge, 4 * PoolBuffer::kHugePage);
}

TEST(PoolBuffer, WithoutHugePagesStaysIn4kPages) {
  const size_t bytes = 8 * PoolBuffer::kHugePage + 12345;
  PoolBuffer b(bytes, 128, /*huge=*/false);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_TRUE(Aligned(b.data(), PoolBuffer::kHugePage));
  EXPECT_FALSE(b.huge_pages_advised());
  Prefault(b.data(), b.bytes());
  // MADV_NOHUGEPAGE: none even where THP is "always".
  EXPECT_EQ(AnonHugeBytes(b.data(), b.bytes()), 0u) << "THP mode " << ThpMode();
}

// Every 2 MiB unit written (zeros) on the pool, and timed.
TEST(PrefaultOnPool, WritesAndTimesEveryUnit) {
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool) << pool.error().ToString();
  PoolBuffer b(4 * PoolBuffer::kHugePage + 4096, 128);
  const PrefaultReport r = PrefaultOnPool(**pool, b);
  EXPECT_EQ(r.units, 5);
  EXPECT_GT(r.slowest_unit_ms, 0.0);
  std::printf("measured: slowest of %lld units %.3f ms\n", static_cast<long long>(r.units),
              r.slowest_unit_ms);
  for (size_t i = 0; i < b.bytes(); i += 4096) ASSERT_EQ(b.data()[i], std::byte{0}) << i;
  EXPECT_EQ(b.data()[b.bytes() - 1], std::byte{0});
  PrefaultReport sum;
  AddPrefaultReport(r, sum);
  AddPrefaultReport(PrefaultReport{2, 0.5}, sum);
  EXPECT_EQ(sum.units, 7);
  EXPECT_EQ(sum.slowest_unit_ms, std::max(r.slowest_unit_ms, 0.5));
  EXPECT_NE(DescribePrefault("arena", r).find("arena prefaulted: 5 x 2 MiB units"),
            std::string::npos);
  EXPECT_EQ(PrefaultOnPool(**pool, PoolBuffer()).units, 0);
}

// A sysfs tree under a temporary root: the balloon driver's devices and their features.
class FreePageReporting : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("ari_fpr_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Device(const std::string& name, const std::string& features) {
    const auto dir = root_ / "sys/bus/virtio/drivers/virtio_balloon" / name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "features") << features << "\n";
  }
  std::filesystem::path root_;
};

TEST_F(FreePageReporting, ReadsTheBalloonsReportingBit) {
  EXPECT_FALSE(FreePageReportingActive(root_.string()));          // no balloon driver
  Device("virtio0", "0110100100000000000000000000000010000000");  // poison, not reporting
  EXPECT_FALSE(FreePageReportingActive(root_.string()));
  Device("virtio1", "0110010100000000000000000000000010000000");  // the Intel Xeon VM's
  EXPECT_TRUE(FreePageReportingActive(root_.string()));
}

TEST_F(FreePageReporting, DecidesThePoolsPages) {
  std::vector<std::string> notes;
  EXPECT_TRUE(ChooseHugePages(HugePages::kAuto, root_.string(), notes));
  EXPECT_FALSE(ChooseHugePages(HugePages::kOff, root_.string(), notes));
  Device("virtio0", "0000010000000000000000000000000000000000");
  EXPECT_FALSE(ChooseHugePages(HugePages::kAuto, root_.string(), notes));
  EXPECT_TRUE(ChooseHugePages(HugePages::kOn, root_.string(), notes));
  ASSERT_EQ(notes.size(), 4u);
  EXPECT_EQ(notes[0], "pools advised transparent huge pages");
  EXPECT_NE(notes[1].find("huge pages off"), std::string::npos);
  EXPECT_NE(notes[2].find("free page reporting"), std::string::npos);
  EXPECT_EQ(notes[3], notes[0]);
}

TEST(PoolBuffer, MoveTransfersOwnership) {
  PoolBuffer a(3 * PoolBuffer::kHugePage, 128);
  std::byte* p = a.data();
  PoolBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.bytes(), 3 * PoolBuffer::kHugePage);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  PoolBuffer c(4096, 64);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move)
}

}  // namespace
}  // namespace ari::runtime::engine_internal
