// Memory yield in the real engine (stories260K pack, F16 and INT8 KV): ReleaseMemory drops
// the model mapping's pages from the process (its Rss in /proc/self/smaps goes to ~0) and
// hands the KV arena back (RssAnon falls by the slots' KV bytes, outside ASan); Rewarm
// reads the weights in again (the mapping's Rss comes back without a chunk running) and
// the next turns give the same tokens as an engine that never yielded. Locked memory is
// unlocked for the release and locked again. A turn left in a slot is abandoned; misuse
// (twice, Rewarm without a release, the reference path) is an error value.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/eval/proc_memory.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

const std::vector<TokenId> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 290, 300};

// Named bounds.
constexpr double kResidentAfterRelease = 0.02;  // of the file: pages left mapped (none expected)
constexpr double kWarmedFraction = 0.5;         // of the file: weights resident after Rewarm (the
                                                // embedding table, read per row, is not warmed)
constexpr double kAnonReleasedFraction = 0.8;   // of MemoryYield::kv_bytes, seen in RssAnon

uint64_t MappingRss(const std::filesystem::path& p) { return eval::MappingRssBytes(p); }
uint64_t RssAnon() { return eval::ProcStatusBytes("RssAnon:"); }

std::unique_ptr<Engine> Make(const std::filesystem::path& path, KvType kv) {
  EngineOptions o;
  o.model_path = path;
  o.slots = 8;  // 8 slots of KV: the release shows in RssAnon
  o.context_length = 512;
  o.threads = 1;
  o.kv_type = kv;
  o.park_areas = 2;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().ToString());
  return e ? std::move(*e) : nullptr;
}

// One sampled turn (fixed seed) in `slot`, whole.
std::vector<TokenId> RunTurn(Engine& e, int32_t slot) {
  TurnSpec t;
  t.prompt = kPrompt;
  t.max_tokens = 64;
  t.sampling.temperature = 0.9f;
  t.sampling.top_k = 40;
  t.sampling.seed = 11;
  std::vector<TokenId> out;
  EXPECT_TRUE(e.StartTurn(slot, t).has_value());
  ChunkKnobs k;
  k.threads = 1;
  k.prefill_tokens = 8;
  k.decode_tokens = 8;
  k.kv_type = e.SlotKvType(slot) == KvType::kInt8 ? KvType::kInt8 : KvType::kF16;
  for (int guard = 0; guard < 1000; ++guard) {
    auto r = e.RunChunk(slot, k);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    if (!r) break;
    out.insert(out.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  return out;
}

bool UnderAsan() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#else
  return false;
#endif
}

void CheckYield(KvType kv) {
  SCOPED_TRACE(kv == KvType::kInt8 ? "INT8 KV" : "F16 KV");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  const uint64_t file_bytes = std::filesystem::file_size(mp.pack);
  std::vector<TokenId> want;
  {
    auto never = Make(mp.pack, kv);  // unmapped before the measurement (one mapping left)
    ASSERT_TRUE(never);
    for (int32_t s = 0; s < never->num_slots(); ++s) want = RunTurn(*never, s);
  }
  auto e = Make(mp.pack, kv);
  ASSERT_TRUE(e);
  for (int32_t s = 0; s < e->num_slots(); ++s) {
    EXPECT_EQ(RunTurn(*e, s), want) << "slot " << s;  // every slot's KV touched
  }
  ASSERT_GT(want.size(), 8u);
  const uint64_t mapped_before = MappingRss(mp.pack);
  const uint64_t anon_before = RssAnon();
  EXPECT_GT(mapped_before, 0u);

  auto y = e->ReleaseMemory(false);
  ASSERT_TRUE(y.has_value()) << y.error().ToString();
  EXPECT_TRUE(e->memory_released());
  EXPECT_GE(y->model_bytes, file_bytes);
  EXPECT_GT(y->kv_bytes, 0u);
  EXPECT_GT(y->park_bytes, 0u);  // both park areas hold no turn
  const uint64_t mapped_in = MappingRss(mp.pack);
  const uint64_t anon_in = RssAnon();
  std::printf(
      "[standby] model mapping Rss %llu -> %llu bytes (file %llu); RssAnon %llu -> %llu "
      "(KV released %llu, park %llu)\n",
      static_cast<unsigned long long>(mapped_before), static_cast<unsigned long long>(mapped_in),
      static_cast<unsigned long long>(file_bytes), static_cast<unsigned long long>(anon_before),
      static_cast<unsigned long long>(anon_in), static_cast<unsigned long long>(y->kv_bytes),
      static_cast<unsigned long long>(y->park_bytes));
  EXPECT_LE(static_cast<double>(mapped_in), kResidentAfterRelease * file_bytes);
  if (!UnderAsan()) {  // ASan's shadow and quarantine pages move RssAnon on their own
    EXPECT_GE(static_cast<double>(anon_before - std::min(anon_before, anon_in)),
              kAnonReleasedFraction * static_cast<double>(y->kv_bytes + y->park_bytes));
  }
  EXPECT_FALSE(e->ReleaseMemory(false).has_value());  // already released

  auto w = e->Rewarm();
  ASSERT_TRUE(w.has_value()) << w.error().ToString();
  EXPECT_FALSE(e->memory_released());
  EXPECT_GE(static_cast<double>(MappingRss(mp.pack)), kWarmedFraction * file_bytes)
      << "warmed " << *w << " bytes";
  EXPECT_FALSE(e->Rewarm().has_value());  // nothing released any more
  for (int32_t s = 0; s < e->num_slots(); ++s) {
    EXPECT_EQ(RunTurn(*e, s), want) << "slot " << s << " after RESUME";
  }
}

TEST(EngineStandby, ReleasesModelAndKvPagesAndResumesTokenForToken) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  CheckYield(KvType::kF16);
  CheckYield(KvType::kInt8);
}

