#include "runtime/model/pack_file.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "runtime/gguf/gguf.h"
#include "runtime/kernels/pack.h"
#include "runtime/model/model_weights.h"

namespace ari::runtime {
namespace {

using kernels::PackedMatrix;
using kernels::PackedPrecision;

constexpr PackedPrecision kPrecisions[2] = {PackedPrecision::kW8, PackedPrecision::kW4};
const char* Suffix(PackedPrecision p) { return p == PackedPrecision::kW8 ? ".w8" : ".w4"; }

std::string TypeName(TensorType t) { return std::string(TensorTypeName(t)); }

bool IsLinearName(const std::string& n) {
  static const char* kEnds[] = {"attn_q.weight",      "attn_k.weight",   "attn_v.weight",
                                "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                "ffn_down.weight"};
  if (n == "output.weight") return true;
  if (!n.starts_with("blk.")) return false;
  for (const char* e : kEnds) {
    if (n.ends_with(e)) return true;
  }
  return false;
}

// Counts packed matrices as the writer fills them (PackOptions::progress).
struct Progress {
  const std::function<void(int, int)>* fn = nullptr;
  int done = 0, total = 0;
};

Result<void> AddPacked(GgufWriter& w, PackedPrecision p, const std::string& name,
                       const TensorInfo& t, bool verbose, Progress* progress) {
  const int64_t cols = t.ne[0], rows = t.NumRows();
  auto row_bytes = RowBytes(t.type, cols);
  if (!row_bytes) {
    return MakeError(row_bytes.error().code,
                     "ari-pack: tensor " + name + ": " + row_bytes.error().message);
  }
  const int64_t ne[2] = {kernels::RowBlockBytes(p, cols) / 4, kernels::RowBlocks(rows)};
  const TensorType type = t.type;
  const std::byte* src = t.data;
  const int64_t rb = static_cast<int64_t>(*row_bytes);
  std::string out_name = name + Suffix(p);
  if (verbose) {
    std::fprintf(stderr, "ari-pack: %s [%lld x %lld] %s\n", out_name.c_str(),
                 static_cast<long long>(rows), static_cast<long long>(cols),
                 std::string(TensorTypeName(type)).c_str());
  }
  return w.AddTensor(
      std::move(out_name), TensorType::kF32, ne, [=](std::span<std::byte> out) -> Result<void> {
        auto packed = kernels::PackMatrix(p, type, src, rb, rows, cols, out);
        if (!packed) {
          return MakeError(packed.error().code, "ari-pack: tensor " + name + " (" + TypeName(type) +
                                                    "): " + packed.error().message);
        }
        if (progress->fn && *progress->fn) (*progress->fn)(++progress->done, progress->total);
        return packed;
      });
}

Result<void> AddVerbatimOrF32(GgufWriter& w, const TensorInfo& t) {
  std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(t.n_dims, 1));
  const bool vector = t.NumRows() == 1;
  if (!vector || t.type == TensorType::kF32) {
    const std::byte* src = t.data;
    const uint64_t n = t.nbytes;
    return w.AddTensor(t.name, t.type, ne, [=](std::span<std::byte> out) -> Result<void> {
      std::memcpy(out.data(), src, std::min<uint64_t>(n, out.size()));
      return {};
    });
  }
  // 1-D F16/BF16 norm or bias -> F32.
  const TensorType type = t.type;
  const std::byte* src = t.data;
  const int64_t n = t.ne[0];
  return w.AddTensor(t.name, TensorType::kF32, ne, [=](std::span<std::byte> out) -> Result<void> {
    DequantizeRow(type, src, reinterpret_cast<float*>(out.data()), n);
    return {};
  });
}

}  // namespace

bool IsPack(const GgufFile& f) { return f.Has("ari.pack.version"); }

uint64_t PackedWeights::BytesPerToken(PackedPrecision p) const {
  auto bytes = [&](const PackedMatrix& m) {
    return static_cast<uint64_t>(kernels::PackedBytes(p, m.rows, m.cols));
  };
  const int i = PrecisionIndex(p);
  uint64_t total = bytes(classifier[i]);
  for (const PackedLayer& L : layers[i]) {
    total += bytes(L.q) + bytes(L.k) + bytes(L.v) + bytes(L.o) + bytes(L.gate) + bytes(L.up) +
             bytes(L.down);
  }
  return total;
}

Result<PackSummary> WritePack(const std::filesystem::path& in, const std::filesystem::path& out,
                              const PackOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto src = GgufFile::Open(in);
  if (!src) return std::unexpected(src.error());
  if (IsPack(*src)) {
    return MakeError(ErrorCode::kInvalidArgument, in.string() + " is already a pack");
  }
  auto config = ModelConfig::FromGguf(*src);
  if (!config) return std::unexpected(config.error());
  // Validates every tensor the forward pass needs (shapes, types).
  auto weights = ModelWeights::FromGguf(*src, *config);
  if (!weights) return std::unexpected(weights.error());
  if (!opts.layer_importance.empty() &&
      opts.layer_importance.size() != static_cast<size_t>(config->n_layers)) {
    return MakeError(ErrorCode::kInvalidArgument, "ari-pack: layer_importance has " +
                                                      std::to_string(opts.layer_importance.size()) +
                                                      " values, model has " +
                                                      std::to_string(config->n_layers) + " blocks");
  }
  GgufWriter w(64);
  w.CopyMetadata(*src, "");
  w.SetUint32("ari.pack.version", kPackVersion);
  w.SetString("ari.pack.source", config->name.empty() ? in.filename().string() : config->name);
  w.SetUint32("ari.pack.group_size", kernels::kGroup);
  w.SetUint32("ari.pack.row_interleave", kernels::kRowInterleave);
  w.SetString("ari.pack.encoding",
              "packed tiles carried as F32 tensors, ne = [row_block_bytes/4, row_blocks]");
  if (!opts.layer_importance.empty()) {
    w.SetFloat32Array("ari.pack.layer_importance", opts.layer_importance);
  }
  if (!opts.source_key.empty()) w.SetString("ari.pack.source_key", opts.source_key);
  if (!opts.source_path.empty()) w.SetString("ari.pack.source_path", opts.source_path);
  PackSummary sum;
  Progress progress{&opts.progress, 0, 0};
  // Packed: every linear weight, and the embedding when it is the (tied) classifier.
  auto packed = [&](const TensorInfo& t) {
    return IsLinearName(t.name) || (t.name == "token_embd.weight" && config->tied_embeddings);
  };
  for (const TensorInfo& t : src->tensors()) progress.total += packed(t) ? 2 : 0;
  // Layout (version 2): the tensors both precisions share first, then every W8 matrix,
  // then every W4 matrix, each group in the source's order. A run of one precision then
  // maps only its own group: the kernel maps large page-cache folios of the file with
  // 2 MiB page-table entries, and interleaved .w8/.w4 neighbours put the other
  // precision's bytes into the resident set (docs/memory.md "Peak RSS").
  for (const TensorInfo& t : src->tensors()) {
    if (IsLinearName(t.name)) continue;
    if (auto r = AddVerbatimOrF32(w, t); !r) return std::unexpected(r.error());
  }
  for (PackedPrecision p : kPrecisions) {
    for (const TensorInfo& t : src->tensors()) {
      if (!packed(t)) continue;
      if (auto r = AddPacked(w, p, t.name, t, opts.verbose, &progress); !r) {
        return std::unexpected(r.error());
      }
    }
  }
  sum.matrices = progress.total / 2;
  sum.bytes_written = w.EstimatedFileSize();
  if (auto r = w.WriteFile(out); !r) return std::unexpected(r.error());
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

Result<PackedWeights> BindPack(const GgufFile& f, const ModelConfig& c) {
  PackedWeights pw;
  auto version = f.GetUint("ari.pack.version");
  if (!version) return std::unexpected(version.error());
  if (*version < kOldestPackVersion || *version > kPackVersion) {
    return MakeError(ErrorCode::kUnsupported,
                     f.name() + ": pack version " + std::to_string(*version) + " (reads " +
                         std::to_string(kOldestPackVersion) + ".." + std::to_string(kPackVersion) +
                         "; re-pack it with ari-pack)");
  }
  pw.version = static_cast<uint32_t>(*version);
  if (auto s = f.GetString("ari.pack.source"); s) pw.source = std::string(*s);
  if (f.Has("ari.pack.layer_importance")) {
    auto imp = f.GetFloatArray("ari.pack.layer_importance");
    if (!imp) return std::unexpected(imp.error());
    if (imp->size() != static_cast<size_t>(c.n_layers)) {
      return MakeError(ErrorCode::kFormat, f.name() + ": ari.pack.layer_importance size");
    }
    pw.layer_importance = std::move(*imp);
  }
  auto bind = [&](const std::string& name, PackedPrecision p, int64_t rows,
                  int64_t cols) -> Result<PackedMatrix> {
    auto t = f.GetTensor(name + Suffix(p));
    if (!t) return std::unexpected(t.error());
    const uint64_t want = static_cast<uint64_t>(kernels::PackedBytes(p, rows, cols));
    if ((*t)->nbytes != want || (*t)->data == nullptr) {
      return MakeError(ErrorCode::kFormat, f.name() + ": packed tensor " + name + Suffix(p) +
                                               " has " + std::to_string((*t)->nbytes) +
                                               " bytes, expected " + std::to_string(want));
    }
    return PackedMatrix{p, (*t)->data, rows, cols};
  };
  const int64_t dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), ffn = c.ffn_dim;
  const std::string cls = f.FindTensor("output.weight.w8") ? "output.weight" : "token_embd.weight";
  for (PackedPrecision p : kPrecisions) {
    const int i = PrecisionIndex(p);
    auto cm = bind(cls, p, c.vocab_size, dim);
    if (!cm) return std::unexpected(cm.error());
    pw.classifier[i] = *cm;
    pw.layers[i].resize(static_cast<size_t>(c.n_layers));
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      PackedLayer& L = pw.layers[i][static_cast<size_t>(l)];
      struct Item {
        PackedMatrix* dst;
        const char* name;
        int64_t rows, cols;
      } items[] = {{&L.q, "attn_q.weight", qd, dim},       {&L.k, "attn_k.weight", kvd, dim},
                   {&L.v, "attn_v.weight", kvd, dim},      {&L.o, "attn_output.weight", dim, qd},
                   {&L.gate, "ffn_gate.weight", ffn, dim}, {&L.up, "ffn_up.weight", ffn, dim},
                   {&L.down, "ffn_down.weight", dim, ffn}};
      for (const Item& it : items) {
        auto m = bind(b + it.name, p, it.rows, it.cols);
        if (!m) return std::unexpected(m.error());
        *it.dst = *m;
      }
    }
  }
  return pw;
}

}  // namespace ari::runtime
