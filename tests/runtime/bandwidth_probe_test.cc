// The bandwidth probe's kernels against their spec (ProbeSumReference: the wrapping sum of
// the 64-bit words) on every ISA this host runs, across sizes, tails, misalignment and
// stream counts; and the probe's report (no speed assertions: the machine is shared).
#include "runtime/eval/bandwidth_probe.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace ari::runtime::eval {
namespace {

// Words with every bit pattern class (high bits set: the sum wraps many times).
std::vector<uint64_t> Words(size_t n) {
  std::vector<uint64_t> v(n);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& w : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w = x;
  }
  return v;
}

TEST(BandwidthProbe, EveryKernelSumsLikeTheReference) {
  const std::vector<uint64_t> words = Words(4096 + 64);
  const size_t sizes[] = {0,   1,   3,   4,   15,  16,  17,  31,   32,   33,   63,  64,
                          127, 128, 129, 255, 256, 257, 511, 1000, 1024, 2047, 4096};
  int ran = 0;
  for (ProbeIsa isa : {ProbeIsa::kScalar, ProbeIsa::kAvx2, ProbeIsa::kAvx512}) {
    if (!ProbeIsaSupported(isa)) {
      std::printf("[ skipped  ] %s probe kernels: this CPU lacks them\n",
                  std::string(ProbeIsaName(isa)).c_str());
      continue;
    }
    ++ran;
    for (int streams : {1, 2, 4, 8}) {
      for (size_t n : sizes) {
        // 0..7 words past a 16-byte aligned start: every 8-byte offset within a 64-byte line.
        for (size_t off = 0; off < 8; ++off) {
          const uint64_t* p = words.data() + off;
          const uint64_t want = ProbeSumReference(p, n);
          EXPECT_EQ(ProbeSum(p, n, streams, isa), want)
              << ProbeIsaName(isa) << " streams " << streams << " n " << n << " off " << off;
        }
      }
    }
  }
  EXPECT_GE(ran, 1);
}

TEST(BandwidthProbe, ReportsWhatItRan) {
  const std::vector<uint64_t> words = Words(1 << 20);  // 8 MiB
  for (int threads : {1, 2}) {
    const ProbeResult r = ProbeReadBandwidth(words.data(), words.size(), threads, 1);
    EXPECT_GT(r.gbs, 0.0);
    EXPECT_EQ(r.threads, threads);
    EXPECT_EQ(r.isa, BestProbeIsa());
    EXPECT_TRUE(r.streams == 1 || r.streams == 2 || r.streams == 4 || r.streams == 8);
    EXPECT_GE(r.pinned_threads, 0);
    EXPECT_LE(r.pinned_threads, threads);
    // Each thread's slice summed: together, the whole buffer's sum.
    EXPECT_EQ(r.checksum, ProbeSumReference(words.data(), words.size()));
    EXPECT_NE(r.ToString().find(std::string(ProbeIsaName(r.isa))), std::string::npos);
    std::printf("[ measure  ] probe %s (8 MiB: cache-resident, a functional run)\n",
                r.ToString().c_str());
  }
}

}  // namespace
}  // namespace ari::runtime::eval