TEST(EngineStandby, MisuseIsAnErrorValue) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = Make(mp.pack, KvType::kF16);
  ASSERT_TRUE(e);
  auto none = e->Rewarm();
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ErrorCode::kInvalidArgument);
  TurnSpec t;
  t.prompt = kPrompt;
  t.max_tokens = 32;
  ASSERT_TRUE(e->StartTurn(0, t).has_value());
  ChunkKnobs k;
  k.threads = 1;
  k.prefill_tokens = 4;
  ASSERT_TRUE(e->RunChunk(0, k).has_value());
  // A turn left in a slot is abandoned: the slot is empty after the release.
  ASSERT_GT(e->SlotPosition(0), 0);
  ASSERT_TRUE(e->ReleaseMemory(false).has_value());
  EXPECT_EQ(e->SlotPosition(0), 0);
  ASSERT_TRUE(e->Rewarm().has_value());
  // The reference path (a plain GGUF run as fp32) cannot yield.
  EngineOptions o;
  o.model_path = mp.plain;
  o.context_length = 128;
  o.threads = 1;
  o.plain_gguf = PlainGguf::kReference;
  auto ref = Engine::Create(o);
  ASSERT_TRUE(ref.has_value());
  auto u = (*ref)->ReleaseMemory(false);
  ASSERT_FALSE(u.has_value());
  EXPECT_EQ(u.error().code, ErrorCode::kUnsupported);
}

TEST(EngineStandby, LockedMemoryIsUnlockedForTheReleaseAndLockedAgain) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = Make(mp.pack, KvType::kF16);
  ASSERT_TRUE(e);
  auto locked = e->LockMemory();
  if (!locked) GTEST_SKIP() << "mlock refused here: " << locked.error().ToString();
  const uint64_t bytes = e->locked_bytes();
  ASSERT_GT(bytes, 0u);
  auto y = e->ReleaseMemory(true);  // with the page cache dropped too
  ASSERT_TRUE(y.has_value()) << y.error().ToString();
  EXPECT_TRUE(y->page_cache_dropped);
  EXPECT_GT(y->kv_bytes, 0u);  // madvise on locked pages would have refused
  EXPECT_EQ(e->locked_bytes(), 0u);
  ASSERT_TRUE(e->Rewarm().has_value());
  EXPECT_EQ(e->locked_bytes(), bytes);
  EXPECT_FALSE(RunTurn(*e, 0).empty());
}

}  // namespace
}  // namespace ari::runtime
