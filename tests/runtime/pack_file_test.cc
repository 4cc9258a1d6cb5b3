#include "runtime/model/pack_file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/kernels/pack.h"
#include "runtime/model/model.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

TEST(PackFile, WritesValidGgufWithBothPrecisions) {
  testing::TinySpec s;
  s.matrix_type = TensorType::kQ8_0;
  s.dim = 64, s.ffn = 96, s.n_heads = 4, s.n_kv_heads = 2;
  auto mp = testing::TinyPair(s, "pack_q8");
  ASSERT_TRUE(mp.ok);
  auto plain = GgufFile::Open(mp.plain);
  auto pack = GgufFile::Open(mp.pack);
  ASSERT_TRUE(plain.has_value() && pack.has_value());
  EXPECT_TRUE(IsPack(*pack));
  EXPECT_FALSE(IsPack(*plain));
  EXPECT_EQ(*pack->GetUint("ari.pack.version"), kPackVersion);
  EXPECT_EQ(*pack->GetUint("ari.pack.group_size"), 32u);
  EXPECT_FALSE(pack->Has("ari.pack.layer_importance"));
  EXPECT_EQ(pack->FindTensor("blk.0.attn_q.weight"), nullptr);
  ASSERT_NE(pack->FindTensor("blk.0.attn_q.weight.w8"), nullptr);
  ASSERT_NE(pack->FindTensor("blk.1.ffn_down.weight.w4"), nullptr);
  ASSERT_NE(pack->FindTensor("token_embd.weight"), nullptr);
  EXPECT_EQ(pack->FindTensor("token_embd.weight")->type, TensorType::kQ8_0);
  // Model + BindPack, and W8 rows equal the Q8_0 source rows exactly.
  auto m = Model::Load(mp.pack, {.require_tokenizer = false});
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_FALSE((*m)->config().tied_embeddings);
  auto pw = BindPack((*m)->file(), (*m)->config());
  ASSERT_TRUE(pw.has_value()) << pw.error().ToString();
  auto src = Model::Load(mp.plain, {.require_tokenizer = false});
  ASSERT_TRUE(src.has_value());
  const WeightMatrix& q = (*src)->weights().layers[1].attn_q;
  std::vector<float> want(64), got(64);
  for (int64_t r = 0; r < q.rows; ++r) {
    q.ReadRow(r, want.data());
    ASSERT_TRUE(kernels::UnpackRow(pw->layers[0][1].q, r, got).has_value());
    ASSERT_EQ(got, want) << r;
  }
  EXPECT_GT(pw->BytesPerToken(kernels::PackedPrecision::kW8),
            pw->BytesPerToken(kernels::PackedPrecision::kW4));
}

// Version 2 layout: shared tensors, then every .w8 matrix, then every .w4 matrix, so
// that a run of one precision maps none of the other's bytes (2 MiB file mappings).
TEST(PackFile, GroupsEachPrecisionInOneRange) {
  testing::TinySpec s;
  s.dim = 64, s.ffn = 96, s.n_heads = 4, s.n_kv_heads = 2;
  auto mp = testing::TinyPair(s, "pack_groups");
  ASSERT_TRUE(mp.ok);
  auto pack = GgufFile::Open(mp.pack);
  ASSERT_TRUE(pack.has_value());
  struct Range {
    const std::byte *begin = nullptr, *end = nullptr;
    int count = 0;
  } shared, w8, w4;
  for (const TensorInfo& t : pack->tensors()) {
    Range& r = t.name.ends_with(".w8") ? w8 : t.name.ends_with(".w4") ? w4 : shared;
    if (r.count++ == 0 || t.data < r.begin) r.begin = t.data;
    r.end = std::max(r.end, t.data + t.nbytes);
  }
  ASSERT_GT(shared.count, 0);
  ASSERT_EQ(w8.count, w4.count);
  ASSERT_EQ(w8.count, 2 * 7 + 1);  // 2 blocks x 7 matrices + the classifier
  EXPECT_LE(shared.end, w8.begin);
  EXPECT_LE(w8.end, w4.begin);
}

TEST(PackFile, StoresImportanceAndRejectsBadInput) {
  testing::TinySpec s;
  PackOptions po;
  po.layer_importance = {0.5f, 0.25f};
  auto mp = testing::TinyPair(s, "pack_imp", po);
  ASSERT_TRUE(mp.ok);
  auto m = Model::Load(mp.pack, {.require_tokenizer = false});
  ASSERT_TRUE(m.has_value());
  auto pw = BindPack((*m)->file(), (*m)->config());
  ASSERT_TRUE(pw.has_value());
  EXPECT_EQ(pw->layer_importance, po.layer_importance);
  po.layer_importance = {1.0f};
  EXPECT_FALSE(WritePack(mp.plain, mp.plain.string() + ".bad", po).has_value());
  EXPECT_FALSE(WritePack(mp.pack, mp.plain.string() + ".again").has_value());  // already a pack
}

TEST(PackFile, EngineTimeToReadyAndPlainPaths) {
  testing::TinySpec s;
  s.tied = true;
  auto mp = testing::TinyPair(s, "pack_ttr");
  ASSERT_TRUE(mp.ok);
  EngineOptions o;
  o.model_path = mp.pack;
  o.threads = 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto e = Engine::Create(o);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  std::printf("[measured] tiny pack time to ready %.2f ms\n", ms);
  EXPECT_TRUE((*e)->has_pack());
  std::printf("%s", (*e)->memory_plan().ToString().c_str());
  // A plain GGUF runs its automatic pack by default (ARI_PACK_CACHE: this test's folder)...
  o.model_path = mp.plain;
  auto packed = Engine::Create(o);
  ASSERT_TRUE(packed.has_value()) << packed.error().ToString();
  EXPECT_TRUE((*packed)->has_pack());
  EXPECT_NE((*packed)->loaded_path(), mp.plain);
  EXPECT_TRUE((*packed)->loaded_path().string().ends_with(".pack.gguf"));
  // ... and the fp32 reference path only when asked for.
  o.plain_gguf = PlainGguf::kReference;
  auto r = Engine::Create(o);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE((*r)->has_pack());
  EXPECT_EQ((*r)->loaded_path(), mp.plain);
  const std::vector<TokenId> prompt = {1, 2, 3};
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 4;
  ASSERT_TRUE((*r)->StartTurn(0, t).has_value());
  auto c = (*r)->RunChunk(0, ChunkKnobs{});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->precision, Precision::kReference);
}

}  // namespace
}  // namespace ari::runtime
