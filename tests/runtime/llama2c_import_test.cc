// llama2.c import: weights byte-exact against the raw checkpoint, tokenizer metadata,
// malformed inputs (every truncation is an error, never a crash), config validation, and
// the ari-convert / ari-run command lines.
#include "runtime/convert/llama2c_import.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "runtime/core/mapped_file.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/model.h"
#include "tests/common/test_util.h"
#include "tests/runtime/tiny_model.h"

namespace ari::runtime {
namespace {

std::vector<std::byte> ReadAll(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

Result<GgufFile> Import(std::span<const std::byte> ck, const Llama2cImportOptions& o,
                        std::vector<std::byte>& storage) {
  GgufWriter w;
  auto r = ImportLlama2cCheckpoint(ck, o, w);
  if (!r) return std::unexpected(r.error());
  storage = *w.WriteToMemory();
  return GgufFile::Parse(storage, "imported");
}

// Raw llama2.c v2 layout (read independently of the importer): 256-byte header, fp32 norms
// (2 * layers * dim + dim), then token embeddings: int8[vocab * dim], fp32[vocab * dim / 32].
TEST(Llama2cImport, Q80WeightsAreExact) {
  ARI_REQUIRE_MODEL(path, "llama2c/stories260K/stories260K_q80.bin");
  const auto raw = ReadAll(path);
  const size_t dim = 64, layers = 5, vocab = 512, hidden = 172, kv = 32;
  size_t off = 256 + (2 * layers * dim + dim) * 4;
  const auto* tok_q = reinterpret_cast<const int8_t*>(raw.data() + off);
  std::vector<float> tok_s(vocab * dim / 32);
  std::memcpy(tok_s.data(), raw.data() + off + vocab * dim, tok_s.size() * 4);
  // ffn_down of layer 0: after tok, wq, wk, wv, wo (5 layers each) and w1 (5 layers).
  auto qsize = [](size_t n) { return n + n / 32 * 4; };
  size_t w2_off = off + qsize(vocab * dim) + layers * (qsize(dim * dim) * 2 + qsize(kv * dim) * 2) +
                  layers * qsize(hidden * dim);
  const auto* w2_q = reinterpret_cast<const int8_t*>(raw.data() + w2_off);
  std::vector<float> w2_s(dim * hidden / 32);
  std::memcpy(w2_s.data(), raw.data() + w2_off + dim * hidden, w2_s.size() * 4);

  std::vector<std::byte> st;
  auto exact = Import(raw, {}, st);
  ASSERT_TRUE(exact.has_value()) << exact.error().ToString();
  const TensorInfo* t = exact->FindTensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, TensorType::kF32);
  std::vector<float> v(vocab * dim);
  std::memcpy(v.data(), t->data, v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], tok_q[i] * tok_s[i / 32]) << i;
  const TensorInfo* d = exact->FindTensor("blk.0.ffn_down.weight");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->ne[0], static_cast<int64_t>(hidden));
  EXPECT_EQ(d->ne[1], static_cast<int64_t>(dim));
  std::vector<float> dv(dim * hidden);
  std::memcpy(dv.data(), d->data, dv.size() * 4);
  for (size_t i = 0; i < dv.size(); ++i) ASSERT_EQ(dv[i], w2_q[i] * w2_s[i / 32]) << i;

  std::vector<std::byte> st2;
  auto q8 = Import(raw, {.q80 = Q80Storage::kQ8_0}, st2);
  ASSERT_TRUE(q8.has_value());
  t = q8->FindTensor("token_embd.weight");
  ASSERT_EQ(t->type, TensorType::kQ8_0);
  for (size_t b = 0; b < tok_s.size(); ++b) {
    BlockQ8_0 blk{};
    std::memcpy(&blk, t->data + b * sizeof(BlockQ8_0), sizeof(blk));
    ASSERT_EQ(blk.d, Fp32ToFp16(tok_s[b]));
    ASSERT_EQ(std::memcmp(blk.qs, tok_q + b * 32, 32), 0);
  }
  EXPECT_EQ(q8->FindTensor("blk.0.ffn_down.weight")->type, TensorType::kF32);  // crosses rows
  EXPECT_EQ(*q8->GetUint("general.file_type"), 7u);
}

