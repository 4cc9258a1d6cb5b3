// Policy loading: text format -> ari.policy.Policy (syntax errors with
// line:column) -> validation (field path + line) -> plain C++ Policy.
#include "qos/policy.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "idl/ari_policy.pb.h"
#include "qos/policy_validate.h"

namespace ari::qos {
namespace {

namespace pb = ari::policy;
using google::protobuf::TextFormat;

constexpr uint64_t kMiB = 1024ull * 1024ull;

// Collects the parser's messages as "origin:line:column: message" (1-based).
class CollectingErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectingErrors(std::string_view origin) : origin_(origin) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    Add(line, column, message);
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    Add(line, column, "warning: " + message);
  }
  const std::string& text() const { return text_; }

 private:
  void Add(int line, int column, const std::string& message) {
    if (!text_.empty()) text_ += "\n";
    text_ += origin_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
             message;
  }
  std::string origin_;
  std::string text_;
};

// Conversions for values the validator has already checked.
Urgency FromPb(pb::Urgency u) { return UrgencyFromRank(static_cast<int>(u) - 1); }
pb::Urgency ToPb(Urgency u) { return static_cast<pb::Urgency>(Rank(u) + 1); }

Knobs FromPb(const pb::Knobs& k) {
  Knobs out;
  out.core_class = static_cast<CoreClass>(k.core_class() - 1);
  out.threads = k.threads();
  out.precision = static_cast<WeightPrecision>(k.precision() - 1);
  out.prefill_chunk = k.prefill_chunk();
  out.decode_tokens_per_chunk = k.decode_tokens_per_chunk();
  out.pause_ms = k.pause_ms();
  out.isa = static_cast<IsaTier>(k.isa() - 1);
  out.layer_drop = k.layer_drop();
  out.kv_precision = static_cast<KvPrecision>(k.kv_precision() - 1);
  return out;
}

void ToPb(const Knobs& k, pb::Knobs* out) {
  out->set_core_class(static_cast<pb::CoreClass>(static_cast<int>(k.core_class) + 1));
  out->set_threads(k.threads);
  out->set_precision(static_cast<pb::WeightPrecision>(static_cast<int>(k.precision) + 1));
  out->set_prefill_chunk(k.prefill_chunk);
  out->set_decode_tokens_per_chunk(k.decode_tokens_per_chunk);
  out->set_pause_ms(k.pause_ms);
  out->set_isa(static_cast<pb::IsaTier>(static_cast<int>(k.isa) + 1));
  out->set_layer_drop(k.layer_drop);
  out->set_kv_precision(static_cast<pb::KvPrecision>(static_cast<int>(k.kv_precision) + 1));
}

