// A model's measured quality per packed precision and layer drop level: the table
// `ari-ppl --table K --json OUT.json` writes (format "ari-quality-table-1",
// runtime/eval/quality_table.h). ari-tune --quality reads it: its quality term is then
// the mean over computed tokens of Loss(precision, drop) = 1 - top-1 agreement with the
// fp32 reference (the share of positions whose greedy choice changes), for the model the
// table was measured on, instead of the fixed proxy (share of W4A8 tokens + 0.1 x layers
// dropped). Levels past the table's last use its last (the engine clamps them too).
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/types.h"
#include "sim/error.h"

namespace ari::sim {

struct QualityTable {
  std::string model;                        // the pack it was measured on
  std::string agreement_with;               // "fp32" or "w8a16-drop0"
  std::array<std::vector<double>, 2> loss;  // [W8A16, W4A8][drop level] = 1 - top-1 agreement

  // Loss per token at (precision, drop); kReference counts as W8A16.
  double Loss(runtime::Precision p, int drop) const;
};

struct ReplaySummary;
// Sum over the summary's tokens of their loss: table->Loss(precision, drop) per token with
// a table, else the proxy (1 per W4A8 token + 0.1 per layer dropped). Divide by tokens.
double QualityLoss(const ReplaySummary& summary, const QualityTable* table);

// Needs rows for W8A16 and W4A8 at every drop level from 0 to a common maximum.
Result<QualityTable> ParseQualityTableJson(std::string_view json,
                                           std::string_view origin = "<quality>");
Result<QualityTable> LoadQualityTable(const std::filesystem::path& path);

}  // namespace ari::sim
