// Hardware profiles: parsing, validation with line numbers, conversion; see
// hardware_profile.h.
#include "sim/hardware_profile.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "qos/shipped_config.h"

namespace ari::sim {
namespace {

using google::protobuf::TextFormat;
namespace pb = ari::hw;

class Errors : public google::protobuf::io::ErrorCollector {
 public:
  explicit Errors(std::string_view origin) : origin_(origin) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!text_.empty()) text_ += "\n";
    text_ += origin_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
             message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& text() const { return text_; }

 private:
  std::string origin_, text_;
};

// Collects "origin:line: path: what" lines; the line is the field's, else its parent's.
class Checker {
 public:
  Checker(std::string_view origin, const TextFormat::ParseInfoTree* tree)
      : origin_(origin), tree_(tree) {}

  // `msg` is the message holding `field`; `tree` its location tree (may be null).
  void Check(bool ok, const TextFormat::ParseInfoTree* tree, int parent_line,
             const google::protobuf::Message& msg, std::string_view field, int index,
             const std::string& path, const std::string& what) {
    if (ok) return;
    int line = parent_line;
    if (tree) {
      const auto* f = msg.GetDescriptor()->FindFieldByName(std::string(field));
      const auto loc = tree->GetLocation(f, index);
      if (loc.line >= 0) line = loc.line + 1;
    }
    if (!text_.empty()) text_ += "\n";
    text_ += origin_;
    if (line > 0) {
      text_ += ':';
      text_ += std::to_string(line);
    }
    text_ += ": ";
    text_ += path;
    text_ += ": ";
    text_ += what;
  }
  // Line (1-based) and tree of a nested message field (index -1 for singular).
  std::pair<const TextFormat::ParseInfoTree*, int> Nested(const TextFormat::ParseInfoTree* tree,
                                                          const google::protobuf::Message& msg,
                                                          std::string_view field, int index,
                                                          int parent_line) const {
    if (!tree) return {nullptr, parent_line};
    const auto* f = msg.GetDescriptor()->FindFieldByName(std::string(field));
    const auto loc = tree->GetLocation(f, index);
    return {tree->GetTreeForNested(f, index), loc.line >= 0 ? loc.line + 1 : parent_line};
  }
  const TextFormat::ParseInfoTree* root() const { return tree_; }
  const std::string& text() const { return text_; }