TEST(Llama2cImport, TokenizerMetadata) {
  ARI_REQUIRE_MODEL(path, "llama2c/stories260K/tok512.bin");
  GgufWriter w;
  ASSERT_TRUE(ImportLlama2cTokenizer(ReadAll(path), 512, w).has_value());
  auto bytes = *w.WriteToMemory();
  auto f = GgufFile::Parse(bytes, "tok");
  ASSERT_TRUE(f.has_value());
  auto tokens = *f->GetStringArray("tokenizer.ggml.tokens");
  auto types = *f->GetInt32Array("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(types[0], static_cast<int32_t>(TokenAttr::kUnknown));
  EXPECT_EQ(types[1], static_cast<int32_t>(TokenAttr::kControl));
  EXPECT_EQ(types[3], static_cast<int32_t>(TokenAttr::kByte));
  EXPECT_EQ(types[258], static_cast<int32_t>(TokenAttr::kByte));  // <0xFF>
  EXPECT_EQ(types[300], static_cast<int32_t>(TokenAttr::kNormal));
  EXPECT_EQ(tokens[403], "\xE2\x96\x81Once");  // llama2.c stores ' ', GGUF '▁'
  EXPECT_EQ(f->GetString("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
  // Wrong vocab size: bytes left over, or truncated.
  GgufWriter w2;
  EXPECT_EQ(ImportLlama2cTokenizer(ReadAll(path), 500, w2).error().code, ErrorCode::kFormat);
  EXPECT_EQ(ImportLlama2cTokenizer(ReadAll(path), 600, w2).error().code, ErrorCode::kFormat);
}

TEST(Llama2cImport, TruncatedOrCorruptInputsAreErrors) {
  ARI_REQUIRE_MODEL(path, "llama2c/stories260K/stories260K.bin");
  for (const char* rel :
       {"llama2c/stories260K/stories260K.bin", "llama2c/stories260K/stories260K_q80.bin"}) {
    const auto raw = ReadAll(testing::ModelFile(rel));
    for (size_t cut : {size_t{0}, size_t{3}, size_t{20}, size_t{27}, size_t{100}, size_t{255},
                       size_t{256}, size_t{4096}, raw.size() / 2, raw.size() - 1}) {
      GgufWriter w;
      auto r = ImportLlama2cCheckpoint(std::span(raw).first(cut), {}, w);
      ASSERT_FALSE(r.has_value()) << rel << " cut " << cut;
    }
    auto extra = raw;
    extra.resize(raw.size() + 4);
    GgufWriter w;
    auto r = ImportLlama2cCheckpoint(extra, {}, w);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("unexpected bytes"), std::string::npos);
  }
  auto raw = ReadAll(path);
  int32_t absurd = 1 << 30;
  std::memcpy(raw.data(), &absurd, 4);  // dim
  GgufWriter w;
  EXPECT_EQ(ImportLlama2cCheckpoint(raw, {}, w).error().code, ErrorCode::kFormat);
  auto q = ReadAll(testing::ModelFile("llama2c/stories260K/stories260K_q80.bin"));
  int32_t v3 = 3;
  std::memcpy(q.data() + 4, &v3, 4);
  EXPECT_EQ(ImportLlama2cCheckpoint(q, {}, w).error().code, ErrorCode::kUnsupported);
}

// A synthetic llama2.c checkpoint: dim 32, hidden 40 (ffn_down rows cross Q8_0 groups),
// 2 layers, 2 heads (1 KV head), vocab 8, seq_len 16.
struct SynthCkpt {
  int dim = 32, hidden = 40, layers = 2, heads = 2, kv_heads = 1, vocab = 8, seq = 16;
  int head() const { return dim / heads; }
  int kv() const { return head() * kv_heads; }
};

class ByteSink {
 public:
  template <class T>
  void Put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
  }
  void PadTo(size_t n) { b_.resize(n); }
  std::vector<std::byte>& bytes() { return b_; }

 private:
  std::vector<std::byte> b_;
};

// Element counts of the llama2.c tensors in export order (per layer counts for layered ones).
struct Sizes {
  size_t tok, norm, wq, wk, wo, w1, w2;
};
Sizes SizesOf(const SynthCkpt& c) {
  return {size_t(c.vocab) * c.dim, size_t(c.dim),         size_t(c.dim) * c.dim,
          size_t(c.kv()) * c.dim,  size_t(c.dim) * c.dim, size_t(c.hidden) * c.dim,
          size_t(c.dim) * c.hidden};
}

// fp32 checkpoint (version 0 or 1). Every value is a function of (tensor, layer, index),
// so the same GGUF tensor must come out of both versions whatever their order on disk.
std::vector<std::byte> WriteFp32(const SynthCkpt& c, int version, bool shared) {
  ByteSink o;
  enum { kTok, kAttnNorm, kWq, kWk, kWv, kWo, kFfnNorm, kW1, kW2, kW3, kFinal, kCls, kFreq };
  const Sizes z = SizesOf(c);
  auto put = [&](int id, size_t n, bool layered) {
    for (int l = 0; l < (layered ? c.layers : 1); ++l) {
      for (size_t i = 0; i < n; ++i) {
        o.Put(static_cast<float>((id * 131 + l * 17 + static_cast<int>(i) * 7) % 201 - 100) /
              100.0f);
      }
    }
  };
  if (version == 1) {
    o.Put<uint32_t>(0x616b3432);
    o.Put<int32_t>(1);
  }
  for (int v : {c.dim, c.hidden, c.layers, c.heads, c.kv_heads,
                version == 0 && !shared ? -c.vocab : c.vocab, c.seq}) {
    o.Put<int32_t>(v);
  }
  if (version == 1) {
    o.Put<uint8_t>(shared ? 1 : 0);
    o.PadTo(256);
    put(kAttnNorm, z.norm, true);
    put(kFfnNorm, z.norm, true);
    put(kFinal, z.norm, false);
    put(kTok, z.tok, false);
    put(kWq, z.wq, true), put(kWk, z.wk, true), put(kWv, z.wk, true), put(kWo, z.wo, true);
    put(kW1, z.w1, true), put(kW2, z.w2, true), put(kW3, z.w1, true);
  } else {
    put(kTok, z.tok, false);
    put(kAttnNorm, z.norm, true);
    put(kWq, z.wq, true), put(kWk, z.wk, true), put(kWv, z.wk, true), put(kWo, z.wo, true);
    put(kFfnNorm, z.norm, true);
    put(kW1, z.w1, true), put(kW2, z.w2, true), put(kW3, z.w1, true);
    put(kFinal, z.norm, false);
    put(kFreq, size_t(c.seq) * c.head(), false);  // freq_cis real + imag
  }
  if (!shared) put(kCls, z.tok, false);
  return o.bytes();
}

TEST(Llama2cImport, SyntheticV0AndV1Checkpoints) {
  SynthCkpt c;
  for (bool shared : {true, false}) {
    std::vector<std::byte> st0;
    auto f0 = Import(WriteFp32(c, 0, shared), {}, st0);
    ASSERT_TRUE(f0.has_value()) << f0.error().ToString();
    for (int version : {0, 1}) {
      std::string trace = "v";
      trace += std::to_string(version);
      trace += shared ? " shared" : " unshared";
      SCOPED_TRACE(trace);
      std::vector<std::byte> st;
      auto f = Import(WriteFp32(c, version, shared), {}, st);
      ASSERT_TRUE(f.has_value()) << f.error().ToString();
      ASSERT_EQ(f->tensors().size(), f0->tensors().size());
      for (const TensorInfo& t : f->tensors()) {
        const TensorInfo* t0 = f0->FindTensor(t.name);
        ASSERT_NE(t0, nullptr) << t.name;
        ASSERT_EQ(t.nbytes, t0->nbytes);
        EXPECT_EQ(std::memcmp(t.data, t0->data, t.nbytes), 0) << t.name;
      }
      EXPECT_EQ(f->FindTensor("output.weight") == nullptr, shared);
      const TensorInfo* wk = f->FindTensor("blk.1.attn_k.weight");
      ASSERT_NE(wk, nullptr);
      EXPECT_EQ(wk->ne[0], c.dim);
      EXPECT_EQ(wk->ne[1], c.kv());
      EXPECT_EQ(f->FindTensor("blk.0.ffn_down.weight")->ne[0], c.hidden);
      auto m = Model::FromBytes(st, "synth", {.require_tokenizer = false});
      ASSERT_TRUE(m.has_value()) << m.error().ToString();
      EXPECT_EQ((*m)->config().tied_embeddings, shared);
      EXPECT_EQ((*m)->config().n_kv_heads, 1);
      EXPECT_EQ((*m)->config().vocab_size, c.vocab);
    }
  }
}

TEST(Llama2cImport, SyntheticV2WithFp16ExactScalesStaysQ8_0) {
  SynthCkpt c;
  ByteSink o;
  o.Put<uint32_t>(0x616b3432);
  o.Put<int32_t>(2);
  for (int v : {c.dim, c.hidden, c.layers, c.heads, c.kv_heads, c.vocab, c.seq}) o.Put<int32_t>(v);
  o.Put<uint8_t>(1);
  o.Put<int32_t>(32);
  o.PadTo(256);
  const Sizes z = SizesOf(c);
  for (size_t i = 0; i < (2 * c.layers + 1) * z.norm; ++i) o.Put(1.0f);
  int counter = 0;
  std::vector<std::pair<std::vector<int8_t>, std::vector<float>>> tensors;
  auto put_q = [&](size_t n) {
    std::vector<int8_t> q(n);
    std::vector<float> sc(n / 32);
    for (size_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>((counter++ * 37) % 255 - 127);
    for (size_t g = 0; g < sc.size(); ++g) sc[g] = std::ldexp(1.0f, -7 - static_cast<int>(g % 5));
    for (int8_t v : q) o.Put(v);
    for (float v : sc) o.Put(v);
    tensors.emplace_back(q, sc);
  };
  put_q(z.tok);
  for (size_t n : {z.wq, z.wk, z.wk, z.wo, z.w1, z.w2, z.w1}) {
    for (int l = 0; l < c.layers; ++l) put_q(n);
  }
  std::vector<std::byte> st;
  GgufWriter w;
  auto r = ImportLlama2cCheckpoint(o.bytes(), {}, w);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->tensors_q8_0, 1 + 6 * c.layers);  // all but ffn_down (rows of 40)
  EXPECT_EQ(r->tensors_f32, 2 * c.layers + 1 + c.layers);
  st = *w.WriteToMemory();
  auto f = GgufFile::Parse(st, "v2");
  ASSERT_TRUE(f.has_value());
  // Values: token_embd (Q8_0) and blk.1.ffn_down (F32, groups across rows) equal q * s.
  auto check = [&](const char* name, size_t index) {
    const TensorInfo* t = f->FindTensor(name);
    ASSERT_NE(t, nullptr);
    const auto& [q, sc] = tensors[index];
    std::vector<float> row(static_cast<size_t>(t->ne[0]));
    const uint64_t rb = *RowBytes(t->type, t->ne[0]);
    for (int64_t rr = 0; rr < t->ne[1]; ++rr) {
      DequantizeRow(t->type, t->data + rr * rb, row.data(), t->ne[0]);
      for (int64_t i = 0; i < t->ne[0]; ++i) {
        const size_t flat = static_cast<size_t>(rr * t->ne[0] + i);
        ASSERT_EQ(row[i], q[flat] * sc[flat / 32]) << name << " " << flat;
      }
    }
  };
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, TensorType::kQ8_0);
  check("token_embd.weight", 0);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_down.weight")->type, TensorType::kF32);
  check("blk.1.ffn_down.weight", 1 + 5 * c.layers + 1);
  auto m = Model::FromBytes(st, "v2", {.require_tokenizer = false});
  EXPECT_TRUE(m.has_value()) << m.error().ToString();
}

