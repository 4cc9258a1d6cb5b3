// Writes the seed corpus of gguf_fuzz: small valid GGUF files built with GgufWriter
// (every metadata type, every tensor type, a non-default alignment, tiny llama/qwen2
// models with their own tiny vocabularies). Not copies of real models.
//   ari_fuzz_gguf_seeds <out dir>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/convert/synth.h"
#include "runtime/core/tensor_types.h"
#include "runtime/gguf/gguf.h"

namespace {

using namespace ari::runtime;

bool Write(const GgufWriter& w, const std::filesystem::path& path) {
  auto r = w.WriteFile(path);
  if (!r) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), r.error().ToString().c_str());
    return false;
  }
  std::printf("%s: %ju bytes\n", path.c_str(),
              static_cast<uintmax_t>(std::filesystem::file_size(path)));
  return true;
}

Result<void> AddTensor(GgufWriter& w, std::string name, TensorType type, std::vector<int64_t> ne) {
  auto bytes = TensorBytes(type, ne);
  if (!bytes) return std::unexpected(bytes.error());
  std::vector<std::byte> data(*bytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((i * 37) & 0x3f);
  return w.AddTensor(std::move(name), type, ne, data);
}

void AllMetadataTypes(GgufWriter& w) {
  w.SetUint8("t.u8", 200);
  w.SetInt8("t.i8", -100);
  w.SetUint16("t.u16", 60000);
  w.SetInt16("t.i16", -30000);
  w.SetUint32("t.u32", 4000000000u);
  w.SetInt32("t.i32", -2000000000);
  w.SetUint64("t.u64", 1ull << 40);
  w.SetInt64("t.i64", -(1ll << 40));
  w.SetFloat32("t.f32", 1.5f);
  w.SetFloat64("t.f64", -2.25);
  w.SetBool("t.bool", true);
  w.SetString("t.str", "h\xC3\xA9llo");
  w.SetStringArray("t.astr", {"a", "", "\xF0\x9F\x98\x80"});
  w.SetFloat32Array("t.af32", {0.0f, -1.0f, 3.5f});
  w.SetInt32Array("t.ai32", {-1, 0, 7});
  w.SetUint32Array("t.au32", {1, 2, 3});
}

// A vocabulary small enough for a seed: SPM with byte fallback, or gpt2 with merges.
void TinyVocab(GgufWriter& w, bool gpt2) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  if (gpt2) {
    w.SetString("tokenizer.ggml.model", "gpt2");
    w.SetString("tokenizer.ggml.pre", "gpt-2");
    for (const char* t : {"<|endoftext|>", "a", "b", "c", "\xC4\xA0", "ab",
                          "\xC4\xA0"
                          "a",
                          "abc"}) {
      tokens.push_back(t);
      types.push_back(tokens.size() == 1 ? 3 : 1);
    }
    w.SetStringArray("tokenizer.ggml.merges", {"a b", "\xC4\xA0 a", "ab c"});
    w.SetUint32("tokenizer.ggml.bos_token_id", 0);
    w.SetUint32("tokenizer.ggml.eos_token_id", 0);
  } else {
    w.SetString("tokenizer.ggml.model", "llama");
    for (const char* t : {"<unk>", "<s>", "</s>"}) {
      tokens.push_back(t);
      scores.push_back(0.0f);
      types.push_back(tokens.size() == 1 ? 2 : 3);
    }
    for (int b = 0; b < 8; ++b) {  // a few byte tokens
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b == 0 ? 0x0A : 0xE0 + b);
      tokens.push_back(buf);
      scores.push_back(0.0f);
      types.push_back(6);
    }
    for (const char* t : {"\xE2\x96\x81", "a", "b",
                          "\xE2\x96\x81"
                          "a",
                          "ab",
                          "\xE2\x96\x81"
                          "ab"}) {
      tokens.push_back(t);
      scores.push_back(-static_cast<float>(tokens.size()));
      types.push_back(1);
    }
    w.SetFloat32Array("tokenizer.ggml.scores", scores);
    w.SetUint32("tokenizer.ggml.bos_token_id", 1);
    w.SetUint32("tokenizer.ggml.eos_token_id", 2);
    w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
    w.SetBool("tokenizer.ggml.add_bos_token", true);
  }
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
}

bool TinyModel(const std::filesystem::path& dir, const char* file, std::string_view arch,
               TensorType type, bool gpt2_vocab, const char* chat_template) {
  GgufWriter vocab_writer;
  TinyVocab(vocab_writer, gpt2_vocab);
  if (chat_template != nullptr) vocab_writer.SetString("tokenizer.chat_template", chat_template);
  auto vocab_bytes = vocab_writer.WriteToMemory();
  if (!vocab_bytes) return false;
  auto vocab = GgufFile::Parse(*vocab_bytes, "vocab");
  if (!vocab) return false;
  SynthOptions opts;
  opts.preset = SynthPreset{.name = "seed",
                            .arch = arch,
                            .dim = 32,
                            .ffn = 32,
                            .layers = 1,
                            .heads = 2,
                            .kv_heads = 1,
                            .context = 16,
                            .qkv_bias = arch == "qwen2",
                            .tied_embeddings = arch == "qwen2"};
  opts.type = type;
  opts.seed = 7;
  auto writer = BuildSynthModel(opts, *vocab);
  if (!writer) {
    std::fprintf(stderr, "%s: %s\n", file, writer.error().ToString().c_str());
    return false;
  }
  return Write(*writer, dir / file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <out dir>\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  bool ok = true;

  ok &= Write(GgufWriter(), dir / "empty.gguf");

  GgufWriter meta;
  AllMetadataTypes(meta);
  ok &= Write(meta, dir / "metadata_all_types.gguf");

  GgufWriter tensors(64);  // non-default alignment: general.alignment is written
  tensors.SetString("general.architecture", "none");
  ok &= AddTensor(tensors, "f32", TensorType::kF32, {3}).has_value();
  ok &= AddTensor(tensors, "f16", TensorType::kF16, {4, 2}).has_value();
  ok &= AddTensor(tensors, "bf16", TensorType::kBF16, {2, 1, 2}).has_value();
  ok &= AddTensor(tensors, "q8_0", TensorType::kQ8_0, {32, 2}).has_value();
  ok &= AddTensor(tensors, "q4_0", TensorType::kQ4_0, {64, 1, 1, 2}).has_value();
  ok &= Write(tensors, dir / "tensors_all_types.gguf");

  GgufWriter spm;
  TinyVocab(spm, false);
  ok &= Write(spm, dir / "vocab_spm.gguf");
  GgufWriter bpe;
  TinyVocab(bpe, true);
  ok &= Write(bpe, dir / "vocab_gpt2.gguf");

  ok &= TinyModel(dir, "model_llama_q8_0.gguf", "llama", TensorType::kQ8_0, false,
                  "{% for message in messages %}[INST] <<SYS>> {{ message['content'] }}");
  ok &= TinyModel(dir, "model_qwen2_q4_0.gguf", "qwen2", TensorType::kQ4_0, true,
                  "{% for message in messages %}<|im_start|>{{ message['role'] }}");
  ok &= TinyModel(dir, "model_llama_f32.gguf", "llama", TensorType::kF32, false, nullptr);
  return ok ? 0 : 1;
}
