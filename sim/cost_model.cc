// Cost model: chunk durations for model-mode replay; see cost_model.h.
#include "sim/cost_model.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <tuple>

namespace ari::sim {
namespace internal {
extern const std::string_view kBuiltinCostJson;
}  // namespace internal

namespace {

namespace pb = google::protobuf;

Result<pb::Value> ParseJson(std::string_view text, std::string_view origin) {
  pb::Value v;
  const auto st = pb::util::JsonStringToMessage(std::string(text), &v);
  if (!st.ok()) {
    return MakeError(ErrorCode::kParse,
                     std::string(origin) + ": not valid JSON: " + std::string(st.message()));
  }
  return v;
}

const pb::Value* Field(const pb::Value& obj, const std::string& name) {
  if (obj.kind_case() != pb::Value::kStructValue) return nullptr;
  const auto& f = obj.struct_value().fields();
  auto it = f.find(name);
  return it == f.end() ? nullptr : &it->second;
}

double Num(const pb::Value& obj, const std::string& name, double def) {
  const pb::Value* v = Field(obj, name);
  return v && v->kind_case() == pb::Value::kNumberValue ? v->number_value() : def;
}

std::string Str(const pb::Value& obj, const std::string& name, const std::string& def) {
  const pb::Value* v = Field(obj, name);
  return v && v->kind_case() == pb::Value::kStringValue ? v->string_value() : def;
}

Result<runtime::Precision> ParsePrecision(std::string p) {
  std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return std::tolower(c); });
  if (p == "w8a16") return runtime::Precision::kW8A16;
  if (p == "w4a8") return runtime::Precision::kW4A8;
  return MakeError(ErrorCode::kInvalidArgument, "precision \"" + p + "\" (expected w8a16 or w4a8)");
}

std::string Fmt(double x) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.6g", x);
  return b;
}

// x86 tiers and ARM tiers are separate families; -1 = unknown name.
int Family(std::string_view isa) {
  if (isa == "avx2" || isa == "avx512vnni" || isa == "amx") return 0;
  if (isa.starts_with("neon")) return 1;
  if (isa == "scalar") return 2;
  return -1;
}

// An optional object field of numbers with known keys ("nominal_khz",
// "freq_sensitivity"): each present key's value goes to its target.
Result<void> NumberObject(const pb::Value& obj, const std::string& name,
                          std::initializer_list<std::pair<const char*, double*>> keys,
                          const std::string& origin) {
  const pb::Value* v = Field(obj, name);
  if (!v) return {};
  std::string expected;
  for (const auto& [k, target] : keys) expected += (expected.empty() ? "" : ", ") + std::string(k);
  if (v->kind_case() != pb::Value::kStructValue) {
    return MakeError(ErrorCode::kInvalidArgument,
                     origin + ": \"" + name + "\" must be an object {" + expected + "}");
  }
  for (const auto& [k, x] : v->struct_value().fields()) {
    double* target = nullptr;
    for (const auto& [key, t] : keys) {
      if (k == key) target = t;
    }
    if (!target) {
      std::string msg = origin;
      msg.append(": \"").append(name).append("\": unknown key \"").append(k);
      msg.append("\" (expected ").append(expected).append(")");
      return MakeError(ErrorCode::kInvalidArgument, std::move(msg));
    }
    if (x.kind_case() != pb::Value::kNumberValue) {
      std::string msg = origin;
      msg.append(": \"").append(name).append("\".").append(k).append(" must be a number");
      return MakeError(ErrorCode::kInvalidArgument, std::move(msg));
    }
    *target = x.number_value();
  }
  return {};
}

Result<void> ValidateDropCost(const CostModel& m) {
  auto bad = [](const std::string& msg) {
    return MakeError(ErrorCode::kInvalidArgument, "cost model: layer_drop_cost: " + msg);
  };
  if (m.drop_cost_prefill.empty() && m.drop_cost_decode.empty()) return {};
  if (m.drop_cost_prefill.size() != m.drop_cost_decode.size() || m.drop_cost_prefill.size() < 2) {
    return bad("\"prefill\" and \"decode\" need the same number (>= 2) of levels");
  }
  if (m.drop_cost_layers < 2 ||
      m.drop_cost_prefill.size() > static_cast<size_t>(m.drop_cost_layers)) {
    return bad("\"layers\" must be >= 2 and above the last level");
  }
  for (const auto* f : {&m.drop_cost_prefill, &m.drop_cost_decode}) {
    if (std::abs((*f)[0] - 1.0) > 1e-6) return bad("level 0 must be 1");
    for (double x : *f) {
      if (!(x > 0 && x <= 2)) return bad("factors must be in (0, 2]");
    }
  }
  return {};
}

