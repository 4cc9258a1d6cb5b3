// Affinity of every thread that computes a chunk, the caller included, observed from
// inside the computation (ChunkResult::cpus_ran, sched_getcpu per participant), and
// pinning failures counted and reported, on a real engine over a stories260K pack.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/kernels/tier_choice.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

// CPUs < 64 this process may run on, as a mask.
uint64_t AllowedMask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  uint64_t m = 0;
  for (int c = 0; c < 64; ++c) {
    if (CPU_ISSET(c, &set)) m |= uint64_t{1} << c;
  }
  return m;
}

// The two lowest allowed CPUs (0 when fewer than two).
uint64_t NthCpuBit(uint64_t mask, int n) {
  for (int c = 0; c < 64; ++c) {
    if ((mask & (uint64_t{1} << c)) && n-- == 0) return uint64_t{1} << c;
  }
  return 0;
}

std::unique_ptr<Engine> MakeEngine(const std::filesystem::path& path) {
  EngineOptions o;
  o.model_path = path;
  o.context_length = 256;
  o.threads = 2;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().ToString());
  return e ? std::move(*e) : nullptr;
}

// Runs one whole turn with `k` on every chunk; checks each chunk's observed CPUs.
void RunTurnOn(Engine& e, const ChunkKnobs& k, int* chunks) {
  const std::vector<TokenId> prompt = {1, 403, 407, 261, 378, 432, 383, 286};
  TurnSpec ts;
  ts.prompt = prompt;
  ts.max_tokens = 12;
  ts.keep_context = false;
  ASSERT_TRUE(e.StartTurn(0, ts).has_value());
  for (int c = 0; c < 100; ++c) {
    auto r = e.RunChunk(0, k);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    ++*chunks;
    EXPECT_EQ(r->pin_failures, 0);
    EXPECT_NE(r->cpus_ran, 0u);
    EXPECT_EQ(r->cpus_ran & ~k.cpu_mask, 0u)
        << "ran on 0x" << std::hex << r->cpus_ran << ", mask 0x" << k.cpu_mask;
    EXPECT_GE(r->threads_ran, 1);
    EXPECT_LE(r->threads_ran, r->threads);
    EXPECT_EQ(r->threads, e.has_pack() ? k.threads : 1);
    if (r->finished) break;
  }
}

TEST(EngineAffinity, EveryChunkRunsWithinItsCpuMaskCallerIncluded) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const uint64_t allowed = AllowedMask();
  const uint64_t cpu_a = NthCpuBit(allowed, 0), cpu_b = NthCpuBit(allowed, 1);
  if (cpu_b == 0) GTEST_SKIP() << "needs 2 CPUs this process may use";
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (const auto& path : {mp.pack, mp.plain}) {
    auto e = MakeEngine(path);
    ASSERT_TRUE(e);
    cpu_set_t before;
    ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
    int chunks = 0;
    for (int32_t threads : {1, 2}) {
      for (uint64_t mask : {cpu_a, cpu_b, cpu_a, cpu_a | cpu_b}) {
        ChunkKnobs k;
        k.cpu_mask = mask;
        k.threads = threads;
        k.prefill_tokens = 3;
        k.decode_tokens = 4;
        SCOPED_TRACE(::testing::Message() << path << " threads " << threads << " mask " << mask);
        RunTurnOn(*e, k, &chunks);
      }
    }
    EXPECT_GT(chunks, 8);
    EXPECT_EQ(e->Counters().pin_failures, 0u);
    // The calling thread got its own affinity back after every chunk.
    cpu_set_t after;
    ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after));
  }
}