 private:
  std::string origin_;
  const TextFormat::ParseInfoTree* tree_;
  std::string text_;
};

bool Finite(double v) { return std::isfinite(v); }

void CheckCores(Checker& c, const pb::HardwareProfile& p, std::string_view field, int min_count) {
  const auto [tree, line] = c.Nested(c.root(), p, field, -1, 0);
  const pb::CoreClass& k = field == "performance" ? p.performance() : p.efficiency();
  const std::string path(field);
  c.Check(k.count() >= min_count && k.count() <= 64, tree, line, k, "count", -1, path + ".count",
          min_count ? "must be 1..64 (zero cores)" : "must be 0..64");
  c.Check(k.count() == 0 || (Finite(k.nominal_mhz()) && k.nominal_mhz() > 0), tree, line, k,
          "nominal_mhz", -1, path + ".nominal_mhz", "must be > 0");
}

void CheckCost(Checker& c, const pb::HardwareProfile& p) {
  std::set<std::pair<std::string, std::string>> seen;
  for (int i = 0; i < p.cost_size(); ++i) {
    const pb::ModelCost& m = p.cost(i);
    const auto [tree, line] = c.Nested(c.root(), p, "cost", i, 0);
    const std::string path = "cost[" + std::to_string(i) + "]";
    c.Check(!m.model().empty(), tree, line, m, "model", -1, path + ".model", "must be set");
    c.Check(m.precision() == "W4A8" || m.precision() == "W8A16", tree, line, m, "precision", -1,
            path + ".precision", "must be W4A8 or W8A16");
    c.Check(Finite(m.decode_tps()) && m.decode_tps() > 0, tree, line, m, "decode_tps", -1,
            path + ".decode_tps", "must be > 0");
    c.Check(Finite(m.prefill_tps()) && m.prefill_tps() > 0, tree, line, m, "prefill_tps", -1,
            path + ".prefill_tps", "must be > 0");
    c.Check(Finite(m.chunk_overhead_ms()) && m.chunk_overhead_ms() >= 0, tree, line, m,
            "chunk_overhead_ms", -1, path + ".chunk_overhead_ms", "must be >= 0");
    c.Check(Finite(m.decode_overhead_ms()) && m.decode_overhead_ms() >= 0, tree, line, m,
            "decode_overhead_ms", -1, path + ".decode_overhead_ms", "must be >= 0");
    c.Check(m.layers() >= 1, tree, line, m, "layers", -1, path + ".layers", "must be >= 1");
    c.Check(
        Finite(m.mask_us_per_token()) && m.mask_us_per_token() >= 0 && m.mask_us_per_token() < 1e6,
        tree, line, m, "mask_us_per_token", -1, path + ".mask_us_per_token", "must be in [0, 1e6)");
    c.Check(m.threads() >= 0 && m.threads() <= 64, tree, line, m, "threads", -1, path + ".threads",
            "must be 0..64");
    c.Check(seen.insert({m.model(), m.precision()}).second, tree, line, m, "model", -1,
            path + ".model", "duplicate (model, precision)");
  }
  for (const auto& [model, precision] : seen) {
    const std::string other = precision == "W4A8" ? "W8A16" : "W4A8";
    std::string what = "model ";
    what += model;
    what += " has ";
    what += precision;
    what += " but no ";
    what += other;
    c.Check(seen.count({model, other}) > 0, nullptr, 0, p, "cost", -1, "cost", what);
  }
  c.Check(p.builtin_cost() || p.cost_size() > 0, nullptr, 0, p, "cost", -1, "cost",
          "give cost entries or builtin_cost: true");
  c.Check(p.default_model().empty() || p.builtin_cost() ||
              std::any_of(p.cost().begin(), p.cost().end(),
                          [&](const pb::ModelCost& m) { return m.model() == p.default_model(); }),
          c.root(), 0, p, "default_model", -1, "default_model", "no cost entry for this model");
}

void CheckThermal(Checker& c, const pb::HardwareProfile& p) {
  const auto [tree, line] = c.Nested(c.root(), p, "thermal", -1, 0);
  const pb::Thermal& t = p.thermal();
  c.Check(p.has_thermal(), c.root(), 0, p, "thermal", -1, "thermal", "must be given");
  c.Check(t.nodes() == 1 || t.nodes() == 2, tree, line, t, "nodes", -1, "thermal.nodes",
          "must be 1 or 2");
  const auto positive = [&](double v, const char* f) {
    c.Check(Finite(v) && v > 0, tree, line, t, f, -1, std::string("thermal.") + f,
            "must be > 0 (negative or zero capacity/resistance)");
  };
  positive(t.r_die_pkg_k_per_w(), "r_die_pkg_k_per_w");
  positive(t.r_pkg_amb_k_per_w(), "r_pkg_amb_k_per_w");
  positive(t.c_die_j_per_k(), "c_die_j_per_k");
  positive(t.c_pkg_j_per_k(), "c_pkg_j_per_k");
  for (const auto& [v, f] : {std::pair{t.idle_power_w(), "idle_power_w"},
                             std::pair{t.w8a16_power_per_core_w(), "w8a16_power_per_core_w"},
                             std::pair{t.w4a8_power_per_core_w(), "w4a8_power_per_core_w"}}) {
    c.Check(Finite(v) && v >= 0, tree, line, t, f, -1, std::string("thermal.") + f, "must be >= 0");
  }
  const double s = t.efficiency_core_power_scale();
  c.Check(Finite(s) && s > 0 && s <= 1, tree, line, t, "efficiency_core_power_scale", -1,
          "thermal.efficiency_core_power_scale", "must be in (0, 1]");
}

void CheckTrip(Checker& c, const pb::Protection& pr, const TextFormat::ParseInfoTree* ptree,
               int pline, std::string_view field) {
  const auto [tree, line] = c.Nested(ptree, pr, field, -1, pline);
  const pb::Trip& t = field == "passive" ? pr.passive() : pr.critical();
  const std::string path = "protection." + std::string(field);
  c.Check(Finite(t.celsius()) && t.celsius() > kMaxAmbientCelsius && t.celsius() <= 150, tree, line,
          t, "celsius", -1, path + ".celsius",
          "must be in (" + std::to_string(static_cast<int>(kMaxAmbientCelsius)) +
              ", 150]: a trip point at or below the ambient");
  c.Check(Finite(t.hysteresis_c()) && t.hysteresis_c() >= 0 && t.hysteresis_c() < 50, tree, line, t,
          "hysteresis_c", -1, path + ".hysteresis_c", "must be in [0, 50)");
  c.Check(Finite(t.clock_fraction()) && t.clock_fraction() > 0 && t.clock_fraction() <= 1, tree,
          line, t, "clock_fraction", -1, path + ".clock_fraction", "must be in (0, 1]");
}

void CheckProtection(Checker& c, const pb::HardwareProfile& p) {
  if (!p.has_protection()) return;
  const auto [tree, line] = c.Nested(c.root(), p, "protection", -1, 0);
  const pb::Protection& pr = p.protection();
  CheckTrip(c, pr, tree, line, "passive");
  CheckTrip(c, pr, tree, line, "critical");
  c.Check(pr.critical().celsius() > pr.passive().celsius(), tree, line, pr, "critical", -1,
          "protection.critical.celsius", "must be above protection.passive.celsius");
  c.Check(pr.critical().clock_fraction() <= pr.passive().clock_fraction(), tree, line, pr,
          "critical", -1, "protection.critical.clock_fraction",
          "must be <= protection.passive.clock_fraction");
  c.Check(Finite(pr.power_exponent()) && pr.power_exponent() >= 0 && pr.power_exponent() <= 4, tree,
          line, pr, "power_exponent", -1, "protection.power_exponent", "must be in [0, 4]");
}

std::string Validate(const pb::HardwareProfile& p, std::string_view origin,
                     const TextFormat::ParseInfoTree* tree) {
  Checker c(origin, tree);
  c.Check(!p.name().empty(), tree, 0, p, "name", -1, "name", "must be set");
  CheckCores(c, p, "performance", 1);
  CheckCores(c, p, "efficiency", 0);
  c.Check(Finite(p.efficiency_speed()) && p.efficiency_speed() > 0 && p.efficiency_speed() <= 1,
          tree, 0, p, "efficiency_speed", -1, "efficiency_speed", "must be in (0, 1]");
  c.Check(Finite(p.thread_scaling()) && p.thread_scaling() >= 0 && p.thread_scaling() <= 1, tree, 0,
          p, "thread_scaling", -1, "thread_scaling", "must be in [0, 1]");
  c.Check(Finite(p.memory_mb()) && p.memory_mb() > 0, tree, 0, p, "memory_mb", -1, "memory_mb",
          "must be > 0 (negative or zero capacity)");
  c.Check(p.kv_slots() >= 0 && p.kv_slots() <= 64, tree, 0, p, "kv_slots", -1, "kv_slots",
          "must be 0..64");
  CheckCost(c, p);
  CheckThermal(c, p);
  CheckProtection(c, p);
  return c.text();
}

}  // namespace

