// The host's kernel tier timings file (runtime/kernels/tier_timings_file.h): what one
// process measured, every other process of the host reads back exactly, so they all
// choose the same kernels; a malformed file is never used.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/kernels/tier_timings_file.h"
#include "tests/common/test_util.h"

namespace ari::runtime::kernels {
namespace {

TierTimings Sample() {
  TierTimings t;
  t.us[static_cast<size_t>(MatmulFamily::kGemvW8A16)][static_cast<size_t>(IsaTier::kAvx2)] = 24.75;
  t.us[static_cast<size_t>(MatmulFamily::kGemvW8A16)][static_cast<size_t>(IsaTier::kScalar)] =
      310.5;
  t.us[static_cast<size_t>(MatmulFamily::kGemmW4A8)][static_cast<size_t>(IsaTier::kNeonI8mm)] =
      1429.25;
  return t;
}

TEST(TierTimingsFile, RoundTripKeepsEveryEntryAndTheChoice) {
  const TierTimings t = Sample();
  auto back = ParseTierTimings(FormatTierTimings(t));
  ASSERT_TRUE(back.has_value()) << FormatTierTimings(t);
  for (int f = 0; f < kNumMatmulFamilies; ++f) {
    for (int i = 0; i < kNumIsaTiers; ++i) {
      EXPECT_NEAR(back->us[f][i], t.us[f][i], 1e-3) << f << " " << i;
    }
  }
  const IsaTier cand[] = {IsaTier::kAvx2, IsaTier::kScalar};
  EXPECT_EQ(ChooseTier(*back, MatmulFamily::kGemvW8A16, cand),
            ChooseTier(t, MatmulFamily::kGemvW8A16, cand));
}

TEST(TierTimingsFile, MalformedTextIsRefused) {
  const std::string good = FormatTierTimings(Sample());
  const std::string header = good.substr(0, good.find('\n') + 1);
  for (const std::string& bad :
       {std::string(""), std::string("not the header\n"), header + "gemv_w8a16 avx2\n",
        header + "gemv_w8a16 avx2 -4\n", header + "gemv_w8a16 avx2 nan\n",
        header + "gemv_w9 avx2 3\n", header + "gemv_w8a16 sse9 3\n",
        header + "gemv_w8a16 avx2 3 x\n"}) {
    EXPECT_FALSE(ParseTierTimings(bad).has_value()) << bad;
  }
}

TEST(TierTimingsFile, SavedFileIsLoadedAndAMissingOneIsAbsent) {
  const auto dir = testing::TempDir("tier_timings_file");
  const auto path = dir / "sub" / "timings.txt";
  EXPECT_FALSE(LoadTierTimings(path).has_value());
  ASSERT_TRUE(SaveTierTimings(path, Sample()));  // creates the folder
  auto back = LoadTierTimings(path);
  ASSERT_TRUE(back.has_value());
  EXPECT_NEAR(back->us[0][static_cast<size_t>(IsaTier::kAvx2)], 24.75, 1e-3);
  std::ofstream(path) << "garbage";
  EXPECT_FALSE(LoadTierTimings(path).has_value());
  // A file where a folder must be: not saved, said as false.
  std::ofstream(dir / "file") << "x";
  EXPECT_FALSE(SaveTierTimings(dir / "file" / "timings.txt", Sample()));
  std::filesystem::remove_all(dir);
}

TEST(TierTimingsFile, DefaultPathIsPerHostUnderTheCacheFolder) {
  // ctest sets ARI_KERNEL_TIMINGS_FILE for the suite (one file per build folder).
  if (const char* env = std::getenv("ARI_KERNEL_TIMINGS_FILE"); env && *env) {
    EXPECT_EQ(TierTimingsPath(), std::filesystem::path(env));
  }
  unsetenv("ARI_KERNEL_TIMINGS_FILE");
  setenv("XDG_CACHE_HOME", "/var/cache/x", 1);
  const auto p = TierTimingsPath();
  EXPECT_EQ(p.parent_path(), std::filesystem::path("/var/cache/x/ari"));
  EXPECT_TRUE(p.filename().string().starts_with("kernel-timings-")) << p;
}

}  // namespace
}  // namespace ari::runtime::kernels
