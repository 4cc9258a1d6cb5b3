#include "runtime/convert/llama2c_import.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "runtime/core/mapped_file.h"
#include "runtime/core/tensor_types.h"
#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime {
namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42"
constexpr uint64_t kV12HeaderBytes = 256;

// Bounds-checked little-endian cursor over a byte span.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::string what) : b_(bytes), what_(std::move(what)) {}
  Result<std::span<const std::byte>> Take(uint64_t n, std::string_view item) {
    if (n > b_.size() - off_) {
      return MakeError(ErrorCode::kFormat, what_ + ": truncated at byte " + std::to_string(off_) +
                                               " reading " + std::string(item) + " (" +
                                               std::to_string(n) + " bytes needed, " +
                                               std::to_string(b_.size() - off_) + " left)");
    }
    auto s = b_.subspan(off_, n);
    off_ += n;
    return s;
  }
  template <class T>
  Result<T> Read(std::string_view item) {
    auto s = Take(sizeof(T), item);
    if (!s) return std::unexpected(s.error());
    T v;
    std::memcpy(&v, s->data(), sizeof(T));
    return v;
  }
  uint64_t offset() const { return off_; }
  void Seek(uint64_t off) { off_ = off; }
  uint64_t left() const { return b_.size() - off_; }
  const std::string& what() const { return what_; }

 private:
  std::span<const std::byte> b_;
  std::string what_;
  uint64_t off_ = 0;
};

std::vector<float> Floats(std::span<const std::byte> s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

std::span<const std::byte> Bytes(const std::vector<float>& v) {
  return std::as_bytes(std::span<const float>(v));
}

// One llama2.c weight group: `per_layer` tensors (or one) of rows x cols, named `name`
// ("blk.%d." is prefixed for per-layer tensors).
struct Group {
  std::string name;
  bool per_layer;
  int64_t rows;  // 0 for a 1-D tensor of cols
  int64_t cols;
};

std::string TensorName(const Group& g, int32_t layer) {
  return g.per_layer ? "blk." + std::to_string(layer) + "." + g.name : g.name;
}

Result<void> AddF32(GgufWriter& out, const std::string& name, const Group& g,
                    std::span<const std::byte> data) {
  std::vector<int64_t> ne = {g.cols};
  if (g.rows > 0) ne.push_back(g.rows);
  return out.AddTensor(name, TensorType::kF32, ne, data);
}

class Importer {
 public:
  Importer(const Llama2cHeader& h, const Llama2cImportOptions& o, Reader& r, GgufWriter& out,
           Llama2cImportReport& rep)
      : h_(h), opts_(o), r_(r), out_(out), rep_(rep) {}

  Result<void> Fp32(const Group& g) {
    const int32_t n = g.per_layer ? h_.n_layers : 1;
    const uint64_t each = static_cast<uint64_t>(g.rows > 0 ? g.rows : 1) * g.cols * 4;
    for (int32_t l = 0; l < n; ++l) {
      const std::string name = TensorName(g, l);
      auto s = r_.Take(each, name);
      if (!s) return std::unexpected(s.error());
      auto v = Floats(*s);  // copy: the mapping need not be float-aligned
      if (auto a = AddF32(out_, name, g, Bytes(v)); !a) return a;
      ++rep_.tensors_f32;
    }
    return {};
  }

  Result<void> Skip(uint64_t bytes, std::string_view what) {
    auto s = r_.Take(bytes, what);
    if (!s) return std::unexpected(s.error());
    return {};
  }

  Result<void> Q80(const Group& g) {
    const int64_t gs = h_.group_size;
    const int32_t n = g.per_layer ? h_.n_layers : 1;
    for (int32_t l = 0; l < n; ++l) {
      const std::string name = TensorName(g, l);
      const int64_t numel = g.rows * g.cols;
      if (numel % gs != 0) {
        return MakeError(ErrorCode::kFormat,
                         r_.what() + ": " + name + " has " + std::to_string(numel) +
                             " values, not a multiple of group size " + std::to_string(gs));
      }
      auto q = r_.Take(static_cast<uint64_t>(numel), name + " int8 values");
      if (!q) return std::unexpected(q.error());
      auto s = r_.Take(static_cast<uint64_t>(numel / gs) * 4, name + " scales");
      if (!s) return std::unexpected(s.error());
      const std::vector<float> scales = Floats(*s);
      const auto* qv = reinterpret_cast<const int8_t*>(q->data());
      bool rows_aligned = gs == kQuantGroup && g.cols % kQuantGroup == 0;
      bool exact = true;
      int32_t rounded = 0;
      for (float sc : scales) {
        if (Fp16ToFp32(Fp32ToFp16(sc)) != sc) {
          exact = false;
          ++rounded;
        }
      }
      const int64_t ne[2] = {g.cols, g.rows};
      if (rows_aligned && (exact || opts_.q80 == Q80Storage::kQ8_0)) {
        std::vector<BlockQ8_0> blocks(static_cast<size_t>(numel / kQuantGroup));
        for (size_t b = 0; b < blocks.size(); ++b) {
          blocks[b].d = Fp32ToFp16(scales[b]);
          std::memcpy(blocks[b].qs, qv + b * kQuantGroup, kQuantGroup);
        }
        auto a = out_.AddTensor(name, TensorType::kQ8_0, ne,
                                std::as_bytes(std::span<const BlockQ8_0>(blocks)));
        if (!a) return a;
        ++rep_.tensors_q8_0;
        rep_.scales_rounded += rounded;
      } else {
        std::vector<float> w(static_cast<size_t>(numel));
        for (int64_t i = 0; i < numel; ++i) w[i] = qv[i] * scales[i / gs];  // runq.c dequantize
        if (auto a = out_.AddTensor(name, TensorType::kF32, ne, Bytes(w)); !a) return a;
        ++rep_.tensors_f32;
      }
    }
    return {};
  }

 private:
  const Llama2cHeader& h_;
  const Llama2cImportOptions& opts_;
  Reader& r_;
  GgufWriter& out_;
  Llama2cImportReport& rep_;
};

}  // namespace