Result<std::unique_ptr<Model>> LoadPatched(const testing::TinySpec& s,
                                           void (*patch)(GgufWriter&, const GgufFile&)) {
  auto bytes = testing::BuildTinyModel(s, nullptr);
  auto f = GgufFile::Parse(bytes, "tiny");
  if (!f) return std::unexpected(f.error());
  GgufWriter w;
  patch(w, *f);
  return Model::FromBytes(*w.WriteToMemory(), "patched.gguf", {.require_tokenizer = false});
}

void CopyAll(GgufWriter& w, const GgufFile& f, std::string_view skip_tensor = {}) {
  w.CopyMetadata(f, "");
  for (const TensorInfo& t : f.tensors()) {
    if (t.name == skip_tensor) continue;
    auto r = w.AddTensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims),
                         std::span(t.data, t.nbytes));
    if (!r) ADD_FAILURE() << t.name << ": " << r.error().ToString();
  }
}

TEST(ModelConfig, ValidationErrorsNameTheProblem) {
  testing::TinySpec s;
  auto unknown = LoadPatched(s, [](GgufWriter& w, const GgufFile& f) {
    CopyAll(w, f);
    w.SetString("general.architecture", "mamba");
  });
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(unknown.error().message.find("mamba"), std::string::npos);

  auto missing = LoadPatched(
      s, [](GgufWriter& w, const GgufFile& f) { CopyAll(w, f, "blk.1.ffn_up.weight"); });
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("blk.1.ffn_up.weight"), std::string::npos);

  auto heads = LoadPatched(s, [](GgufWriter& w, const GgufFile& f) {
    CopyAll(w, f);
    w.SetUint32("llama.attention.head_count_kv", 3);
  });
  ASSERT_FALSE(heads.has_value());
  EXPECT_EQ(heads.error().code, ErrorCode::kFormat);

  auto shape = LoadPatched(s, [](GgufWriter& w, const GgufFile& f) {
    CopyAll(w, f);
    w.SetUint32("llama.feed_forward_length", 50);
  });
  ASSERT_FALSE(shape.has_value());
  EXPECT_EQ(shape.error().code, ErrorCode::kFormat);
  EXPECT_NE(shape.error().message.find("ffn_gate"), std::string::npos);

  auto no_dim = LoadPatched(s, [](GgufWriter& w, const GgufFile& f) {
    CopyAll(w, f);
    w.SetUint32("llama.embedding_length", 0);
  });
  ASSERT_FALSE(no_dim.has_value());
}