// "layer_drop_cost": {"layers": L, "source": "...", "prefill": [...], "decode": [...]}.
Result<void> ParseDropCost(const pb::Value& obj, CostModel& m, const std::string& origin) {
  const pb::Value* v = Field(obj, "layer_drop_cost");
  if (!v) return {};
  if (v->kind_case() != pb::Value::kStructValue) {
    return MakeError(ErrorCode::kInvalidArgument,
                     origin + ": \"layer_drop_cost\" must be an object");
  }
  m.drop_cost_layers = static_cast<int>(Num(*v, "layers", 0));
  m.drop_cost_source = Str(*v, "source", "");
  for (auto [key, target] :
       {std::pair{"prefill", &m.drop_cost_prefill}, std::pair{"decode", &m.drop_cost_decode}}) {
    const pb::Value* l = Field(*v, key);
    if (!l || !l->has_list_value()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       origin + ": \"layer_drop_cost\"." + key + " must be a list of numbers");
    }
    for (const pb::Value& x : l->list_value().values()) target->push_back(x.number_value());
  }
  return {};
}

std::string DropCostJson(const CostModel& m) {
  if (m.drop_cost_prefill.empty()) return "";
  std::string s = "  \"layer_drop_cost\": {\"layers\": " + std::to_string(m.drop_cost_layers) +
                  ", \"source\": \"";
  for (char c : m.drop_cost_source) {
    if (c == '"' || c == '\\') s += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) s += c;
  }
  s += "\"";
  for (auto [key, f] :
       {std::pair{"prefill", &m.drop_cost_prefill}, std::pair{"decode", &m.drop_cost_decode}}) {
    s += std::string(", \"") + key + "\": [";
    for (size_t i = 0; i < f->size(); ++i) s += (i ? ", " : "") + Fmt((*f)[i]);
    s += "]";
  }
  return s + "},\n";
}

}  // namespace

std::map<std::string, double> DefaultIsaSpeed() {
  // Relative kernel speed; avx2 = 1. avx512vnni/neon figures are estimates (this
  // machine has AVX2 only); scalar from the kernels' own scalar reference paths. amx: the
  // prefill GEMMs on tiles ran pp128 1.2-1.5x the avx512vnni tier on the Intel Xeon host
  // (docs/benchmarks.md "AMX"), decode is the avx512vnni tier's; one factor for both.
  return {{"scalar", 0.15}, {"avx2", 1.0},         {"avx512vnni", 1.4}, {"amx", 1.6},
          {"neon", 0.6},    {"neon_dotprod", 0.9}, {"neon_i8mm", 1.1}};
}

double CostModel::FrequencyFactor(runtime::ChunkPhase phase, bool efficiency,
                                  uint32_t cap_khz) const {
  const double nominal = efficiency ? nominal_khz_efficiency : nominal_khz_performance;
  const double cap = static_cast<double>(cap_khz);
  if (cap_khz == 0 || !(nominal > 0) || cap >= nominal) return 1.0;
  const double sens =
      phase == runtime::ChunkPhase::kPrefill ? freq_sensitivity_prefill : freq_sensitivity_decode;
  return 1.0 + sens * (nominal / cap - 1.0);
}

double CostModel::MaskSeconds(int tokens, bool efficiency, uint32_t cap_khz) const {
  if (tokens <= 0 || !(mask_us_per_token > 0)) return 0.0;
  double s = static_cast<double>(tokens) * mask_us_per_token * 1e-6;
  if (efficiency && efficiency_core_speed > 0) s /= efficiency_core_speed;
  return s * FrequencyFactor(runtime::ChunkPhase::kPrefill, efficiency, cap_khz);
}