Result<Policy> Convert(const pb::Policy& p, const TextFormat::ParseInfoTree* tree,
                       std::string_view origin) {
  const std::vector<std::string> errors = internal::ValidatePolicyProto(p, tree, origin);
  if (!errors.empty()) {
    std::string msg =
        std::to_string(errors.size()) + " policy error" + (errors.size() == 1 ? "" : "s") + ":";
    for (const auto& e : errors) msg += "\n  " + e;
    return MakeError(ErrorCode::kInvalidPolicy, std::move(msg));
  }
  Policy out;
  out.name = p.name();
  for (const auto& c : p.classes()) {
    ClassConfig& cc = out.classes[Rank(FromPb(c.urgency()))];
    cc.default_deadline_ms = c.default_deadline_ms();
    cc.queue_capacity = c.queue_capacity();
    cc.aging_step_ms = c.aging_step_ms();
    cc.deadline_miss = static_cast<DeadlineMissAction>(c.deadline_miss() - 1);
  }
  out.aging_ceiling = FromPb(p.aging_ceiling());
  out.critical_reserved_slots = p.critical_reserved_slots();
  for (int i = 0; i < p.thermal_bands_size(); ++i) {
    const auto& b = p.thermal_bands(i);
    ThermalBand tb;
    tb.name = b.name();
    if (i > 0) {
      tb.enter_c = b.enter_c();
      tb.exit_c = b.exit_c();
    }
    tb.min_dwell_ms = b.min_dwell_ms();
    out.thermal_bands.push_back(std::move(tb));
  }
  for (const auto& b : p.memory_bands()) {
    MemoryBand mb;
    mb.name = b.name();
    mb.enter_below_bytes = b.enter_below_mb() * kMiB;
    mb.exit_above_bytes = b.exit_above_mb() * kMiB;
    mb.min_dwell_ms = b.min_dwell_ms();
    mb.psi_enter = b.psi_enter();
    mb.psi_exit = b.psi_exit();
    mb.actions.greedy_only = b.actions().greedy_only();
    mb.actions.kv_int8 = b.actions().kv_int8();
    mb.actions.context_cap = b.actions().context_cap();
    mb.actions.output_cap = b.actions().output_cap();
    mb.actions.use_fallback_model = b.actions().use_fallback_model();
    mb.actions.spill_idle_sessions = b.actions().spill_idle_sessions();
    mb.actions.park_to_disk = b.actions().park_to_disk();
    out.memory_bands.push_back(std::move(mb));
  }
  out.knobs.resize(out.thermal_bands.size());
  for (const auto& r : p.knobs()) {
    out.knobs[out.ThermalBandIndex(r.band())][Rank(FromPb(r.urgency()))] = FromPb(r.knobs());
  }
  for (const auto& k : p.conservative().knobs()) {
    out.conservative[Rank(FromPb(k.urgency()))] = FromPb(k.knobs());
  }
  if (p.conservative().has_fault_window_ms()) {
    out.fault_window_ms = p.conservative().fault_window_ms();
  }
  return out;
}

}  // namespace

std::string_view UrgencyName(Urgency u) {
  switch (u) {
    case Urgency::kCritical: return "CRITICAL";
    case Urgency::kHigh: return "HIGH";
    case Urgency::kNormal: return "NORMAL";
    case Urgency::kBackground: return "BACKGROUND";
  }
  return "?";
}

std::string_view CoreClassName(CoreClass c) {
  switch (c) {
    case CoreClass::kPerformance: return "perf";
    case CoreClass::kEfficiency: return "efficiency";
    case CoreClass::kAny: return "any";
  }
  return "?";
}

std::string_view PrecisionName(WeightPrecision p) {
  return p == WeightPrecision::kW8A16 ? "W8A16" : "W4A8";
}

std::string_view IsaTierName(IsaTier t) {
  switch (t) {
    case IsaTier::kBest: return "best";
    case IsaTier::kAvx512: return "avx512";
    case IsaTier::kAvx2: return "avx2";
    case IsaTier::kNeonDotprod: return "neon_dotprod";
    case IsaTier::kNeon: return "neon";
    case IsaTier::kScalar: return "scalar";
  }
  return "?";
}

std::string_view KvPrecisionName(KvPrecision k) {
  return k == KvPrecision::kFp16 ? "fp16" : "int8";
}

std::string_view DeadlineMissActionName(DeadlineMissAction a) {
  return a == DeadlineMissAction::kStop ? "stop" : "finish_degraded";
}

int FormatKnobs(const Knobs& k, char* buf, size_t size) {
  // The name functions return literals, so .data() is NUL-terminated.
  return std::snprintf(
      buf, size, "%s cores x%u, %s, chunk %u/%u, pause %u ms, isa %s, drop %u, KV %s",
      CoreClassName(k.core_class).data(), k.threads, PrecisionName(k.precision).data(),
      k.prefill_chunk, k.decode_tokens_per_chunk, k.pause_ms, IsaTierName(k.isa).data(),
      k.layer_drop, KvPrecisionName(k.kv_precision).data());
}

