#include "sim/quality_table.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/replay.h"

namespace ari::sim {
namespace {

namespace pb = google::protobuf;

const pb::Value* Field(const pb::Value& obj, const std::string& name) {
  if (obj.kind_case() != pb::Value::kStructValue) return nullptr;
  const auto& f = obj.struct_value().fields();
  auto it = f.find(name);
  return it == f.end() ? nullptr : &it->second;
}

std::string Str(const pb::Value& obj, const std::string& name) {
  const pb::Value* v = Field(obj, name);
  return v && v->kind_case() == pb::Value::kStringValue ? v->string_value() : "";
}

// A number field; NaN when absent or not a number.
double Num(const pb::Value& obj, const std::string& name) {
  const pb::Value* v = Field(obj, name);
  return v && v->kind_case() == pb::Value::kNumberValue ? v->number_value() : std::nan("");
}

Error Bad(std::string_view origin, const std::string& msg) {
  return Error{ErrorCode::kInvalidArgument, std::string(origin) + ": " + msg};
}

}  // namespace

double QualityTable::Loss(runtime::Precision p, int drop) const {
  const std::vector<double>& l = loss[p == runtime::Precision::kW4A8 ? 1 : 0];
  if (l.empty()) return 0;
  return l[static_cast<size_t>(std::clamp(drop, 0, static_cast<int>(l.size()) - 1))];
}

double QualityLoss(const ReplaySummary& sum, const QualityTable* table) {
  double loss = 0;
  if (table == nullptr) {
    for (size_t d = 0; d < sum.drop_tokens.size(); ++d)
      loss += 0.1 * static_cast<double>(d) * static_cast<double>(sum.drop_tokens[d]);
    return loss + static_cast<double>(sum.precision_tokens[1]);
  }
  for (size_t pi = 0; pi < 2; ++pi) {
    const auto p = pi == 0 ? runtime::Precision::kW8A16 : runtime::Precision::kW4A8;
    const std::vector<int64_t>& by_drop = sum.precision_drop_tokens[pi];
    for (size_t d = 0; d < by_drop.size(); ++d) {
      loss += table->Loss(p, static_cast<int>(d)) * static_cast<double>(by_drop[d]);
    }
  }
  return loss;
}

Result<QualityTable> ParseQualityTableJson(std::string_view json, std::string_view origin) {
  pb::Value v;
  if (!pb::util::JsonStringToMessage(std::string(json), &v).ok()) {
    return std::unexpected(Bad(origin, "not valid JSON"));
  }
  if (Str(v, "format") != "ari-quality-table-1") {
    return std::unexpected(Bad(origin,
                               "not a quality table (\"format\": \"ari-quality-table-1\" "
                               "missing; made by ari-ppl --table K --json OUT)"));
  }
  QualityTable t;
  t.model = Str(v, "model");
  t.agreement_with = Str(v, "agreement_with");
  const pb::Value* rows = Field(v, "rows");
  if (!rows || !rows->has_list_value()) return std::unexpected(Bad(origin, "\"rows\" missing"));
  std::array<std::map<int, double>, 2> by_drop;
  for (const pb::Value& r : rows->list_value().values()) {
    const std::string p = Str(r, "precision");
    const double drop = Num(r, "drop"), agree = Num(r, "top1_agreement");
    const int pi = p == "w8a16" ? 0 : p == "w4a8" ? 1 : -1;
    if (pi < 0 || !(drop >= 0 && drop < 1024) || !(agree >= 0 && agree <= 1)) {
      return std::unexpected(Bad(origin,
                                 "a row needs precision w8a16|w4a8, drop >= 0 and "
                                 "top1_agreement in [0, 1]"));
    }
    by_drop[static_cast<size_t>(pi)][static_cast<int>(drop)] = 1.0 - agree;
  }
  for (size_t pi = 0; pi < 2; ++pi) {
    int next = 0;
    for (const auto& [d, loss] : by_drop[pi]) {
      if (d != next++) break;
      t.loss[pi].push_back(loss);
    }
  }
  if (t.loss[0].empty() || t.loss[0].size() != t.loss[1].size() ||
      t.loss[0].size() != by_drop[0].size() || t.loss[1].size() != by_drop[1].size()) {
    return std::unexpected(Bad(origin,
                               "rows must cover W8A16 and W4A8 at every drop level "
                               "0 .. K (ari-ppl --table K)"));
  }
  return t;
}

Result<QualityTable> LoadQualityTable(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::unexpected(Error{ErrorCode::kIo, path.string() + ": cannot open"});
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseQualityTableJson(ss.str(), path.string());
}

}  // namespace ari::sim
