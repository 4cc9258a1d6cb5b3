// Forward pass: chunked prefill == token by token, llama (normal RoPE, untied) and qwen2
// (NeoX RoPE, QKV bias, tied embeddings) against an independent naive implementation in
// double precision, every weight type against its dequantized F32 twin, and error cases.
#include "runtime/model/forward.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/generate/generate.h"
#include "runtime/generate/sampler.h"
#include "runtime/model/model.h"
#include "runtime/model/session.h"
#include "tests/common/counting_allocator.h"
#include "tests/common/test_util.h"
#include "tests/runtime/llama2c_fixture.h"
#include "tests/runtime/tiny_model.h"

namespace ari::runtime {
namespace {

using testing::TinySpec;

// fp32 (ours, index-order accumulation) vs double (naive): logits are O(1..10).
constexpr double kNaiveAbsTol = 2e-4;
// Chunked vs token-by-token runs the same arithmetic per token: must be bit-identical.
constexpr float kChunkAbsTol = 0.0f;

std::unique_ptr<Model> LoadTiny(const TinySpec& s, testing::TinyWeights* truth) {
  auto m = Model::FromBytes(testing::BuildTinyModel(s, truth), "tiny-" + s.arch,
                            ModelLoadOptions{.require_tokenizer = false});
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().ToString());
  return m ? std::move(*m) : nullptr;
}

std::vector<std::vector<float>> AllLogits(const Model& m, const std::vector<TokenId>& toks) {
  auto s = Session::Create(m, {.max_batch = static_cast<int32_t>(toks.size()), .all_logits = true});
  EXPECT_TRUE(s.has_value());
  auto l = Forward(**s, toks);
  EXPECT_TRUE(l.has_value()) << (l ? "" : l.error().ToString());
  std::vector<std::vector<float>> out;
  const auto V = static_cast<std::ptrdiff_t>(m.config().vocab_size);
  for (std::ptrdiff_t t = 0; t < std::ssize(toks); ++t) {
    out.emplace_back(l->begin() + t * V, l->begin() + (t + 1) * V);
  }
  return out;
}

void CheckAgainstNaive(const TinySpec& spec) {
  testing::TinyWeights truth;
  auto m = LoadTiny(spec, &truth);
  ASSERT_NE(m, nullptr);
  const std::vector<TokenId> toks = {3, 17, 0, 39, 5, 5, 22, 11, 30};
  auto ours = AllLogits(*m, toks);
  auto ref = testing::NaiveForward(spec, truth, std::vector<int>(toks.begin(), toks.end()));
  double max_err = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    for (int v = 0; v < spec.vocab; ++v)
      max_err = std::max(max_err, std::abs(ours[t][v] - ref[t][v]));
  }
  EXPECT_LT(max_err, kNaiveAbsTol) << spec.arch;
}

TEST(Forward, LlamaGqaUntiedMatchesNaive) {
  TinySpec s;
  s.arch = "llama";
  CheckAgainstNaive(s);
}

TEST(Forward, Qwen2BiasTiedNeoxMatchesNaive) {
  TinySpec s;
  s.arch = "qwen2";
  s.tied = true;
  s.bias = true;
  s.theta = 1000000.0f;
  s.eps = 1e-6f;
  s.n_heads = 4;
  s.n_kv_heads = 1;
  auto m = LoadTiny(s, nullptr);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->config().qkv_bias);
  EXPECT_TRUE(m->config().tied_embeddings);
  EXPECT_EQ(m->config().rope_type, RopeType::kNeox);
  EXPECT_FLOAT_EQ(m->config().rope_theta, 1000000.0f);
  CheckAgainstNaive(s);
}

TEST(Forward, EveryWeightTypeEqualsItsDequantizedF32Twin) {
  for (TensorType type :
       {TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0}) {
    TinySpec s;
    s.dim = 64;
    s.ffn = 96;  // quantized rows must be whole blocks of 32
    s.matrix_type = type;
    testing::TinyWeights truth;
    auto m = LoadTiny(s, &truth);
    ASSERT_NE(m, nullptr);
    // The twin holds the dequantized values in F32: same seed -> same draws.
    TinySpec f = s;
    f.matrix_type = TensorType::kF32;
    testing::TinyWeights truth_f32;
    auto twin_bytes = testing::BuildTinyModel(f, &truth_f32);
    // Overwrite the twin's weights with the dequantized values of `m`.
    GgufWriter w;
    auto parsed = GgufFile::Parse(twin_bytes, "twin");
    ASSERT_TRUE(parsed.has_value());
    w.CopyMetadata(*parsed, "");
    for (const TensorInfo& t : parsed->tensors()) {
      const auto& v = truth.at(t.name);
      std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
      ASSERT_TRUE(
          w.AddTensor(t.name, TensorType::kF32, ne, std::as_bytes(std::span(v))).has_value());
    }
    auto twin = Model::FromBytes(*w.WriteToMemory(), "twin", {.require_tokenizer = false});
    ASSERT_TRUE(twin.has_value()) << twin.error().ToString();
    const std::vector<TokenId> toks = {1, 2, 3, 38, 7};
    auto a = AllLogits(*m, toks);
    auto b = AllLogits(**twin, toks);
    EXPECT_EQ(a, b) << TensorTypeName(type);
    CheckAgainstNaive(s);
  }
}

