// The engine's pool memory (engine_internal::PoolBuffer): aligned as asked, 2 MiB aligned
// and advised MADV_HUGEPAGE from 2 MiB up, and, where transparent huge pages are on, backed
// by huge pages once prefaulted (read back from /proc/self/smaps); move-only ownership.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

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
