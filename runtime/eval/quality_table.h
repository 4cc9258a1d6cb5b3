// The quality table of a pack: perplexity and top-1 agreement per packed precision and
// layer drop level, measured through the packed forward pass (PackedScorer) on a text,
// agreement against the fp32 reference path on the pack's plain source (or, without it,
// against the pack's own W8A16 at drop 0). Printed by `ari-ppl --table`, written as JSON
// (format "ari-quality-table-1") by `ari-ppl --json` and read by ari-tune --quality
// (sim/quality_table.h), whose quality term it is.
//
// JSON: {"format": "ari-quality-table-1", "model": "...", "reference": "..." | "",
//        "agreement_with": "fp32" | "w8a16-drop0", "text": "...", "window": 256,
//        "kv": "f16", "predictions": N, "reference_perplexity": x (0 without reference),
//        "rows": [{"precision": "w8a16", "drop": 0, "blocks": [..], "perplexity": x,
//                  "mean_nll": x, "top1_agreement": x}, ...]}
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"
#include "runtime/eval/packed_scorer.h"

namespace ari::runtime {

class Model;

struct QualityRow {
  Precision precision = Precision::kW8A16;
  int32_t drop = 0;
  std::vector<int32_t> blocks;  // skipped at this level
  double perplexity = 0, mean_nll = 0;
  double top1_agreement = 0;  // share of predicted positions whose argmax matches
};

struct QualityTable {
  std::string model, reference, text;  // paths / names, as given
  bool against_fp32 = false;           // agreement vs the fp32 reference (else W8A16 drop 0)
  int32_t window = 0;
  KvType kv = KvType::kF16;
  int64_t predictions = 0;
  double reference_perplexity = 0;  // fp32 reference on the plain file (0: none)
  std::vector<QualityRow> rows;

  std::string ToMarkdown() const;
  std::string ToJson() const;
};

struct QualityTableOptions {
  std::vector<Precision> precisions = {Precision::kW8A16, Precision::kW4A8};  // packed only
  int32_t first_drop = 0, last_drop = 0;  // clamped to the pack's max drop level
  ScorerOptions scorer;
  const Model* reference = nullptr;  // the plain source (fp32 reference path), or null
};

// `pack` must be a pack; `reference` (when set) a plain GGUF of the same vocabulary.
Result<QualityTable> MeasureQualityTable(const Model& pack, std::span<const TokenId> text,
                                         const QualityTableOptions& opts);

}  // namespace ari::runtime