// The command-line tools (skipped when not built in this build tree).
std::filesystem::path Tool(const char* name) {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  if (!bin) return {};
  auto p = std::filesystem::path(bin) / "runtime" / name;
  return std::filesystem::exists(p) ? p : std::filesystem::path();
}

TEST(Tools, ConvertAndRunEndToEnd) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/stories260K/stories260K.bin");
  const auto convert = Tool("ari-convert"), run = Tool("ari-run");
  if (convert.empty() || run.empty()) GTEST_SKIP() << "ari-convert/ari-run not built";
  const auto dir = testing::TempDir("llama2c_tools");
  const auto out = dir / "s.gguf", log = dir / "log.txt", text = dir / "out.txt";
  const std::string tok = testing::ModelFile("llama2c/stories260K/tok512.bin").string();
  std::string cmd = convert.string() + " --checkpoint " + ckpt.string() + " --tokenizer " + tok +
                    " -o " + out.string() + " 2>" + log.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  cmd = run.string() + " -m " + out.string() + " -p 'Once upon a time' -n 8 --temp 0 >" +
        text.string() + " 2>" + log.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream t(text);
  std::string got((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, "Once upon a time, there was a little girl\n");  // 8 greedy tokens
  std::ifstream l(log);
  std::string err((std::istreambuf_iterator<char>(l)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("tokens/s"), std::string::npos);
  // Missing and bad files: one line on stderr, exit status 1.
  cmd = run.string() + " -m " + (dir / "nope.gguf").string() + " 2>" + log.string();
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 1);
  cmd = run.string() + " -m " + tok + " 2>" + log.string();
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 1);
  std::ifstream l2(log);
  std::string err2((std::istreambuf_iterator<char>(l2)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(err2.begin(), err2.end(), '\n'), 1) << err2;
  EXPECT_EQ(err2.rfind("ari-run: ", 0), 0u) << err2;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::runtime