namespace {

// Throttle rank of a core class, higher = more throttled. kAny lets the threads
// run on every core, performance ones included, so it restricts nothing: rank 0.
// kPerformance keeps them on the performance cores (rank 1); kEfficiency on the
// slower, cooler efficiency cores only (rank 2).
int CoreThrottleRank(CoreClass c) {
  switch (c) {
    case CoreClass::kAny: return 0;
    case CoreClass::kPerformance: return 1;
    case CoreClass::kEfficiency: return 2;
  }
  return 2;
}

bool IsX86Isa(IsaTier t) { return t == IsaTier::kAvx512 || t == IsaTier::kAvx2; }
bool IsArmIsa(IsaTier t) { return t == IsaTier::kNeonDotprod || t == IsaTier::kNeon; }

// The lower ISA cap. IsaTier lists each family from the widest down (best,
// avx512, avx2 | neon_dotprod, neon | scalar), so within one family (or against
// best / scalar) the later value is the lower cap. An x86 cap against an ARM cap
// has no common order and the engine refuses the other family's tier: scalar,
// the only cap at most as high as both on any CPU.
IsaTier LowerIsaCap(IsaTier a, IsaTier b) {
  if ((IsX86Isa(a) && IsArmIsa(b)) || (IsArmIsa(a) && IsX86Isa(b))) return IsaTier::kScalar;
  return static_cast<IsaTier>(std::max(static_cast<int>(a), static_cast<int>(b)));
}

}  // namespace

// "More throttled" per knob, the one definition (docs/policy.md "Monotone
// degradation"); each field independently, so the result may equal neither input:
//   core_class     efficiency > performance > any (CoreThrottleRank)
//   threads        fewer
//   precision      W4A8 > W8A16 (4-bit weights: less memory traffic, less heat)
//   prefill_chunk, decode_tokens_per_chunk   smaller (shorter bursts)
//   pause_ms       longer
//   isa            the lower cap (LowerIsaCap)
//   layer_drop     more layers dropped
//   kv_precision   int8 > fp16
Knobs MoreThrottled(const Knobs& a, const Knobs& b) {
  Knobs k;
  k.core_class = CoreThrottleRank(a.core_class) >= CoreThrottleRank(b.core_class) ? a.core_class
                                                                                  : b.core_class;
  k.threads = std::min(a.threads, b.threads);
  k.precision = a.precision == WeightPrecision::kW4A8 || b.precision == WeightPrecision::kW4A8
                    ? WeightPrecision::kW4A8
                    : WeightPrecision::kW8A16;
  k.prefill_chunk = std::min(a.prefill_chunk, b.prefill_chunk);
  k.decode_tokens_per_chunk = std::min(a.decode_tokens_per_chunk, b.decode_tokens_per_chunk);
  k.pause_ms = std::max(a.pause_ms, b.pause_ms);
  k.isa = LowerIsaCap(a.isa, b.isa);
  k.layer_drop = std::max(a.layer_drop, b.layer_drop);
  k.kv_precision = a.kv_precision == KvPrecision::kInt8 || b.kv_precision == KvPrecision::kInt8
                       ? KvPrecision::kInt8
                       : KvPrecision::kFp16;
  return k;
}

std::string KnobsToString(const Knobs& k) {
  char buf[192];
  FormatKnobs(k, buf, sizeof(buf));
  return buf;
}

int Policy::ThermalBandIndex(std::string_view band_name) const {
  for (size_t i = 0; i < thermal_bands.size(); ++i) {
    if (thermal_bands[i].name == band_name) return static_cast<int>(i);
  }
  return -1;
}

Result<Policy> ParsePolicyText(std::string_view text, std::string_view origin) {
  pb::Policy proto;
  CollectingErrors errors(origin);
  TextFormat::ParseInfoTree tree;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&input, &proto)) {
    return MakeError(ErrorCode::kParse, errors.text().empty()
                                            ? std::string(origin) + ": cannot parse policy"
                                            : errors.text());
  }
  return Convert(proto, &tree, origin);
}

