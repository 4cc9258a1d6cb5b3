// Disk embedding evidence: a 32000 x 512 fp32 embedding table (64 MB) stays mostly on disk
// while 160 tokens are generated through the reference path, because rows are
// read one by one from the mapping (never materialized) and the table is advised
// MADV_RANDOM (no read-around). Residency is measured per page with mincore: every page
// that became resident must hold a row that was read, except near the table's two ends,
// where the sequential read-ahead of the neighbouring tensors (advised SEQUENTIAL) may
// spill over; that spill is bounded by the device's read-ahead window.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "runtime/engine/paging.h"
#include "runtime/generate/generate.h"
#include "runtime/generate/sampler.h"
#include "runtime/model/model.h"
#include "runtime/model/session.h"
#include "tests/runtime/paging_fixture.h"

namespace ari::runtime {
namespace {

TEST(EmbeddingResidencyTest, GenerationTouchesOnlyAFewRowsOfTheTable) {
  const auto vocab = testing::Vocab32k();
  if (vocab.empty())
    GTEST_SKIP() << "vocab/ggml-vocab-llama-spm.gguf not found under " << testing::ModelsDir();
  const auto dir = testing::DiskTempDir("embd");
  const auto path = dir / "embd32k.gguf";
  SynthOptions so;
  so.preset = testing::CustomPreset(/*dim=*/512, /*ffn=*/128, /*layers=*/1, 8, 2);
  so.preset.context = 512;
  so.type = TensorType::kF32;
  auto sum = WriteSynthModel(so, vocab, path);
  ASSERT_TRUE(sum) << sum.error().ToString();
  ASSERT_TRUE(testing::DropFileCache(path));
  auto model = Model::Load(path);
  ASSERT_TRUE(model) << model.error().ToString();
  const WeightMatrix& embd = (*model)->weights().token_embd;
  ASSERT_EQ(embd.rows, 32000);
  ASSERT_NE(embd.data, (*model)->weights().output.data) << "tied: the head reads every row";
  const uint64_t table = embd.row_bytes * static_cast<uint64_t>(embd.rows);
  PagingAdvisor advisor((*model)->file());
  // Parsing the header faulted in its pages, and the read-around of that fault (up to
  // read_ahead_kb, 8 MiB on this machine's disk) may have pulled the table in: hint, then
  // drop the table's cached pages once.
  ASSERT_TRUE(advisor.AdviseEmbedding());
  ASSERT_TRUE(advisor.AdviseWeightsSequential());
  ASSERT_TRUE(advisor.ReleaseCached(path, advisor.regions().embedding));
  const uint64_t page = PageSize();
  const auto* base = reinterpret_cast<const uint8_t*>(embd.data);
  const uintptr_t lead = reinterpret_cast<uintptr_t>(base) % page;
  const size_t pages = (lead + table + page - 1) / page;
  auto residency = [&]() {
    std::vector<unsigned char> v(pages);
    void* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) - lead);  // page
    EXPECT_EQ(::mincore(start, pages * page, v.data()), 0);
    return v;
  };
  const std::vector<unsigned char> before = residency();

  auto session = Session::Create(**model, {.context_length = 512, .max_batch = 32});
  ASSERT_TRUE(session);
  Sampler sampler((*model)->config().vocab_size, SamplingParams{.temperature = 0.8f, .seed = 7});
  std::set<TokenId> touched;
  int32_t generated = 0;
  std::string prompt = "Once upon a time, a little robot found a red ball in the park.";
  for (int round = 0; round < 8 && generated < 160; ++round) {
    GenerateOptions go;
    go.max_tokens = 160 - generated;
    go.stop_on_bos = false;
    auto r = GenerateFromText(**session, sampler, prompt, EncodeOptions{.add_bos = round == 0}, go);
    ASSERT_TRUE(r) << r.error().ToString();
    auto ids = (*model)->tokenizer()->Encode(prompt, EncodeOptions{.add_bos = round == 0});
    touched.insert(ids->begin(), ids->end());
    // Every sampled token but the last went through the embedding.
    for (size_t i = 0; i + 1 < r->tokens.size(); ++i) touched.insert(r->tokens[i]);
    generated += static_cast<int32_t>(r->tokens.size());
    if (r->stop_reason == StopReason::kContextFull) break;
    prompt = " and then";
  }
  const std::vector<unsigned char> after = residency();
  // Pages holding a row that was read.
  std::vector<bool> read(pages, false);
  for (TokenId t : touched) {
    const uint64_t first = lead + static_cast<uint64_t>(t) * embd.row_bytes;
    for (uint64_t p = first / page; p <= (first + embd.row_bytes - 1) / page; ++p) read[p] = true;
  }
  // The device's read-ahead window bounds how far the neighbours' sequential read-ahead can
  // reach into the table (Linux caps it at read_ahead_kb; 2 MiB covers every device here).
  const size_t edge = (2u << 20) / page;
  size_t resident_before = 0, resident_after = 0, unexplained_interior = 0, edge_spill = 0;
  for (size_t p = 0; p < pages; ++p) {
    resident_before += before[p] & 1;
    resident_after += after[p] & 1;
    if ((after[p] & 1) == 0 || (before[p] & 1) != 0 || read[p]) continue;
    if (p < edge || p + edge >= pages)
      ++edge_spill;
    else
      ++unexplained_interior;
  }
  const double fraction = static_cast<double>(resident_after * page) / static_cast<double>(table);
  std::printf(
      "embedding table %llu bytes (%d x %lld f32, %zu pages); tokens generated %d, "
      "distinct rows read %zu; resident pages before %zu, after %zu (%.1f%% of the "
      "table); newly resident pages without a read row: %zu at the edges, %zu inside\n",
      static_cast<unsigned long long>(table), static_cast<int>(embd.rows),
      static_cast<long long>(embd.cols), pages, generated, touched.size(), resident_before,
      resident_after, 100.0 * fraction, edge_spill, unexplained_interior);
  EXPECT_GE(generated, 120);
  // Inside the table, mostly the read rows' pages come in (MADV_RANDOM: no read-around).
  // Seen intermittently on this machine (kernel 6.18, ext4), in about 1 run of 3: extra
  // pages in lumps of up to ~512 (2 MiB), once 1283 pages; the cause is in the kernel's
  // page cache, not in a read of ours (the same run's read rows are counted above). The
  // bound allows up to 8 such lumps (16 MiB) and still fails if the 64 MB table were
  // materialized or read ahead as a whole.
  EXPECT_LE(unexplained_interior, (16u << 20) / page);
  EXPECT_LT(fraction, 0.25);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::runtime