TEST(EngineAffinity, ThreadsOneChunkRunsOnTheMaskedCpuOnly) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const uint64_t allowed = AllowedMask();
  if (NthCpuBit(allowed, 1) == 0) GTEST_SKIP() << "needs 2 CPUs this process may use";
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = MakeEngine(mp.pack);
  ASSERT_TRUE(e);
  // Every allowed CPU in turn: the whole chunk (the caller alone computes it) runs there.
  for (int n = 0; n < 4 && NthCpuBit(allowed, n) != 0; ++n) {
    ChunkKnobs k;
    k.cpu_mask = NthCpuBit(allowed, n);
    k.threads = 1;
    int chunks = 0;
    RunTurnOn(*e, k, &chunks);
    EXPECT_GT(chunks, 1);
  }
}

TEST(EngineAffinity, PinningFailuresAreCountedAndReported) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const uint64_t allowed = AllowedMask();
  if (allowed & (uint64_t{1} << 63)) GTEST_SKIP() << "CPU 63 exists here";
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (const auto& path : {mp.pack, mp.plain}) {
    auto e = MakeEngine(path);
    ASSERT_TRUE(e);
    const std::vector<TokenId> prompt = {1, 403, 407, 261};
    TurnSpec ts;
    ts.prompt = prompt;
    ts.max_tokens = 4;
    ASSERT_TRUE(e->StartTurn(0, ts).has_value());
    ChunkKnobs k;
    k.cpu_mask = uint64_t{1} << 63;  // no such CPU: the OS refuses every pin
    k.threads = 2;
    auto r = e->RunChunk(0, k);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();  // the chunk still runs
    // One worker (threads = 2 pool) + the calling thread.
    EXPECT_EQ(r->pin_failures, 2) << path;
    EXPECT_NE(r->cpus_ran, 0u);
    EXPECT_EQ(r->cpus_ran & k.cpu_mask, 0u);  // it ran where the OS let it, and says so
    EXPECT_EQ(e->Counters().pin_failures, 2u);
    EXPECT_EQ(e->Counters().cpu_mask_refusals, 1u);
    EXPECT_FALSE(e->Pinning().failures.empty());
    // Back to a real CPU: no failure any more.
    k.cpu_mask = NthCpuBit(allowed, 0);
    auto ok = e->RunChunk(0, k);
    ASSERT_TRUE(ok.has_value());
    EXPECT_EQ(ok->pin_failures, 0);
    EXPECT_EQ(ok->cpus_ran & ~k.cpu_mask, 0u);
    EXPECT_EQ(e->Counters().pin_failures, 2u);
  }
}

TEST(EngineAffinity, IsaTierOfTheOtherFamilyIsReportedRefused) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = MakeEngine(mp.pack);
  ASSERT_TRUE(e);
  const std::vector<TokenId> prompt = {1, 403, 407, 261};
  TurnSpec ts;
  ts.prompt = prompt;
  ts.max_tokens = 8;
  ASSERT_TRUE(e->StartTurn(0, ts).has_value());
#if defined(__aarch64__)
  const kernels::IsaTier foreign = kernels::IsaTier::kAvx2;
#else
  const kernels::IsaTier foreign = kernels::IsaTier::kNeon;
#endif
  ChunkKnobs k;
  k.max_isa = kernels::IsaTier::kScalar;
  auto r = e->RunChunk(0, k);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->isa_refused);
  EXPECT_EQ(r->isa, kernels::IsaTier::kScalar);
  k.max_isa = foreign;
  r = e->RunChunk(0, k);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->isa_refused);
  EXPECT_EQ(r->isa, kernels::IsaTier::kScalar);  // the tier in force stays, reported
  EXPECT_EQ(e->Counters().isa_refusals, 1u);
  ASSERT_TRUE(kernels::SetMaxIsaTier(kernels::BestIsaTier()).has_value());
}

