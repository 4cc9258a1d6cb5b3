#include "runtime/convert/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "tests/common/test_util.h"

namespace ari::runtime {
namespace {

constexpr const char* kVocab = "vocab/ggml-vocab-llama-spm.gguf";

std::vector<char> ReadAll(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::filesystem::path Synth(const std::filesystem::path& vocab, std::string_view preset,
                            TensorType type, uint64_t seed, const std::string& file) {
  auto p = FindSynthPreset(preset);
  EXPECT_TRUE(p.has_value());
  auto out = ari::testing::TempDir("synth") / file;
  auto s = WriteSynthModel(SynthOptions{*p, type, seed}, vocab, out);
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().ToString());
  if (s) {
    EXPECT_EQ(s->file_bytes, std::filesystem::file_size(out));
  }
  return out;
}

void ExpectShape(const GgufFile& f, const std::string& name, TensorType type,
                 std::vector<int64_t> ne) {
  const TensorInfo* t = f.FindTensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->type, type) << name;
  ASSERT_EQ(t->n_dims, ne.size()) << name;
  for (size_t i = 0; i < ne.size(); ++i) EXPECT_EQ(t->ne[i], ne[i]) << name << " dim " << i;
}

TEST(Synth, PresetsAndTypeNames) {
  ASSERT_TRUE(FindSynthPreset("tinyllama-1.1b").has_value());
  auto tl = *FindSynthPreset("tinyllama-1.1b");
  EXPECT_EQ(tl.dim, 2048);
  EXPECT_EQ(tl.ffn, 5632);
  EXPECT_EQ(tl.layers, 22);
  EXPECT_EQ(tl.heads, 32);
  EXPECT_EQ(tl.kv_heads, 4);
  auto q = *FindSynthPreset("qwen2.5-0.5b");
  EXPECT_EQ(q.arch, "qwen2");
  EXPECT_TRUE(q.qkv_bias && q.tied_embeddings);
  EXPECT_TRUE(FindSynthPreset("llama-0.3b").has_value());
  EXPECT_TRUE(FindSynthPreset("tiny-qwen2").has_value());
  auto bad = FindSynthPreset("gpt-5");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("tinyllama-1.1b"), std::string::npos);
  EXPECT_EQ(*ParseTensorTypeName("Q8_0"), TensorType::kQ8_0);
  EXPECT_EQ(*ParseTensorTypeName("q4_0"), TensorType::kQ4_0);
  EXPECT_EQ(*ParseTensorTypeName("f16"), TensorType::kF16);
  EXPECT_EQ(*ParseTensorTypeName("f32"), TensorType::kF32);
  EXPECT_FALSE(ParseTensorTypeName("q5_k").has_value());
}