double CostModel::DropFactor(runtime::ChunkPhase phase, int level) const {
  if (level <= 0) return 1.0;
  const std::vector<double>& f =
      phase == runtime::ChunkPhase::kPrefill ? drop_cost_prefill : drop_cost_decode;
  if (f.size() < 2 || drop_cost_layers < 1 || layers < 1) {
    return static_cast<double>(std::max(1, layers - level)) / std::max(1, layers);
  }
  // The level on the table's model; linear between its points, its last step beyond.
  const double x = static_cast<double>(level) * drop_cost_layers / layers;
  const size_t last = f.size() - 1;
  const size_t i = std::min(static_cast<size_t>(x), last - 1);
  const double v = f[i] + (x - static_cast<double>(i)) * (f[i + 1] - f[i]);
  return std::max(0.05, v);
}

double CostModel::ChunkSeconds(const runtime::ChunkKnobs& knobs, runtime::ChunkPhase phase,
                               int tokens, bool efficiency, uint32_t cap_khz) const {
  const int threads = std::max(1, knobs.threads);
  const std::string_view tier = runtime::kernels::IsaTierName(knobs.max_isa);
  const CostEntry* best = nullptr;
  int best_score = std::numeric_limits<int>::max();
  for (const CostEntry& e : entries) {
    if (e.precision != knobs.precision) continue;
    const int score = (e.isa == tier ? 0 : 1000) + (e.layer_drop == knobs.layer_drop ? 0 : 100) +
                      std::abs(e.threads - threads);
    if (score < best_score) {
      best_score = score;
      best = &e;
    }
  }
  if (!best) {  // no entry of that precision: any entry
    if (entries.empty()) return 0.0;
    best = &entries.front();
  }
  const bool prefill = phase == runtime::ChunkPhase::kPrefill;
  const double tps = prefill ? best->prefill_tps : best->decode_tps;
  const double overhead_s = (prefill ? best->chunk_overhead_ms : best->decode_overhead_ms) * 1e-3;
  double s = overhead_s + static_cast<double>(std::max(0, tokens)) / tps;
  if (best->threads != threads) {
    s *= std::pow(static_cast<double>(best->threads) / threads, thread_scaling);
  }
  if (best->isa != tier) {
    // The knob's tier, capped by the machine's best (same family); other families
    // are ignored by the engine (it runs its best).
    std::string eff(tier);
    auto speed = [&](const std::string& n) {
      auto it = isa_speed.find(n);
      return it == isa_speed.end() ? 1.0 : it->second;
    };
    if (Family(eff) != Family(best_isa) && eff != "scalar") eff = best_isa;
    if (speed(eff) > speed(best_isa)) eff = best_isa;
    s *= speed(best->isa) / speed(eff);
  }
  if (best->layer_drop != knobs.layer_drop && layers > 0) {
    s *= DropFactor(phase, knobs.layer_drop) / DropFactor(phase, best->layer_drop);
  }
  if (efficiency && efficiency_core_speed > 0) s /= efficiency_core_speed;
  if (cap_khz != 0) {
    const double f = FrequencyFactor(phase, efficiency, cap_khz);
    if (f != 1.0) s *= f;
  }
  return s;
}

