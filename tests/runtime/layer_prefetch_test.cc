// Next-layer prefetch (runtime/engine/layer_prefetch.h), end to end on the pack of a
// random 16-layer model (22 MiB, well past the disk's read-ahead, so that starting cold
// means cold): what each chunk's forward pass did (ChunkResult::layer_prefetches, counted
// where the madvise is made) against the decision: always under kOn, never under kOff,
// and under kAuto on a pack that starts outside the page cache, on until the residency
// recheck finds its pages in, then off.
#include "runtime/engine/layer_prefetch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "runtime/core/mapped_file.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/paging.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

constexpr int32_t kLayers = 16;
constexpr int32_t kRecheckTokens = 16;  // short, so one turn crosses several rechecks

const testing::ModelPair& Model() {
  static const testing::ModelPair mp = [] {
    testing::TinySpec spec;
    spec.dim = 256;
    spec.n_layers = kLayers;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.ffn = 768;
    spec.vocab = 64;
    spec.ctx = 256;
    return testing::TinyPair(spec, "prefetch16");
  }();
  return mp;
}

std::unique_ptr<Engine> Make(const std::filesystem::path& pack, LayerPrefetch mode) {
  EngineOptions o;
  o.model_path = pack;
  o.context_length = 256;
  o.max_output = 128;
  o.threads = 1;
  o.layer_prefetch = mode;
  o.layer_prefetch_recheck_tokens = kRecheckTokens;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().ToString());
  return e ? std::move(*e) : nullptr;
}

// One greedy W8A16 turn (prefill 8, decode 4 per chunk); every chunk's result.
std::vector<ChunkResult> Turn(Engine& e, int max_tokens) {
  const std::vector<TokenId> prompt = {1, 40, 47, 26, 37, 43, 38, 28};
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = max_tokens;
  std::vector<ChunkResult> chunks;
  EXPECT_TRUE(e.StartTurn(0, t).has_value());
  ChunkKnobs k;
  k.precision = Precision::kW8A16;
  k.prefill_tokens = 8;
  k.decode_tokens = 4;
  k.greedy_only = true;
  for (int guard = 0; guard < 1000; ++guard) {
    auto r = e.RunChunk(0, k);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    if (!r) break;
    chunks.push_back(*r);
    if (r->finished) break;
  }
  return chunks;
}

// What a chunk's forward passes make when prefetching: one call per layer but the last,
// per pass (a prefill chunk is one pass; a decode chunk one per token).
int32_t PrefetchesWhenOn(const ChunkResult& r) {
  const int32_t passes =
      r.phase == ChunkPhase::kPrefill ? 1 : static_cast<int32_t>(r.tokens.size());
  return (kLayers - 1) * passes;
}

TEST(LayerPrefetchControl, OnAndOffRunAsDecided) {
  const auto& mp = Model();
  ASSERT_TRUE(mp.ok);
  for (const LayerPrefetch mode : {LayerPrefetch::kOn, LayerPrefetch::kOff}) {
    auto e = Make(mp.pack, mode);
    ASSERT_TRUE(e);
    for (const ChunkResult& r : Turn(*e, 60)) {
      EXPECT_EQ(r.layer_prefetches, mode == LayerPrefetch::kOn ? PrefetchesWhenOn(r) : 0);
    }
    EXPECT_EQ(e->Counters().prefetch_rechecks, 0u);  // fixed modes never sample again
  }
}

TEST(LayerPrefetchControl, AutoStopsOnceAColdPackIsResident) {
  const auto& mp = Model();
  ASSERT_TRUE(mp.ok);
  // Start cold: drop the (written and fsynced, unmapped) pack from the page cache.
  const int fd = ::open(mp.pack.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
  {
    auto m = MappedFile::Open(mp.pack);
    ASSERT_TRUE(m.has_value());
    auto resident = ResidentBytes(m->data(), m->size());
    ASSERT_TRUE(resident.has_value());
    if (*resident * 2 > m->size()) {
      GTEST_SKIP() << "the page cache kept " << *resident << " of " << m->size()
                   << " bytes of the pack after POSIX_FADV_DONTNEED (e.g. tmpfs or an "
                      "emulator): cannot start cold";
    }
  }
  auto e = Make(mp.pack, LayerPrefetch::kAuto);
  ASSERT_TRUE(e);
  EXPECT_NE(e->memory_plan().ToString().find("layer prefetch (MADV_WILLNEED on the next layer) on"),
            std::string::npos)
      << e->memory_plan().ToString();
  const std::vector<ChunkResult> chunks = Turn(*e, 100);
  ASSERT_FALSE(chunks.empty());
  // On from the start, off from the first recheck on (the turn has read every page), and
  // never a partial chunk: the switch happens between chunks.
  size_t first_off = chunks.size();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkResult& r = chunks[i];
    if (first_off == chunks.size() && r.layer_prefetches == 0) first_off = i;
    EXPECT_EQ(r.layer_prefetches, i < first_off ? PrefetchesWhenOn(r) : 0) << "chunk " << i;
  }
  EXPECT_GT(first_off, 0u);  // the first chunks prefetched
  EXPECT_LT(first_off, chunks.size());
  int64_t tokens_before_off = 0;
  for (size_t i = 0; i < first_off; ++i) {
    tokens_before_off += chunks[i].prompt_tokens + static_cast<int64_t>(chunks[i].tokens.size());
  }
  EXPECT_GE(tokens_before_off, kRecheckTokens);
  EXPECT_LT(tokens_before_off, kRecheckTokens + 8);  // switched at the first recheck due
  const EngineCounters c = e->Counters();
  EXPECT_GE(c.prefetch_rechecks, 2u);  // later rechecks find it resident still
  EXPECT_EQ(c.prefetch_switches, 1u);
}

}  // namespace
}  // namespace ari::runtime