Result<Llama2cHeader> ReadLlama2cHeader(std::span<const std::byte> bytes) {
  Reader r(bytes, "llama2.c checkpoint");
  Llama2cHeader h;
  auto magic = r.Read<uint32_t>("magic");
  if (!magic) return std::unexpected(magic.error());
  if (*magic == kMagic) {
    auto version = r.Read<int32_t>("version");
    if (!version) return std::unexpected(version.error());
    if (*version != 1 && *version != 2) {
      return MakeError(ErrorCode::kUnsupported, "llama2.c checkpoint: version " +
                                                    std::to_string(*version) +
                                                    " is not supported (0, 1 and 2 are)");
    }
    h.version = *version;
  } else {
    r.Seek(0);  // legacy: the header starts with dim
  }
  int32_t v[7];
  for (int32_t& x : v) {
    auto i = r.Read<int32_t>("config");
    if (!i) return std::unexpected(i.error());
    x = *i;
  }
  h.dim = v[0], h.hidden_dim = v[1], h.n_layers = v[2], h.n_heads = v[3], h.n_kv_heads = v[4];
  h.seq_len = v[6];
  if (h.version == 0) {
    h.shared_classifier = v[5] > 0;
    h.vocab_size = v[5] == std::numeric_limits<int32_t>::min() ? 0 : (v[5] < 0 ? -v[5] : v[5]);
    h.header_bytes = 28;
  } else {
    h.vocab_size = v[5];
    auto shared = r.Read<uint8_t>("shared_classifier");
    if (!shared) return std::unexpected(shared.error());
    h.shared_classifier = *shared != 0;
    if (h.version == 2) {
      auto gs = r.Read<int32_t>("group_size");
      if (!gs) return std::unexpected(gs.error());
      h.group_size = *gs;
      if (h.group_size <= 0 || h.group_size > (1 << 16)) {
        return MakeError(ErrorCode::kFormat,
                         "llama2.c checkpoint: bad group size " + std::to_string(h.group_size));
      }
    }
    h.header_bytes = kV12HeaderBytes;
  }
  const int32_t max_dim = 1 << 20;
  for (int32_t x :
       {h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len}) {
    if (x <= 0 || x > max_dim) {
      return MakeError(
          ErrorCode::kFormat,
          "llama2.c checkpoint: config value " + std::to_string(x) + " out of range (dim " +
              std::to_string(h.dim) + ", hidden " + std::to_string(h.hidden_dim) + ", layers " +
              std::to_string(h.n_layers) + ", heads " + std::to_string(h.n_heads) + "/" +
              std::to_string(h.n_kv_heads) + ", vocab " + std::to_string(h.vocab_size) +
              ", seq_len " + std::to_string(h.seq_len) + "); not a llama2.c checkpoint?");
    }
  }
  if (h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0 || (h.dim / h.n_heads) % 2 != 0) {
    return MakeError(ErrorCode::kFormat, "llama2.c checkpoint: inconsistent heads (dim " +
                                             std::to_string(h.dim) + ", heads " +
                                             std::to_string(h.n_heads) + "/" +
                                             std::to_string(h.n_kv_heads) + ")");
  }
  return h;
}