Result<void> CostModel::Validate() const {
  auto bad = [](const std::string& m) {
    return MakeError(ErrorCode::kInvalidArgument, "cost model: " + m);
  };
  if (entries.empty()) return bad("no entries");
  if (layers < 1) return bad("layers must be >= 1");
  if (!(thread_scaling >= 0 && thread_scaling <= 2)) return bad("thread_scaling must be in [0, 2]");
  if (!(efficiency_core_speed > 0 && efficiency_core_speed <= 4)) {
    return bad("efficiency_core_speed must be in (0, 4]");
  }
  for (const auto& [name, v] : isa_speed) {
    if (!(v > 0 && std::isfinite(v))) return bad("isa_speed[" + name + "] must be > 0");
  }
  if (!(nominal_khz_performance >= 0 && nominal_khz_performance < 1e8) ||
      !(nominal_khz_efficiency >= 0 && nominal_khz_efficiency < 1e8)) {
    return bad("nominal_khz values must be in [0, 1e8) kHz (0 = unknown)");
  }
  if (!(freq_sensitivity_prefill >= 0 && freq_sensitivity_prefill <= 1) ||
      !(freq_sensitivity_decode >= 0 && freq_sensitivity_decode <= 1)) {
    return bad("freq_sensitivity values must be in [0, 1]");
  }
  if (!(park_ms_per_1k_positions >= 0 && park_ms_per_1k_positions < 1e6)) {
    return bad("park_ms_per_1k_positions must be in [0, 1e6)");
  }
  if (!(spill_ms_per_1k_positions >= 0 && spill_ms_per_1k_positions < 1e6) ||
      !(restore_ms_per_1k_positions >= 0 && restore_ms_per_1k_positions < 1e6)) {
    return bad("spill_ms_per_1k_positions and restore_ms_per_1k_positions must be in [0, 1e6)");
  }
  if (!(mask_us_per_token >= 0 && mask_us_per_token < 1e6)) {
    return bad("mask_us_per_token must be in [0, 1e6)");
  }
  if (auto ok = ValidateDropCost(*this); !ok) return ok;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CostEntry& e = entries[i];
    const std::string at = "entries[" + std::to_string(i) + "]: ";
    if (e.threads < 1) return bad(at + "threads must be >= 1");
    if (!(e.prefill_tps > 0 && std::isfinite(e.prefill_tps)))
      return bad(at + "prefill_tps must be > 0");
    if (!(e.decode_tps > 0 && std::isfinite(e.decode_tps)))
      return bad(at + "decode_tps must be > 0");
    if (!(e.chunk_overhead_ms >= 0) || !(e.decode_overhead_ms >= 0)) {
      return bad(at + "overheads must be >= 0");
    }
    if (e.layer_drop < 0 || e.layer_drop >= layers) return bad(at + "layer_drop out of range");
    if (Family(e.isa) < 0) return bad(at + "unknown isa \"" + e.isa + "\"");
  }
  return {};
}

Result<CostModel> ParseCostModelJson(std::string_view json, std::string_view origin) {
  auto v = ParseJson(json, origin);
  if (!v) return std::unexpected(v.error());
  const std::string o(origin);
  if (Str(*v, "format", "") != "ari-sim-cost-1") {
    return MakeError(ErrorCode::kFormat,
                     o + ": not a cost model (\"format\": \"ari-sim-cost-1\" missing)");
  }
  CostModel m;
  m.source = Str(*v, "source", "");
  m.layers = static_cast<int>(Num(*v, "layers", 24));
  m.best_isa = Str(*v, "best_isa", "avx2");
  m.thread_scaling = Num(*v, "thread_scaling", 0.8);
  m.efficiency_core_speed = Num(*v, "efficiency_core_speed", 0.5);
  m.park_ms_per_1k_positions =
      Num(*v, "park_ms_per_1k_positions", CostModel::kDefaultParkMsPer1kPositions);
  m.spill_ms_per_1k_positions =
      Num(*v, "spill_ms_per_1k_positions", CostModel::kDefaultSpillMsPer1kPositions);
  m.restore_ms_per_1k_positions =
      Num(*v, "restore_ms_per_1k_positions", CostModel::kDefaultRestoreMsPer1kPositions);
  m.mask_us_per_token = Num(*v, "mask_us_per_token", 0.0);
  m.isa_speed = DefaultIsaSpeed();
  if (const pb::Value* is = Field(*v, "isa_speed"); is && is->has_struct_value()) {
    for (const auto& [k, x] : is->struct_value().fields()) m.isa_speed[k] = x.number_value();
  }
  if (auto ok = NumberObject(
          *v, "nominal_khz",
          {{"performance", &m.nominal_khz_performance}, {"efficiency", &m.nominal_khz_efficiency}},
          o);
      !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok = NumberObject(
          *v, "freq_sensitivity",
          {{"prefill", &m.freq_sensitivity_prefill}, {"decode", &m.freq_sensitivity_decode}}, o);
      !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok = ParseDropCost(*v, m, o); !ok) return std::unexpected(ok.error());
  const pb::Value* es = Field(*v, "entries");
  if (!es || !es->has_list_value())
    return MakeError(ErrorCode::kInvalidArgument, o + ": \"entries\" list missing");
  for (const pb::Value& x : es->list_value().values()) {
    CostEntry e;
    auto p = ParsePrecision(Str(x, "precision", ""));
    if (!p) return MakeError(ErrorCode::kInvalidArgument, o + ": " + p.error().message);
    e.precision = *p;
    e.threads = static_cast<int>(Num(x, "threads", 1));
    e.isa = Str(x, "isa", m.best_isa);
    e.layer_drop = static_cast<int>(Num(x, "layer_drop", 0));
    e.prefill_tps = Num(x, "prefill_tps", 0);
    e.chunk_overhead_ms = Num(x, "chunk_overhead_ms", 0);
    e.decode_tps = Num(x, "decode_tps", 0);
    e.decode_overhead_ms = Num(x, "decode_overhead_ms", 0);
    m.entries.push_back(e);
  }
  if (auto ok = m.Validate(); !ok)
    return MakeError(ErrorCode::kInvalidArgument, o + ": " + ok.error().message);
  return m;
}

