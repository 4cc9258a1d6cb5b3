#include "runtime/eval/quality_table.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "runtime/eval/perplexity.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"

namespace ari::runtime {
namespace {

kernels::PackedPrecision Packed(Precision p) {
  return p == Precision::kW4A8 ? kernels::PackedPrecision::kW4 : kernels::PackedPrecision::kW8;
}

std::string Num(double x, const char* fmt = "%.6g") {
  char b[64];
  std::snprintf(b, sizeof(b), fmt, x);
  return b;
}

std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o + "\"";
}

std::string Blocks(const std::vector<int32_t>& v, const char* sep, const char* none) {
  if (v.empty()) return none;
  std::string s;
  for (int32_t x : v) s += (s.empty() ? "" : sep) + std::to_string(x);
  return s;
}

Result<void> CheckInputs(const Model& pack, const QualityTableOptions& o) {
  if (!IsPack(pack.file())) {
    return MakeError(ErrorCode::kFormat, "quality table: the model is not a pack (ari-pack)");
  }
  if (o.reference != nullptr) {
    if (IsPack(o.reference->file())) {
      return MakeError(ErrorCode::kFormat,
                       "quality table: the reference is a pack; the fp32 reference path needs "
                       "the plain GGUF");
    }
    if (o.reference->config().vocab_size != pack.config().vocab_size) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "quality table: the reference's vocabulary differs from the pack's");
    }
  }
  for (Precision p : o.precisions) {
    if (p == Precision::kReference) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "quality table: rows are packed precisions (W8A16, W4A8)");
    }
  }
  return {};
}

}  // namespace

Result<QualityTable> MeasureQualityTable(const Model& pack, std::span<const TokenId> text,
                                         const QualityTableOptions& o) {
  if (auto ok = CheckInputs(pack, o); !ok) return std::unexpected(ok.error());
  auto scorer = PackedScorer::Create(pack, o.scorer);
  if (!scorer) return std::unexpected(scorer.error());
  PackedScorer& sc = **scorer;
  QualityTable t;
  t.window = sc.window();
  t.kv = o.scorer.kv_type;
  std::vector<TokenId> base;  // argmax of what agreement is measured against
  if (o.reference != nullptr) {
    PerplexityOptions po;
    po.window = sc.window();
    auto ref = ComputePerplexity(*o.reference, text, po);
    if (!ref) return std::unexpected(ref.error());
    t.against_fp32 = true;
    t.reference_perplexity = ref->perplexity;
    base = std::move(ref->top1);
  } else {
    auto w8 = ComputePackedPerplexity(sc, text, kernels::PackedPrecision::kW8);
    if (!w8) return std::unexpected(w8.error());
    base = std::move(w8->top1);
  }
  const int32_t last = std::min(o.last_drop, sc.max_drop_level());
  if (o.first_drop > last) {
    return MakeError(ErrorCode::kUnsupported,
                     "quality table: drop level " + std::to_string(o.first_drop) +
                         " is above the pack's maximum (" + std::to_string(sc.max_drop_level()) +
                         (sc.max_drop_level() == 0 ? "; no layer importance in the pack)" : ")"));
  }
  for (Precision p : o.precisions) {
    for (int32_t d = o.first_drop; d <= last; ++d) {
      auto blocks = sc.SetDropLevel(d);
      if (!blocks) return std::unexpected(blocks.error());
      QualityRow row{p, d, std::vector<int32_t>(blocks->begin(), blocks->end())};
      auto r = ComputePackedPerplexity(sc, text, Packed(p));
      if (!r) return std::unexpected(r.error());
      row.perplexity = r->perplexity;
      row.mean_nll = r->mean_nll;
      row.top1_agreement = Top1Agreement(base, r->top1);
      t.predictions = r->predictions;
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

std::string QualityTable::ToMarkdown() const {
  const std::string with = against_fp32 ? "fp32 reference" : "W8A16 drop 0";
  std::string s = "| precision | drop level | blocks skipped | perplexity | top-1 agreement with " +
                  with + " |\n|---|---|---|---|---|\n";
  if (against_fp32) {
    s += "| fp32 (reference, plain file) | 0 | - | " + Num(reference_perplexity, "%.3f") +
         " | 100.0% |\n";
  }
  for (const QualityRow& r : rows) {
    std::string p(PrecisionName(r.precision));
    std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return std::toupper(c); });
    s += "| " + p + " | " + std::to_string(r.drop) + " | " + Blocks(r.blocks, ",", "-") + " | " +
         Num(r.perplexity, "%.3f") + " | " + Num(100.0 * r.top1_agreement, "%.1f") + "% |\n";
  }
  return s;
}

std::string QualityTable::ToJson() const {
  std::string s = "{\"format\": \"ari-quality-table-1\", \"model\": " + Quote(model) +
                  ", \"reference\": " + Quote(reference) + ", \"agreement_with\": \"" +
                  (against_fp32 ? "fp32" : "w8a16-drop0") + "\", \"text\": " + Quote(text) +
                  ", \"window\": " + std::to_string(window) + ", \"kv\": \"" +
                  std::string(KvTypeName(kv)) +
                  "\", \"predictions\": " + std::to_string(predictions) +
                  ", \"reference_perplexity\": " + Num(reference_perplexity) + ",\n \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const QualityRow& r = rows[i];
    s += "  {\"precision\": \"" + std::string(PrecisionName(r.precision)) +
         "\", \"drop\": " + std::to_string(r.drop) + ", \"blocks\": [" +
         Blocks(r.blocks, ", ", "") + "], \"perplexity\": " + Num(r.perplexity) +
         ", \"mean_nll\": " + Num(r.mean_nll) + ", \"top1_agreement\": " + Num(r.top1_agreement) +
         "}";
    s += i + 1 < rows.size() ? ",\n" : "\n";
  }
  return s + " ]}\n";
}

}  // namespace ari::runtime