std::vector<std::string> HardwareProfile::Models() const {
  std::vector<std::string> out;
  for (const auto& m : proto.cost()) {
    if (std::find(out.begin(), out.end(), m.model()) == out.end()) out.push_back(m.model());
  }
  return out;
}

Result<HardwareProfile> ParseHardwareProfileText(std::string_view text, std::string_view origin) {
  HardwareProfile hp;
  hp.origin = std::string(origin);
  Errors errors(origin);
  TextFormat::ParseInfoTree tree;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&input, &hp.proto)) return MakeError(ErrorCode::kParse, errors.text());
  if (std::string problems = Validate(hp.proto, origin, &tree); !problems.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, problems);
  }
  return hp;
}

Result<HardwareProfile> LoadHardwareProfile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseHardwareProfileText(text, path.string());
}

Result<HardwareProfile> FindHardwareProfile(std::string_view name_or_file) {
  const std::string s(name_or_file);
  if (s.find('/') != std::string::npos || s.ends_with(".textproto")) return LoadHardwareProfile(s);
  auto found = qos::FindShippedConfig("hardware/" + s + ".textproto");
  if (!found) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown hardware profile '" + s +
                         "' (config/hardware/*.textproto): " + found.error().message);
  }
  return LoadHardwareProfile(*found);
}