Result<CostModel> LoadCostModel(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return MakeError(ErrorCode::kIo, path.string() + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseCostModelJson(ss.str(), path.string());
}

Result<CostModel> BuiltinCostModel() {
  return ParseCostModelJson(internal::kBuiltinCostJson, "<built-in sim/cost_default.json>");
}

std::string CostModelToJson(const CostModel& m) {
  std::string s = "{\n  \"format\": \"ari-sim-cost-1\",\n  \"source\": \"";
  for (char c : m.source) {
    if (c == '"' || c == '\\') s += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) s += c;
  }
  s += "\",\n  \"layers\": " + std::to_string(m.layers) + ",\n  \"best_isa\": \"" + m.best_isa +
       "\",\n  \"thread_scaling\": " + Fmt(m.thread_scaling) +
       ",\n  \"efficiency_core_speed\": " + Fmt(m.efficiency_core_speed) + ",\n  \"isa_speed\": {";
  bool first = true;
  for (const auto& [k, v] : m.isa_speed) {
    s += (first ? "" : ", ") + ("\"" + k + "\": " + Fmt(v));
    first = false;
  }
  s += "},\n";
  if (m.nominal_khz_performance > 0 || m.nominal_khz_efficiency > 0) {
    s += "  \"nominal_khz\": {\"performance\": " + Fmt(m.nominal_khz_performance) +
         ", \"efficiency\": " + Fmt(m.nominal_khz_efficiency) + "},\n";
  }
  if (m.freq_sensitivity_prefill != CostModel::kDefaultFreqSensitivityPrefill ||
      m.freq_sensitivity_decode != CostModel::kDefaultFreqSensitivityDecode) {
    s += "  \"freq_sensitivity\": {\"prefill\": " + Fmt(m.freq_sensitivity_prefill) +
         ", \"decode\": " + Fmt(m.freq_sensitivity_decode) + "},\n";
  }
  if (m.park_ms_per_1k_positions != CostModel::kDefaultParkMsPer1kPositions) {
    s += "  \"park_ms_per_1k_positions\": " + Fmt(m.park_ms_per_1k_positions) + ",\n";
  }
  if (m.spill_ms_per_1k_positions != CostModel::kDefaultSpillMsPer1kPositions) {
    s += "  \"spill_ms_per_1k_positions\": " + Fmt(m.spill_ms_per_1k_positions) + ",\n";
  }
  if (m.restore_ms_per_1k_positions != CostModel::kDefaultRestoreMsPer1kPositions) {
    s += "  \"restore_ms_per_1k_positions\": " + Fmt(m.restore_ms_per_1k_positions) + ",\n";
  }
  if (m.mask_us_per_token != 0) {
    s += "  \"mask_us_per_token\": " + Fmt(m.mask_us_per_token) + ",\n";
  }
  s += DropCostJson(m);
  s += "  \"entries\": [\n";
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const CostEntry& e = m.entries[i];
    s += "    {\"precision\": \"" + std::string(runtime::PrecisionName(e.precision)) +
         "\", \"threads\": " + std::to_string(e.threads) + ", \"isa\": \"" + e.isa +
         "\", \"layer_drop\": " + std::to_string(e.layer_drop) +
         ", \"prefill_tps\": " + Fmt(e.prefill_tps) +
         ", \"chunk_overhead_ms\": " + Fmt(e.chunk_overhead_ms) +
         ", \"decode_tps\": " + Fmt(e.decode_tps) +
         ", \"decode_overhead_ms\": " + Fmt(e.decode_overhead_ms) + "}";
    s += i + 1 < m.entries.size() ? ",\n" : "\n";
  }
  s += "  ]\n}\n";
  return s;
}