// Starts a fresh turn of a 40-token prompt on slot 0 and returns knobs that prefill it in a
// 32- and an 8-token chunk under `ceiling`, then decode up to max_tokens.
Result<ChunkKnobs> StartSplitPrefill(Engine& e, Precision p, kernels::IsaTier ceiling,
                                     int32_t max_tokens) {
  std::vector<TokenId> prompt(40);
  prompt[0] = 1;
  for (size_t i = 1; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(300 + i);
  TurnSpec ts;
  ts.prompt = prompt;
  ts.max_tokens = max_tokens;
  ts.keep_context = false;
  if (auto st = e.StartTurn(0, ts); !st) return std::unexpected(st.error());
  ChunkKnobs k;
  k.precision = p;
  k.max_isa = ceiling;
  k.prefill_tokens = 32;
  return k;
}

// The AMX tiles run when the ceiling allows them, the host's tier choice picked the AMX
// GEMM and the chunk has 16 tokens or more, and the chunk says so from inside the kernels
// (ChunkResult::tile_gemms): a 40-token prompt in a 32- and an 8-token chunk, then decode, under
// the best tier and under AVX-512 VNNI.
TEST(EngineAffinity, AmxTilesRunOnlyWhereDecidedAndAreObserved) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = MakeEngine(mp.pack);
  ASSERT_TRUE(e);
  const bool amx = kernels::IsaTierSupported(kernels::IsaTier::kAmx);
  if (!amx) std::printf("[ note     ] this CPU has no AMX tier: every chunk must count 0 tiles\n");
  for (kernels::IsaTier ceiling : {kernels::BestIsaTier(), kernels::IsaTier::kAvx512Vnni}) {
    if (!kernels::IsaTierInFamily(ceiling)) continue;
    for (Precision p : {Precision::kW8A16, Precision::kW4A8}) {
      SCOPED_TRACE(std::string(kernels::IsaTierName(ceiling)) + " " +
                   std::string(PrecisionName(p)));
      const auto k = StartSplitPrefill(*e, p, ceiling, 4);
      ASSERT_TRUE(k.has_value()) << k.error().ToString();
      std::vector<int32_t> tiles;
      for (bool done = false; !done;) {
        auto r = e->RunChunk(0, *k);
        ASSERT_TRUE(r.has_value());
        // The ceiling allows the tiles, and this host's measured tier choice (tier_choice.h)
        // picked the AMX GEMM for the precision (under ASan it may not).
        const auto family = p == Precision::kW8A16 ? kernels::MatmulFamily::kGemmW8A16
                                                   : kernels::MatmulFamily::kGemmW4A8;
        const bool tiles_allowed =
            r->isa == kernels::IsaTier::kAmx &&
            kernels::ChosenTiers(r->isa)[static_cast<size_t>(family)] == kernels::IsaTier::kAmx;
        const bool wide = r->phase == ChunkPhase::kPrefill && r->prompt_tokens >= 16;
        if (tiles_allowed && wide) {
          EXPECT_GT(r->tile_gemms, 0) << "prefill of " << r->prompt_tokens << " tokens";
        } else {
          EXPECT_EQ(r->tile_gemms, 0) << "isa " << kernels::IsaTierName(r->isa) << ", "
                                      << r->prompt_tokens << " prompt tokens";
        }
        tiles.push_back(r->tile_gemms);
        done = r->finished;
      }
      ASSERT_GE(tiles.size(), 3u);  // 32 + 8 prompt tokens, then decode
    }
  }
  ASSERT_TRUE(kernels::SetMaxIsaTier(kernels::BestIsaTier()).has_value());
}

// The tier whose own kernel a table of tier t holds for a kind of matmul (docs/deployment.md):
// amx shares the AVX-512 GEMVs; the NEON tiers share NEON's W8A16 matmuls, and i8mm
// dotprod's W4A8 GEMV.
kernels::IsaTier OwnTier(kernels::MatmulFamily f, kernels::IsaTier t) {
  using kernels::IsaTier;
  using kernels::MatmulFamily;
  const bool gemv = f == MatmulFamily::kGemvW8A16 || f == MatmulFamily::kGemvW4A8;
  const bool w8 = f == MatmulFamily::kGemvW8A16 || f == MatmulFamily::kGemmW8A16;
  switch (t) {
    case IsaTier::kAmx: return gemv ? IsaTier::kAvx512Vnni : IsaTier::kAmx;
    case IsaTier::kNeonDotprod: return w8 ? IsaTier::kNeon : IsaTier::kNeonDotprod;
    case IsaTier::kNeonI8mm:
      return w8 ? IsaTier::kNeon : gemv ? IsaTier::kNeonDotprod : IsaTier::kNeonI8mm;
    default: return t;
  }
}