Result<Policy> LoadPolicyFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return MakeError(ErrorCode::kIo,
                     "policy file not found (or not a regular file): " + path.string());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kIo, "cannot open policy file " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return MakeError(ErrorCode::kIo, "cannot read policy file " + path.string());
  return ParsePolicyText(ss.str(), path.string());
}

Result<Policy> PolicyFromProto(const pb::Policy& proto) {
  return Convert(proto, nullptr, "<policy>");
}

void PolicyToProto(const Policy& policy, pb::Policy* proto) {
  proto->Clear();
  proto->set_name(policy.name);
  for (Urgency u : kAllUrgencies) {
    const ClassConfig& c = policy.Class(u);
    auto* pc = proto->add_classes();
    pc->set_urgency(ToPb(u));
    pc->set_default_deadline_ms(c.default_deadline_ms);
    pc->set_queue_capacity(c.queue_capacity);
    pc->set_aging_step_ms(c.aging_step_ms);
    pc->set_deadline_miss(
        static_cast<pb::DeadlineMissAction>(static_cast<int>(c.deadline_miss) + 1));
  }
  proto->set_aging_ceiling(ToPb(policy.aging_ceiling));
  proto->set_critical_reserved_slots(policy.critical_reserved_slots);
  for (size_t i = 0; i < policy.thermal_bands.size(); ++i) {
    const ThermalBand& b = policy.thermal_bands[i];
    auto* pb_band = proto->add_thermal_bands();
    pb_band->set_name(b.name);
    if (i > 0) {
      pb_band->set_enter_c(b.enter_c);
      pb_band->set_exit_c(b.exit_c);
    }
    pb_band->set_min_dwell_ms(static_cast<int32_t>(b.min_dwell_ms));
  }
  for (const MemoryBand& b : policy.memory_bands) {
    auto* m = proto->add_memory_bands();
    m->set_name(b.name);
    m->set_enter_below_mb(static_cast<uint32_t>(b.enter_below_bytes / kMiB));
    m->set_exit_above_mb(static_cast<uint32_t>(b.exit_above_bytes / kMiB));
    m->set_min_dwell_ms(static_cast<int32_t>(b.min_dwell_ms));
    m->set_psi_enter(b.psi_enter);
    m->set_psi_exit(b.psi_exit);
    auto* a = m->mutable_actions();
    a->set_greedy_only(b.actions.greedy_only);
    a->set_kv_int8(b.actions.kv_int8);
    a->set_context_cap(b.actions.context_cap);
    a->set_output_cap(b.actions.output_cap);
    a->set_use_fallback_model(b.actions.use_fallback_model);
    a->set_spill_idle_sessions(b.actions.spill_idle_sessions);
    a->set_park_to_disk(b.actions.park_to_disk);
  }
  for (size_t band = 0; band < policy.knobs.size() && band < policy.thermal_bands.size(); ++band) {
    for (Urgency u : kAllUrgencies) {
      auto* r = proto->add_knobs();
      r->set_urgency(ToPb(u));
      r->set_band(policy.thermal_bands[band].name);
      ToPb(policy.knobs[band][Rank(u)], r->mutable_knobs());
    }
  }
  for (Urgency u : kAllUrgencies) {
    auto* k = proto->mutable_conservative()->add_knobs();
    k->set_urgency(ToPb(u));
    ToPb(policy.conservative[Rank(u)], k->mutable_knobs());
  }
  if (policy.fault_window_ms != kDefaultFaultWindowMs) {
    proto->mutable_conservative()->set_fault_window_ms(policy.fault_window_ms);
  }
}

std::string PolicyToText(const Policy& policy) {
  pb::Policy proto;
  PolicyToProto(policy, &proto);
  std::string out;
  TextFormat::PrintToString(proto, &out);
  return out;
}

}  // namespace ari::qos
