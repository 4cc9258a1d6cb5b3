// Disk embedding evidence: a 32000 x 64 fp32 embedding table (8 MB) stays mostly on disk
// while a few hundred tokens are generated through the reference path, because rows are
// read one by one from the mapping (never materialized) and the table is advised
// MADV_RANDOM (no read-around). Residency is measured with mincore.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "runtime/generate.h"
#include "runtime/model.h"
#include "runtime/paging.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tests/runtime/paging_fixture.h"

namespace ari::runtime {
namespace {

TEST(EmbeddingResidencyTest, GenerationTouchesOnlyAFewRowsOfTheTable) {
  const auto vocab = testing::Vocab32k();
  if (vocab.empty()) GTEST_SKIP() << "vocab/ggml-vocab-llama-spm.gguf not found under "
                                  << testing::ModelsDir();
  const auto dir = testing::DiskTempDir("embd");
  const auto path = dir / "embd32k.gguf";
  SynthOptions so;
  so.preset = testing::CustomPreset(/*dim=*/64, /*ffn=*/128, /*layers=*/2, 4, 2);
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
  auto before = ResidentBytes(embd.data, table);
  ASSERT_TRUE(before) << before.error().ToString();

  auto session = Session::Create(**model, {.context_length = 512, .max_batch = 32});
  ASSERT_TRUE(session);
  Sampler sampler((*model)->config().vocab_size, SamplingParams{.temperature = 0.8f, .seed = 7});
  std::set<TokenId> touched;
  int32_t generated = 0;
  std::string prompt = "Once upon a time, a little robot found a red ball in the park.";
  for (int round = 0; round < 8 && generated < 300; ++round) {
    GenerateOptions go;
    go.max_tokens = 300 - generated;
    go.stop_on_bos = false;
    auto r = GenerateFromText(**session, sampler, prompt, EncodeOptions{.add_bos = round == 0},
                              go);
    ASSERT_TRUE(r) << r.error().ToString();
    auto ids = (*model)->tokenizer()->Encode(prompt, EncodeOptions{.add_bos = round == 0});
    touched.insert(ids->begin(), ids->end());
    // Every sampled token but the last went through the embedding.
    for (size_t i = 0; i + 1 < r->tokens.size(); ++i) touched.insert(r->tokens[i]);
    generated += static_cast<int32_t>(r->tokens.size());
    if (r->stop_reason == StopReason::kContextFull) break;
    prompt = " and then";
  }
  auto after = ResidentBytes(embd.data, table);
  ASSERT_TRUE(after);
  const double fraction = static_cast<double>(*after) / static_cast<double>(table);
  std::printf("embedding table %llu bytes (%d x %lld f32); tokens generated %d, distinct rows "
              "read %zu; resident before %llu, after %llu bytes (%.1f%% of the table)\n",
              static_cast<unsigned long long>(table), embd.rows > 0 ? 32000 : 0,
              static_cast<long long>(embd.cols), generated, touched.size(),
              static_cast<unsigned long long>(*before), static_cast<unsigned long long>(*after),
              100.0 * fraction);
  EXPECT_GE(generated, 200);
  // A touched row lies in at most 2 pages; allow a little read-around at the table's edges.
  const uint64_t page = PageSize();
  EXPECT_LE(*after, *before + (2 * touched.size() + 32) * page);
  EXPECT_LT(fraction, 0.25);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::runtime