TEST(Synth, TinyLlamaReadsBackWithRightShapesAndMetadata) {
  ARI_REQUIRE_MODEL(vocab_path, kVocab);
  const auto path = Synth(vocab_path, "tiny", TensorType::kQ8_0, 7, "tiny_q8.gguf");
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetUint("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->GetUint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*f->GetUint("llama.block_count"), 2u);
  EXPECT_EQ(*f->GetUint("llama.attention.head_count"), 4u);
  EXPECT_EQ(*f->GetUint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(*f->GetUint("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(*f->GetUint("llama.context_length"), 512u);
  EXPECT_FLOAT_EQ(*f->GetFloat("llama.rope.freq_base"), 10000.0f);
  EXPECT_FLOAT_EQ(*f->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(*f->GetUint("general.file_type"), 7u);

  // 1 embd + 1 norm + 1 output + 2 layers x 9.
  EXPECT_EQ(f->tensors().size(), 3u + 2u * 9u);
  ExpectShape(*f, "token_embd.weight", TensorType::kQ8_0, {64, 32000});
  ExpectShape(*f, "output_norm.weight", TensorType::kF32, {64});
  ExpectShape(*f, "output.weight", TensorType::kQ8_0, {64, 32000});
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ExpectShape(*f, b + "attn_norm.weight", TensorType::kF32, {64});
    ExpectShape(*f, b + "attn_q.weight", TensorType::kQ8_0, {64, 64});
    ExpectShape(*f, b + "attn_k.weight", TensorType::kQ8_0, {64, 32});
    ExpectShape(*f, b + "attn_v.weight", TensorType::kQ8_0, {64, 32});
    ExpectShape(*f, b + "attn_output.weight", TensorType::kQ8_0, {64, 64});
    ExpectShape(*f, b + "ffn_norm.weight", TensorType::kF32, {64});
    ExpectShape(*f, b + "ffn_gate.weight", TensorType::kQ8_0, {64, 172});
    ExpectShape(*f, b + "ffn_up.weight", TensorType::kQ8_0, {64, 172});
    // Rows of 172 cannot be Q8_0: stored as F16.
    ExpectShape(*f, b + "ffn_down.weight", TensorType::kF16, {172, 64});
    EXPECT_EQ(f->FindTensor(b + "attn_q.bias"), nullptr);
  }

  // Value statistics: matrices ~ std 1/sqrt(fan_in), norms ~ 1.
  const TensorInfo* q = f->FindTensor("blk.0.attn_q.weight");
  std::vector<float> vals(static_cast<size_t>(q->NumElements()));
  DequantizeRow(q->type, q->data, vals.data(), q->NumElements());
  double sum = 0, sq = 0;
  for (float v : vals) {
    sum += v;
    sq += double(v) * v;
  }
  const double mean = sum / vals.size(), sd = std::sqrt(sq / vals.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0 / 8.0, 0.01);
  const TensorInfo* n = f->FindTensor("output_norm.weight");
  const float* nv = reinterpret_cast<const float*>(n->data);
  for (int i = 0; i < 64; ++i) {
    EXPECT_GE(nv[i], 0.95f);
    EXPECT_LE(nv[i], 1.05f);
  }
}

TEST(Synth, VocabularyIsCopied) {
  ARI_REQUIRE_MODEL(vocab_path, kVocab);
  auto vocab = GgufFile::Open(vocab_path);
  ASSERT_TRUE(vocab.has_value());
  const auto path = Synth(vocab_path, "tiny", TensorType::kF16, 1, "tiny_f16.gguf");
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.has_value());
  int copied = 0;
  for (const auto& m : vocab->metadata()) {
    if (!m.key.starts_with("tokenizer.")) continue;
    ++copied;
    const GgufMetadata* got = f->Find(m.key);
    ASSERT_NE(got, nullptr) << m.key;
    EXPECT_EQ(got->type, m.type) << m.key;
    EXPECT_EQ(f->ValueToString(*got, 1000000), vocab->ValueToString(m, 1000000)) << m.key;
  }
  EXPECT_GE(copied, 5);
  auto toks = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(toks.has_value());
  EXPECT_EQ(toks->size(), 32000u);
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
}

TEST(Synth, DeterministicPerSeed) {
  ARI_REQUIRE_MODEL(vocab_path, kVocab);
  const auto a = ReadAll(Synth(vocab_path, "tiny", TensorType::kQ4_0, 42, "a.gguf"));
  const auto b = ReadAll(Synth(vocab_path, "tiny", TensorType::kQ4_0, 42, "b.gguf"));
  const auto c = ReadAll(Synth(vocab_path, "tiny", TensorType::kQ4_0, 43, "c.gguf"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "same seed must give the same bytes";
  ASSERT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c) << "different seeds must give different weights";
}

TEST(Synth, TinyQwen2HasBiasAndTiedEmbeddings) {
  ARI_REQUIRE_MODEL(vocab_path, kVocab);
  const auto path = Synth(vocab_path, "tiny-qwen2", TensorType::kF32, 3, "tiny_qwen2.gguf");
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  EXPECT_EQ(*f->GetString("general.architecture"), "qwen2");
  EXPECT_FLOAT_EQ(*f->GetFloat("qwen2.rope.freq_base"), 1000000.0f);
  EXPECT_FLOAT_EQ(*f->GetFloat("qwen2.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);
  ExpectShape(*f, "token_embd.weight", TensorType::kF32, {64, 32000});
  ExpectShape(*f, "blk.1.attn_q.bias", TensorType::kF32, {64});
  ExpectShape(*f, "blk.1.attn_k.bias", TensorType::kF32, {32});
  ExpectShape(*f, "blk.1.attn_v.bias", TensorType::kF32, {32});
  ExpectShape(*f, "blk.1.ffn_down.weight", TensorType::kF32, {172, 64});
  EXPECT_EQ(f->tensors().size(), 2u + 2u * 12u);
}

TEST(Synth, BigPresetsPlanWithoutWriting) {
  ARI_REQUIRE_MODEL(vocab_path, kVocab);
  auto vocab = GgufFile::Open(vocab_path);
  ASSERT_TRUE(vocab.has_value());
  SynthSummary s;
  auto w = BuildSynthModel({*FindSynthPreset("tinyllama-1.1b"), TensorType::kQ8_0, 1}, *vocab, &s);
  ASSERT_TRUE(w.has_value()) << w.error().ToString();
  EXPECT_EQ(s.n_params, 1100048384);  // TinyLlama-1.1B's parameter count
  EXPECT_EQ(s.n_tensors, 3 + 22 * 9);
  EXPECT_EQ(s.n_fallback_f16, 0);
  EXPECT_GT(s.file_bytes, 1100048384ull);
  auto q = BuildSynthModel({*FindSynthPreset("qwen2.5-0.5b"), TensorType::kQ4_0, 1}, *vocab, &s);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(s.n_tensors, 2 + 24 * 12);
}

TEST(Synth, BadVocabIsAnError) {
  ARI_REQUIRE_MODEL(vocab_path, kVocab);
  // A file without tokenizer.* (write one from a writer with no metadata).
  GgufWriter w;
  const auto empty = ari::testing::TempDir("synth") / "empty.gguf";
  ASSERT_TRUE(w.WriteFile(empty).has_value());
  auto r = WriteSynthModel({*FindSynthPreset("tiny"), TensorType::kF16, 1}, empty,
                           ari::testing::TempDir("synth") / "x.gguf");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("tokenizer.ggml.tokens"), std::string::npos)
      << r.error().message;
  auto missing = WriteSynthModel({*FindSynthPreset("tiny"), TensorType::kF16, 1},
                                 "/nonexistent/vocab.gguf", "/tmp/never.gguf");
  EXPECT_FALSE(missing.has_value());
}

// Removes this process's scratch directory when the tests end.
class CleanupEnv : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(ari::testing::TempDir("synth"), ec);
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new CleanupEnv);

}  // namespace
}  // namespace ari::runtime
