// libFuzzer target: the GGUF reader on arbitrary bytes, then everything that reads a
// parsed file's metadata and tensors (getters, model config, weights, tokenizer, chat
// template). Nothing may crash, leak or read outside the input; errors are fine.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_weights.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

using namespace ari::runtime;

// Keeps the optimizer from dropping reads whose only purpose is an ASan check.
volatile uint64_t g_sink = 0;

// ARI_FUZZ_VERBOSE=1 ./gguf_fuzz <file>: says how far a file got (seed checking).
void Say(const char* stage, const std::string& what) {
  static const bool verbose = std::getenv("ARI_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "gguf_fuzz: %s: %s\n", stage, what.c_str());
}

void Touch(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  g_sink += static_cast<uint64_t>(bytes.front()) + static_cast<uint64_t>(bytes.back());
}

void ExerciseMetadata(const GgufFile& f, const GgufMetadata& m) {
  g_sink += GgufValueTypeName(m.type).size();
  g_sink +=
      f.ValueToString(m).size() + f.ValueToString(m, 0).size() + f.ValueToString(m, 1000).size();
  const GgufMetadata* found = f.Find(m.key);
  if (found == nullptr || !f.Has(m.key)) __builtin_trap();  // a parsed key must be found
  const std::string_view k = m.key;
  if (auto v = f.GetUint(k)) g_sink += *v;
  if (auto v = f.GetInt(k)) g_sink += static_cast<uint64_t>(*v);
  if (auto v = f.GetFloat(k)) g_sink += static_cast<uint64_t>(*v != 0.0f);
  if (auto v = f.GetBool(k)) g_sink += *v;
  if (auto v = f.GetString(k)) g_sink += v->size();
  if (auto v = f.GetUintOr(k, 7)) g_sink += *v;
  if (auto v = f.GetFloatOr(k, 0.5f)) g_sink += static_cast<uint64_t>(*v != 0.0f);
  if (auto a = f.GetArray(k)) {
    Touch(a->bytes);
    if (auto v = f.GetStringArray(k)) {
      for (std::string_view s : *v) g_sink += s.size() + (s.empty() ? 0 : s.back());
    }
    if (auto v = f.GetFloatArray(k)) g_sink += v->size();
    if (auto v = f.GetInt32Array(k)) g_sink += v->size();
  }
}

void ExerciseTensor(const GgufFile& f, const TensorInfo& t) {
  const TensorInfo* found = f.FindTensor(t.name);
  if (found == nullptr || !f.GetTensor(t.name)) __builtin_trap();
  g_sink += static_cast<uint64_t>(t.NumElements()) + static_cast<uint64_t>(t.NumRows());
  if (t.nbytes > 0) {
    if (t.data == nullptr) __builtin_trap();
    Touch(std::span<const std::byte>(t.data, t.nbytes));
  }
}

void ExerciseWeights(const GgufFile& f) {
  auto config = ModelConfig::FromGguf(f);
  if (!config) return Say("config", config.error().ToString());
  g_sink += config->ToString().size();
  auto weights = ModelWeights::FromGguf(f, *config);
  if (!weights) return Say("weights", weights.error().ToString());
  Say("weights", "ok");
  g_sink += weights->TotalBytes() + static_cast<uint64_t>(weights->MaxCols());
  std::vector<float> row;
  auto read_edges = [&](const WeightMatrix& w) {
    if (!w.present() || w.rows <= 0 || w.cols <= 0 || w.cols > (1 << 20)) return;
    row.resize(static_cast<size_t>(w.cols));
    w.ReadRow(0, row.data());
    w.ReadRow(w.rows - 1, row.data());
    g_sink += static_cast<uint64_t>(row[0] != 0.0f);
  };
  read_edges(weights->token_embd);
  read_edges(weights->output_norm);
  read_edges(weights->output);
  for (const LayerWeights& l : weights->layers) {
    for (const WeightMatrix* w :
         {&l.attn_norm, &l.attn_q, &l.attn_k, &l.attn_v, &l.attn_q_bias, &l.attn_k_bias,
          &l.attn_v_bias, &l.attn_output, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      read_edges(*w);
    }
  }
}

void ExerciseTokenizer(const GgufFile& f) {
  auto tok = Tokenizer::FromGguf(f);
  if (!tok) return Say("tokenizer", tok.error().ToString());
  const Tokenizer& t = **tok;
  EncodeOptions opts;
  opts.parse_special = true;
  auto ids = t.Encode("Hello world <s> \xC3\xA9\xF0\x9F\x98\x80 12345", opts);
  if (ids) g_sink += t.Decode(*ids, true).size();
  Say("tokenizer", ids ? "ok, " + std::to_string(ids->size()) + " ids" : ids.error().ToString());
  const int32_t n = std::min<int32_t>(t.VocabSize(), 64);
  for (TokenId id = -1; id <= n; ++id) {
    g_sink += t.Piece(id, true).size() + t.TokenText(id).size() + static_cast<int>(t.Attr(id));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto file = GgufFile::Parse(bytes, "fuzz.gguf");
  if (!file) {
    Say("parse", file.error().ToString());
    return 0;
  }
  const GgufFile& f = *file;
  if (f.data_offset() > size || f.header_size() > size) __builtin_trap();
  g_sink += f.version() + f.alignment() + f.name().size() + f.bytes().size();
  for (const GgufMetadata& m : f.metadata()) ExerciseMetadata(f, m);
  for (const TensorInfo& t : f.tensors()) ExerciseTensor(f, t);
  auto kind = DetectChatTemplate(f);
  Say("chat template", kind ? std::string(ChatTemplateName(*kind)) : kind.error().ToString());
  ExerciseWeights(f);
  ExerciseTokenizer(f);
  return 0;
}