Result<Llama2cImportReport> ImportLlama2cCheckpoint(std::span<const std::byte> bytes,
                                                    const Llama2cImportOptions& opts,
                                                    GgufWriter& out) {
  auto header = ReadLlama2cHeader(bytes);
  if (!header) return std::unexpected(header.error());
  const Llama2cHeader& h = *header;
  Llama2cImportReport rep;
  rep.header = h;
  const int64_t dim = h.dim, hidden = h.hidden_dim, head = h.dim / h.n_heads;
  const int64_t kv_dim = head * h.n_kv_heads, vocab = h.vocab_size;

  out.SetString("general.architecture", "llama");
  out.SetString("general.name", opts.name);
  out.SetUint32("llama.context_length", static_cast<uint32_t>(h.seq_len));
  out.SetUint32("llama.embedding_length", static_cast<uint32_t>(h.dim));
  out.SetUint32("llama.block_count", static_cast<uint32_t>(h.n_layers));
  out.SetUint32("llama.feed_forward_length", static_cast<uint32_t>(h.hidden_dim));
  out.SetUint32("llama.attention.head_count", static_cast<uint32_t>(h.n_heads));
  out.SetUint32("llama.attention.head_count_kv", static_cast<uint32_t>(h.n_kv_heads));
  out.SetUint32("llama.rope.dimension_count", static_cast<uint32_t>(head));
  out.SetFloat32("llama.rope.freq_base", opts.rope_theta);
  out.SetFloat32("llama.attention.layer_norm_rms_epsilon", opts.rms_eps);
  out.SetUint32("llama.vocab_size", static_cast<uint32_t>(h.vocab_size));

  const Group tok{"token_embd.weight", false, vocab, dim};
  const Group att_norm{"attn_norm.weight", true, 0, dim};
  const Group ffn_norm{"ffn_norm.weight", true, 0, dim};
  const Group out_norm{"output_norm.weight", false, 0, dim};
  const Group wq{"attn_q.weight", true, dim, dim};
  const Group wk{"attn_k.weight", true, kv_dim, dim};
  const Group wv{"attn_v.weight", true, kv_dim, dim};
  const Group wo{"attn_output.weight", true, dim, dim};
  const Group w1{"ffn_gate.weight", true, hidden, dim};
  const Group w2{"ffn_down.weight", true, dim, hidden};
  const Group w3{"ffn_up.weight", true, hidden, dim};
  const Group cls{"output.weight", false, vocab, dim};

  Reader r(bytes, "llama2.c checkpoint");
  r.Seek(h.header_bytes);
  Importer im(h, opts, r, out, rep);
  Result<void> ok;
  auto run = [&](auto&& fn, const Group& g) {
    if (ok) ok = fn(g);
  };
  auto fp32 = [&](const Group& g) { return im.Fp32(g); };
  auto q80 = [&](const Group& g) { return im.Q80(g); };
  if (h.version == 0) {
    for (const Group* g :
         {&tok, &att_norm, &wq, &wk, &wv, &wo, &ffn_norm, &w1, &w2, &w3, &out_norm}) {
      run(fp32, *g);
    }
    if (ok) ok = im.Skip(static_cast<uint64_t>(h.seq_len) * head * 4, "freq_cis_real/imag");
    if (!h.shared_classifier) run(fp32, cls);
  } else if (h.version == 1) {
    for (const Group* g :
         {&att_norm, &ffn_norm, &out_norm, &tok, &wq, &wk, &wv, &wo, &w1, &w2, &w3}) {
      run(fp32, *g);
    }
    if (!h.shared_classifier) run(fp32, cls);
  } else {
    for (const Group* g : {&att_norm, &ffn_norm, &out_norm}) run(fp32, *g);
    for (const Group* g : {&tok, &wq, &wk, &wv, &wo, &w1, &w2, &w3}) run(q80, *g);
    if (!h.shared_classifier) run(q80, cls);
  }
  if (!ok) return std::unexpected(ok.error());
  if (r.left() != 0) {
    return MakeError(ErrorCode::kFormat, "llama2.c checkpoint: " + std::to_string(r.left()) +
                                             " unexpected bytes after the weights at offset " +
                                             std::to_string(r.offset()) +
                                             " (config does not match the file?)");
  }
  out.SetUint32("general.file_type", rep.tensors_q8_0 > 0 ? 7u : 0u);  // MOSTLY_Q8_0 / ALL_F32
  return rep;
}