TEST(Forward, ChunkedPrefillEqualsTokenByToken) {
  TinySpec spec;
  auto m = LoadTiny(spec, nullptr);
  ASSERT_NE(m, nullptr);
  std::vector<TokenId> toks;
  toks.reserve(45);
  for (int i = 0; i < 45; ++i) toks.push_back((i * 7 + 3) % spec.vocab);
  // One call, internally chunked by max_batch 16 (3 chunks).
  auto a = Session::Create(*m, {.max_batch = 16});
  ASSERT_TRUE(a.has_value());
  auto la = Forward(**a, toks);
  ASSERT_TRUE(la.has_value());
  std::vector<float> chunked(la->begin(), la->end());
  EXPECT_EQ((*a)->position(), 45);
  // Token by token.
  auto b = Session::Create(*m, {.max_batch = 1});
  ASSERT_TRUE(b.has_value());
  std::span<const float> lb;
  for (TokenId t : toks) {
    auto r = Forward(**b, std::span<const TokenId>(&t, 1));
    ASSERT_TRUE(r.has_value());
    lb = *r;
  }
  ASSERT_EQ(chunked.size(), lb.size());
  for (size_t i = 0; i < lb.size(); ++i) EXPECT_NEAR(chunked[i], lb[i], kChunkAbsTol);
}

TEST(Forward, Stories260KPrefillEqualsTokenByToken) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/stories260K/stories260K.bin");
  auto m = testing::ConvertAndLoad(ckpt, testing::ModelFile("llama2c/stories260K/tok512.bin"));
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  const std::vector<TokenId> toks = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
  auto all = AllLogits(**m, toks);
  auto s = Session::Create(**m, {.max_batch = 4});
  ASSERT_TRUE(s.has_value());
  for (size_t t = 0; t < toks.size(); ++t) {
    auto r = Forward(**s, std::span<const TokenId>(&toks[t], 1));
    ASSERT_TRUE(r.has_value());
    std::vector<float> one(r->begin(), r->end());
    for (size_t v = 0; v < one.size(); ++v) ASSERT_NEAR(one[v], all[t][v], kChunkAbsTol);
  }
}

TEST(Forward, DecodeAndGenerateDoNotAllocatePerToken) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/stories260K/stories260K.bin");
  auto m = testing::ConvertAndLoad(ckpt, testing::ModelFile("llama2c/stories260K/tok512.bin"));
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  auto s = Session::Create(**m, {.max_batch = 8});
  ASSERT_TRUE(s.has_value());
  const TokenId prompt[] = {1, 403, 407, 261, 378};
  ASSERT_TRUE(Forward(**s, prompt).has_value());
  {
    testing::CountAllocations allocations;
    for (TokenId t = 10; t < 60; ++t) {
      ASSERT_TRUE(Forward(**s, std::span<const TokenId>(&t, 1)).has_value());
    }
    EXPECT_EQ(allocations.count(), 0);
  }
  // Generate allocates its result and history once per call, not per token.
  auto count = [&](int32_t n) {
    auto sess = Session::Create(**m);
    Sampler sampler((*m)->config().vocab_size, SamplingParams{.temperature = 1.0f, .seed = 7});
    GenerateOptions g;
    g.max_tokens = n;
    g.stop_on_bos = false;
    testing::CountAllocations allocations;
    auto r = Generate(**sess, sampler, prompt, g);
    EXPECT_TRUE(r.has_value());
    EXPECT_EQ(r->tokens.size(), static_cast<size_t>(n));
    return allocations.count();
  };
  EXPECT_EQ(count(20), count(200));
}

TEST(Forward, Errors) {
  TinySpec spec;
  spec.ctx = 8;
  auto m = LoadTiny(spec, nullptr);
  ASSERT_NE(m, nullptr);
  auto s = Session::Create(*m, {.max_batch = 4});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(Forward(**s, {}).error().code, ErrorCode::kInvalidArgument);
  const TokenId bad[] = {1, 40};
  EXPECT_EQ(Forward(**s, bad).error().code, ErrorCode::kInvalidArgument);
  const TokenId neg[] = {-1};
  EXPECT_EQ(Forward(**s, neg).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ((*s)->position(), 0);
  const TokenId nine[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto full = Forward(**s, nine);
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(full.error().message.find("context full"), std::string::npos);
  const TokenId eight[] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_TRUE(Forward(**s, eight).has_value());
  EXPECT_EQ((*s)->position(), 8);
  EXPECT_TRUE((*s)->Truncate(3).has_value());
  EXPECT_EQ((*s)->position(), 3);
  EXPECT_FALSE((*s)->Truncate(4).has_value());
  auto all = Session::Create(*m, {.max_batch = 2, .all_logits = true});
  ASSERT_TRUE(all.has_value());
  const TokenId three[] = {1, 2, 3};
  EXPECT_EQ(Forward(**all, three).error().code, ErrorCode::kInvalidArgument);
}

TEST(Session, BuffersAre128ByteAligned) {
  auto m = LoadTiny(TinySpec{}, nullptr);
  ASSERT_NE(m, nullptr);
  auto s = Session::Create(*m);
  ASSERT_TRUE(s.has_value());
  const Session::Buffers& b = (*s)->buffers();
  for (const float* p : {b.x, b.xb, b.xb2, b.q, b.k, b.v, b.hb, b.hb2, b.att, b.row, b.vec,
                         b.logits, b.rope_cos, b.rope_sin}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kBufferAlignment, 0u);
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*s)->KeyRow(0, 0)) % kBufferAlignment, 0u);
  EXPECT_EQ((*s)->context_length(), 64);
}

}  // namespace
}  // namespace ari::runtime