namespace {

// Least-squares line through (n tokens, ms): {ms per token, chunk overhead ms}. Noisy points
// (negative overhead or non-positive slope) fall back to no overhead and the mean rate.
std::pair<double, double> FitPrefillLine(const std::vector<std::pair<double, double>>& pts) {
  double slope = pts[0].second / pts[0].first, icpt = 0;
  if (pts.size() < 2) return {slope, icpt};
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : pts) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(pts.size());
  const double den = n * sxx - sx * sx;
  if (den > 0) {
    slope = (n * sxy - sx * sy) / den;
    icpt = (sy - slope * sx) / n;
  }
  if (icpt < 0 || slope <= 0) {
    double tot_n = 0, tot_ms = 0;
    for (auto [x, y] : pts) {
      tot_n += x;
      tot_ms += y;
    }
    slope = tot_ms / tot_n;
    icpt = 0;
  }
  return {slope, icpt};
}

}  // namespace

Result<CostModel> BuildCostModelFromBench(const std::vector<std::string>& texts,
                                          const BenchCalibration& cal) {
  CostModel m;
  m.layers = cal.layers;
  m.best_isa = cal.isa;
  m.thread_scaling = cal.thread_scaling;
  m.efficiency_core_speed = cal.efficiency_core_speed;
  m.isa_speed = DefaultIsaSpeed();
  std::string models;
  for (size_t t = 0; t < texts.size(); ++t) {
    std::istringstream in(texts[t]);
    std::string line;
    int n_obj = 0;
    while (std::getline(in, line)) {
      const size_t b = line.find('{');
      if (b == std::string::npos) continue;
      const std::string origin =
          "bench input " + std::to_string(t + 1) + " object " + std::to_string(++n_obj);
      auto v = ParseJson(std::string_view(line).substr(b), origin);
      if (!v) return std::unexpected(v.error());
      CostEntry e;
      auto p = ParsePrecision(Str(*v, "precision", ""));
      if (!p) return MakeError(ErrorCode::kInvalidArgument, origin + ": " + p.error().message);
      e.precision = *p;
      e.threads = static_cast<int>(Num(*v, "threads", 0));
      e.isa = cal.isa;
      const pb::Value* dec = Field(*v, "decode_tps");
      e.decode_tps = dec ? Num(*dec, "median", 0) : 0;
      // Least-squares line through (n, n / tps) in ms.
      std::vector<std::pair<double, double>> pts;
      if (const pb::Value* pr = Field(*v, "prompt"); pr && pr->has_list_value()) {
        for (const pb::Value& x : pr->list_value().values()) {
          const double n = Num(x, "tokens", 0);
          const pb::Value* tps = Field(x, "tps");
          const double r = tps ? Num(*tps, "median", 0) : 0;
          if (n > 0 && r > 0) pts.emplace_back(n, 1000.0 * n / r);
        }
      }
      if (pts.empty())
        return MakeError(ErrorCode::kInvalidArgument, origin + ": no prompt measurements");
      const auto [slope, icpt] = FitPrefillLine(pts);
      e.prefill_tps = 1000.0 / slope;
      e.chunk_overhead_ms = icpt;
      if (e.threads < 1)
        return MakeError(ErrorCode::kInvalidArgument, origin + ": threads missing");
      if (e.decode_tps <= 0)
        return MakeError(ErrorCode::kInvalidArgument, origin + ": decode_tps missing");
      m.entries.push_back(e);
      const std::string model = Str(*v, "model", "?");
      if (models.find(model) == std::string::npos) models += (models.empty() ? "" : ", ") + model;
    }
  }
  if (m.entries.empty())
    return MakeError(ErrorCode::kInvalidArgument, "no benchmark objects in the input");
  std::sort(m.entries.begin(), m.entries.end(), [](const CostEntry& a, const CostEntry& b) {
    return std::tuple(a.precision, a.threads) < std::tuple(b.precision, b.threads);
  });
  m.source = "benchmark JSON (" + std::to_string(m.entries.size()) + " runs) of " + models;
  if (auto ok = m.Validate(); !ok) return std::unexpected(ok.error());
  return m;
}

}  // namespace ari::sim