Result<CostModel> ProfileCostModel(const HardwareProfile& profile, std::string_view model) {
  const pb::HardwareProfile& p = profile.proto;
  if (p.builtin_cost()) return BuiltinCostModel();
  const std::string want = model.empty() ? p.default_model() : std::string(model);
  auto builtin = BuiltinCostModel();  // its measured layer-drop table is reused
  if (!builtin) return std::unexpected(builtin.error());
  CostModel m;
  m.best_isa = p.isa().empty() ? "neon_dotprod" : p.isa();
  m.thread_scaling = p.thread_scaling();
  m.efficiency_core_speed = p.efficiency_speed();
  m.isa_speed = DefaultIsaSpeed();
  m.nominal_khz_performance = p.performance().nominal_mhz() * 1000.0;
  m.nominal_khz_efficiency = p.efficiency().nominal_mhz() * 1000.0;
  m.drop_cost_prefill = builtin->drop_cost_prefill;
  m.drop_cost_decode = builtin->drop_cost_decode;
  m.drop_cost_layers = builtin->drop_cost_layers;
  m.drop_cost_source = builtin->drop_cost_source;
  for (const pb::ModelCost& c : p.cost()) {
    if (c.model() != want) continue;
    CostEntry e;
    e.precision = c.precision() == "W4A8" ? runtime::Precision::kW4A8 : runtime::Precision::kW8A16;
    e.threads = c.threads() > 0 ? c.threads() : p.performance().count();
    e.isa = m.best_isa;
    e.prefill_tps = c.prefill_tps();
    e.decode_tps = c.decode_tps();
    e.chunk_overhead_ms = c.chunk_overhead_ms();
    e.decode_overhead_ms = c.decode_overhead_ms();
    m.layers = c.layers();
    m.mask_us_per_token = c.mask_us_per_token();
    m.entries.push_back(e);
  }
  if (m.entries.empty()) {
    std::string have;
    for (const auto& s : profile.Models()) have += (have.empty() ? "" : ", ") + s;
    return MakeError(ErrorCode::kInvalidArgument,
                     "hardware " + p.name() + ": no model '" + want + "' (has: " + have + ")");
  }
  m.source = "hardware profile " + p.name() + " (" + profile.origin + "), model " + want +
             "; docs/hardware_profiles.md";
  if (auto v = m.Validate(); !v) return std::unexpected(v.error());
  return m;
}

thermal::RcParams ProfileRcParams(const HardwareProfile& profile) {
  const pb::Thermal& t = profile.proto.thermal();
  thermal::RcParams rc;
  rc.nodes = t.nodes();
  rc.r_die_pkg_k_per_w = t.r_die_pkg_k_per_w();
  rc.r_pkg_amb_k_per_w = t.r_pkg_amb_k_per_w();
  rc.c_die_j_per_k = t.c_die_j_per_k();
  rc.c_pkg_j_per_k = t.c_pkg_j_per_k();
  rc.idle_power_w = t.idle_power_w();
  rc.w8a16_power_per_core_w = t.w8a16_power_per_core_w();
  rc.w4a8_power_per_core_w = t.w4a8_power_per_core_w();
  rc.efficiency_core_power_scale = t.efficiency_core_power_scale();
  return rc;
}

void ApplyHardwareProfile(const HardwareProfile& profile, ReplayOptions& o) {
  const pb::HardwareProfile& p = profile.proto;
  o.hardware_name = p.name();
  o.performance_cpus = p.performance().count();
  o.efficiency_cpus = p.efficiency().count();
  if (p.kv_slots() > 0) o.slots = p.kv_slots();
  o.rc = ProfileRcParams(profile);
  o.scenario_power_on_top = true;
  o.base_power_w = -1;
  o.protection = SocProtection{};
  if (p.has_protection()) {
    const pb::Protection& pr = p.protection();
    o.protection.enabled = true;
    o.protection.passive_c = pr.passive().celsius();
    o.protection.passive_hysteresis_c = pr.passive().hysteresis_c();
    o.protection.passive_fraction = pr.passive().clock_fraction();
    o.protection.critical_c = pr.critical().celsius();
    o.protection.critical_hysteresis_c = pr.critical().hysteresis_c();
    o.protection.critical_fraction = pr.critical().clock_fraction();
    o.protection.power_exponent = pr.power_exponent();
  }
}

}  // namespace ari::sim