uint32_t Bit(kernels::IsaTier t) { return 1u << static_cast<int>(t); }

// Every chunk reports the matmul kernels it called (ChunkResult::gemv_tiers / gemm_tiers):
// under every ceiling this CPU supports, a 40-token prompt's prefill chunks (32 + 8 tokens)
// ran the GEMM of the tier this host's tier choice picked for the precision, the decode
// chunks that tier's GEMV and no GEMM, never above the ceiling.
TEST(EngineAffinity, ChunksReportTheMatmulKernelsTheyCalled) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = MakeEngine(mp.pack);
  ASSERT_TRUE(e);
  for (int ti = 0; ti < kernels::kNumIsaTiers; ++ti) {
    const auto ceiling = static_cast<kernels::IsaTier>(ti);
    if (!kernels::IsaTierInFamily(ceiling) || !kernels::IsaTierSupported(ceiling)) continue;
    const auto chosen = kernels::ChosenTiers(ceiling);
    for (Precision p : {Precision::kW8A16, Precision::kW4A8}) {
      SCOPED_TRACE(std::string(kernels::IsaTierName(ceiling)) + " " +
                   std::string(PrecisionName(p)));
      const bool w8 = p == Precision::kW8A16;
      const auto gemv = w8 ? kernels::MatmulFamily::kGemvW8A16 : kernels::MatmulFamily::kGemvW4A8;
      const auto gemm = w8 ? kernels::MatmulFamily::kGemmW8A16 : kernels::MatmulFamily::kGemmW4A8;
      const kernels::IsaTier gemv_tier = OwnTier(gemv, chosen[static_cast<size_t>(gemv)]);
      const kernels::IsaTier gemm_tier = OwnTier(gemm, chosen[static_cast<size_t>(gemm)]);
      EXPECT_LE(kernels::IsaTierRank(gemv_tier), kernels::IsaTierRank(ceiling));
      EXPECT_LE(kernels::IsaTierRank(gemm_tier), kernels::IsaTierRank(ceiling));
      const auto k = StartSplitPrefill(*e, p, ceiling, 3);
      ASSERT_TRUE(k.has_value()) << k.error().ToString();
      int prefills = 0, decodes = 0;
      for (bool done = false; !done;) {
        auto r = e->RunChunk(0, *k);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(r->isa, ceiling);
        if (r->phase == ChunkPhase::kPrefill) {
          ++prefills;
          EXPECT_EQ(r->gemm_tiers, Bit(gemm_tier)) << kernels::IsaTiersText(r->gemm_tiers);
          // The last prompt token's logits may come from a GEMV in the same chunk.
          EXPECT_TRUE(r->gemv_tiers == 0 || r->gemv_tiers == Bit(gemv_tier))
              << kernels::IsaTiersText(r->gemv_tiers);
        } else {
          ++decodes;
          EXPECT_EQ(r->gemm_tiers, 0u) << kernels::IsaTiersText(r->gemm_tiers);
          EXPECT_EQ(r->gemv_tiers, Bit(gemv_tier)) << kernels::IsaTiersText(r->gemv_tiers);
        }
        done = r->finished;
      }
      EXPECT_EQ(prefills, 2);
      EXPECT_GE(decodes, 1);
    }
  }
  ASSERT_TRUE(kernels::SetMaxIsaTier(kernels::BestIsaTier()).has_value());
}

}  // namespace
}  // namespace ari::runtime
