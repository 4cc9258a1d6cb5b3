// Zero heap allocation in RunChunk/StartTurn after warm-up, across prefill, decode, sampling,
// precision, thread-count and ISA switches, INT8 KV decode, the in-place F16 -> INT8 slot
// conversion and context-cap shrinks, counted by tests/common/counting_allocator.h.
#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <iterator>

#include "runtime/engine/engine.h"
#include "runtime/eval/packed_scorer.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/grammar/token_trie.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "tests/common/counting_allocator.h"
#include "tests/common/test_util.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

// CPUs < 64 this process may run on: the knobs' cpu_mask switches between the first one
// and all of them (re-pinning the workers and the calling thread must not allocate).
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

// stories260K with its tokenizer, 2 threads, 256 positions, layer prefetch rechecked often.
EngineOptions TokenizedOptions(const std::filesystem::path& path) {
  EngineOptions o;
  o.model_path = path;
  o.context_length = 256;
  o.threads = 2;
  o.require_tokenizer = true;
  o.layer_prefetch_recheck_tokens = 8;  // kAuto's residency rechecks run in the counted turns
  return o;
}

void Drive(Engine& e, std::span<const TokenId> prompt, bool sampled, int turns,
           TokenConstraint* constraint = nullptr) {
  const kernels::IsaTier tiers[] = {kernels::IsaTier::kScalar, kernels::IsaTier::kAvx512Vnni};
  const uint64_t all = AllowedMask();
  const uint64_t masks[] = {all & (~all + 1), all};  // lowest allowed CPU, all of them
  for (int t = 0; t < turns; ++t) {
    TurnSpec ts;
    ts.prompt = prompt;
    ts.max_tokens = 40;
    ts.keep_context = false;
    if (sampled) {
      ts.sampling.temperature = 0.8f;
      ts.sampling.top_p = 0.9f;
      ts.sampling.top_k = 20;
    }
    ts.sampling.constraint = constraint;
    ASSERT_TRUE(e.StartTurn(0, ts).has_value());
    int32_t masked = 0;
    for (int c = 0;; ++c) {
      ChunkKnobs k;
      k.precision = (c % 2) ? Precision::kW4A8 : Precision::kW8A16;
      k.threads = 1 + c % 2;
      k.max_isa = tiers[c % 2];
      k.cpu_mask = masks[(c / 2) % 2];
      k.prefill_tokens = 3;
      k.decode_tokens = 5;
      k.greedy_only = (c % 3) == 0;
      auto r = e.RunChunk(0, k);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->pin_failures, 0);
      masked += r->masked_tokens;
      if (r->finished) break;
    }
    if (constraint != nullptr) {
      EXPECT_GT(masked, 0);  // the mask ran on this turn
    }
  }
}

// Memory-ladder knobs: F16 for the first chunks, then INT8 (a live slot converted in place,
// then INT8 decode), a context cap that shrinks the slot (re-prefill), an output cap.
void DriveMemory(Engine& e, std::span<const TokenId> prompt, bool sampled, int turns) {
  for (int t = 0; t < turns; ++t) {
    TurnSpec ts;
    ts.prompt = prompt;
    ts.max_tokens = 60;
    ts.keep_context = t % 2 == 0;  // multi-turn too: the cap then also cuts old turns
    ts.pinned_prefix = t % 3 == 0 ? -1 : 2;
    if (sampled) {
      ts.sampling.temperature = 0.8f;
      ts.sampling.top_p = 0.9f;
      ts.sampling.top_k = 20;
    }
    ASSERT_TRUE(e.StartTurn(0, ts).has_value());
    int shrinks = 0, conversions = 0;
    for (int c = 0;; ++c) {
      ChunkKnobs k;
      k.kv_type = c >= 3 ? KvType::kInt8 : KvType::kF16;
      k.prefill_tokens = 5;
      k.decode_tokens = 3;
      k.context_cap = 32;
      k.output_cap = 50;
      k.threads = 1 + c % 2;
      auto r = e.RunChunk(0, k);
      ASSERT_TRUE(r.has_value());
      shrinks += r->context_shrunk;
      conversions += r->kv_converted;
      if (r->finished) break;
    }
    EXPECT_GE(shrinks, 1);
    if (e.has_pack() && !ts.keep_context) {
      EXPECT_GE(conversions, 1);  // a reset slot is F16 again, converted at chunk 3
    }
  }
}

TEST(EngineAlloc, NoHeapAllocationWithInt8KvAndContextCap) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (const auto& path : {mp.pack, mp.plain}) {
    EngineOptions o;
    o.model_path = path;
    o.context_length = 256;
    o.threads = 2;
    o.layer_prefetch = LayerPrefetch::kOn;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.has_value());
    const std::vector<TokenId> prompt = {1, 403, 407, 261, 378, 432, 383, 286};
    DriveMemory(**e, prompt, true, 1);  // warm-up
    testing::CountAllocations allocations;
    DriveMemory(**e, prompt, false, 3);
    DriveMemory(**e, prompt, true, 3);
    EXPECT_EQ(allocations.count(), 0) << path;
  }
}