Result<void> ImportLlama2cTokenizer(std::span<const std::byte> bytes, int32_t vocab_size,
                                    GgufWriter& out) {
  Reader r(bytes, "llama2.c tokenizer");
  if (vocab_size < 3) {
    return MakeError(ErrorCode::kInvalidArgument, "llama2.c tokenizer: vocab size must be >= 3");
  }
  auto max_len = r.Read<int32_t>("max_token_length");
  if (!max_len) return std::unexpected(max_len.error());
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(static_cast<size_t>(vocab_size));
  for (int32_t i = 0; i < vocab_size; ++i) {
    const std::string item = "token " + std::to_string(i);
    auto score = r.Read<float>(item + " score");
    if (!score) return std::unexpected(score.error());
    auto len = r.Read<int32_t>(item + " length");
    if (!len) return std::unexpected(len.error());
    if (*len < 0) {
      return MakeError(ErrorCode::kFormat, "llama2.c tokenizer: negative length at byte " +
                                               std::to_string(r.offset() - 4));
    }
    auto s = r.Take(static_cast<uint64_t>(*len), item + " bytes");
    if (!s) return std::unexpected(s.error());
    std::string raw(reinterpret_cast<const char*>(s->data()), s->size());
    // export_tokenizer.py wrote BOS/EOS as "\n<s>\n" / "\n</s>\n" and '▁' as ' '.
    if (raw == "\n<s>\n") raw = "<s>";
    if (raw == "\n</s>\n") raw = "</s>";
    std::string piece;
    for (char c : raw) piece += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    const bool is_byte = piece.size() == 6 && piece.starts_with("<0x") && piece[5] == '>' &&
                         std::isxdigit(static_cast<unsigned char>(piece[3])) &&
                         std::isxdigit(static_cast<unsigned char>(piece[4]));
    int32_t type = static_cast<int32_t>(TokenAttr::kNormal);
    if (i == 0)
      type = static_cast<int32_t>(TokenAttr::kUnknown);
    else if (i == 1 || i == 2)
      type = static_cast<int32_t>(TokenAttr::kControl);
    else if (is_byte)
      type = static_cast<int32_t>(TokenAttr::kByte);
    tokens.push_back(std::move(piece));
    scores.push_back(*score);
    types.push_back(type);
  }
  if (r.left() != 0) {
    return MakeError(ErrorCode::kFormat, "llama2.c tokenizer: " + std::to_string(r.left()) +
                                             " bytes left after " + std::to_string(vocab_size) +
                                             " tokens (tokenizer does not match the model?)");
  }
  out.SetString("tokenizer.ggml.model", "llama");
  out.SetStringArray("tokenizer.ggml.tokens", tokens);
  out.SetFloat32Array("tokenizer.ggml.scores", scores);
  out.SetInt32Array("tokenizer.ggml.token_type", types);
  out.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  out.SetUint32("tokenizer.ggml.bos_token_id", 1);
  out.SetUint32("tokenizer.ggml.eos_token_id", 2);
  out.SetBool("tokenizer.ggml.add_bos_token", true);
  out.SetBool("tokenizer.ggml.add_eos_token", false);
  out.SetBool("tokenizer.ggml.add_space_prefix", true);
  return {};
}

Result<Llama2cImportReport> ConvertLlama2c(const std::filesystem::path& checkpoint,
                                           const std::filesystem::path& tokenizer,
                                           const std::filesystem::path& out_path,
                                           const Llama2cImportOptions& opts) {
  auto ck = MappedFile::Open(checkpoint);
  if (!ck) return std::unexpected(ck.error());
  auto tk = MappedFile::Open(tokenizer);
  if (!tk) return std::unexpected(tk.error());
  GgufWriter w;
  auto rep = ImportLlama2cCheckpoint(ck->bytes(), opts, w);
  if (!rep) {
    return MakeError(rep.error().code, checkpoint.string() + ": " + rep.error().message);
  }
  if (auto t = ImportLlama2cTokenizer(tk->bytes(), rep->header.vocab_size, w); !t) {
    return MakeError(t.error().code, tokenizer.string() + ": " + t.error().message);
  }
  if (auto wr = w.WriteFile(out_path); !wr) return std::unexpected(wr.error());
  return rep;
}

}  // namespace ari::runtime