TEST(EngineAlloc, NoHeapAllocationAfterWarmUp) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (const auto& path : {mp.pack, mp.plain}) {
    auto e = Engine::Create(TokenizedOptions(path));
    ASSERT_TRUE(e.has_value());
    const std::vector<TokenId> prompt = {1, 403, 407, 261, 378, 432, 383, 286};
    Drive(**e, prompt, true, 1);  // warm-up
    testing::CountAllocations allocations;
    Drive(**e, prompt, false, 4);
    Drive(**e, prompt, true, 4);
    EXPECT_EQ(allocations.count(), 0) << path;
  }
  EXPECT_TRUE(kernels::SetMaxIsaTier(kernels::BestIsaTier()).has_value());
}

// Prefill chunks of 16 tokens and more run the GEMMs on AMX tiles where the CPU has them
// (fewer tokens take the AVX-512 GEMMs): that path allocates nothing either.
TEST(EngineAlloc, NoHeapAllocationWithLongPrefillChunks) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = Engine::Create(TokenizedOptions(mp.pack));
  ASSERT_TRUE(e.has_value());
  std::vector<TokenId> prompt(40);
  prompt[0] = 1;
  for (size_t i = 1; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(260 + (i * 37) % 250);
  const auto run = [&] {
    for (Precision p : {Precision::kW8A16, Precision::kW4A8}) {
      TurnSpec ts;
      ts.prompt = prompt;
      ts.max_tokens = 4;
      ts.keep_context = false;
      ASSERT_TRUE((*e)->StartTurn(0, ts).has_value());
      for (;;) {
        ChunkKnobs k;
        k.precision = p;
        k.max_isa = kernels::BestIsaTier();
        k.prefill_tokens = 32;  // a 32- and an 8-token chunk
        k.decode_tokens = 4;
        auto r = (*e)->RunChunk(0, k);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(r->isa, kernels::BestIsaTier());
        if (r->finished) break;
      }
    }
  };
  run();  // warm-up
  testing::CountAllocations allocations;
  run();
  run();
  EXPECT_EQ(allocations.count(), 0) << "best tier " << kernels::IsaTierName(kernels::BestIsaTier());
}

// Constrained decoding on the token loop: the mask (trie walk, fast path, cache), the
// constraint's advance and Reset at StartTurn allocate nothing either.
TEST(EngineAlloc, NoHeapAllocationWithResponseFormat) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = Engine::Create(TokenizedOptions(mp.pack));
  ASSERT_TRUE(e.has_value());
  auto trie = TokenTrie::Build(*(*e)->model().tokenizer());
  ASSERT_TRUE(trie.has_value());
  std::ifstream in(testing::SourceDir() / "config" / "schemas" / "navigation_destination.json");
  const std::string schema((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto g = CompileJsonSchema(schema);
  ASSERT_TRUE(g.has_value()) << g.error().ToString();
  TokenConstraint c(*g, *trie);
  const std::vector<TokenId> prompt = {1, 403, 407, 261, 378, 432, 383, 286};
  Drive(**e, prompt, true, 2, &c);  // warm-up
  testing::CountAllocations allocations;
  Drive(**e, prompt, false, 3, &c);
  Drive(**e, prompt, true, 3, &c);
  EXPECT_EQ(allocations.count(), 0);
  EXPECT_TRUE(kernels::SetMaxIsaTier(kernels::BestIsaTier()).has_value());
}

}  // namespace
}  // namespace ari::runtime

namespace ari::runtime {
namespace {

// PackedScorer::Score (ari-ppl's packed path): no allocation after Create, at both packed
// precisions, with and without dropped blocks, for windows of every length up to its own.
TEST(EngineAlloc, PackedScorerScoresWithoutAllocation) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  PackOptions po;
  po.layer_importance = {0.3f, 0.2f, 0.1f, 0.15f, 0.3f};
  const auto& mp = testing::Stories260K(po, "s260k-imp");
  ASSERT_TRUE(mp.ok);
  auto m = Model::Load(mp.pack);
  ASSERT_TRUE(m);
  ScorerOptions so;
  so.window = 32;
  so.threads = 2;
  auto sc = PackedScorer::Create(**m, so);
  ASSERT_TRUE(sc) << sc.error().ToString();
  std::vector<TokenId> toks(32);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<TokenId>(1 + (i * 37) % 500);
  for (int32_t level : {0, 2}) {
    ASSERT_TRUE((*sc)->SetDropLevel(level));
    ASSERT_TRUE((*sc)->Score(toks, kernels::PackedPrecision::kW8));  // warm-up
    testing::CountAllocations allocations;
    for (auto p : {kernels::PackedPrecision::kW8, kernels::PackedPrecision::kW4}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{32}}) {
        auto r = (*sc)->Score(std::span<const TokenId>(toks).first(n), p);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->size(), n * static_cast<size_t>((*m)->config().vocab_size));
      }
    }
    EXPECT_EQ(allocations.count(), 0) << "drop level " << level;
  }
}

}  // namespace
}  // namespace ari::runtime
