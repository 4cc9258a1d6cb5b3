// The QoS policy as the governor and the request queues use it: plain C++,
// loaded from protobuf text format (idl/ari_policy.proto) and validated.
// docs/policy.md documents every field and the shipped default policy.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "qos/error.h"

namespace ari::policy {
class Policy;  // generated from idl/ari_policy.proto
}

namespace ari::qos {

// Urgency classes, most urgent first; the value is the class rank (0 = CRITICAL).
enum class Urgency : uint8_t { kCritical = 0, kHigh = 1, kNormal = 2, kBackground = 3 };
inline constexpr int kNumUrgencies = 4;
inline constexpr std::array<Urgency, kNumUrgencies> kAllUrgencies = {
    Urgency::kCritical, Urgency::kHigh, Urgency::kNormal, Urgency::kBackground};
inline constexpr int Rank(Urgency u) { return static_cast<int>(u); }
inline constexpr Urgency UrgencyFromRank(int rank) { return static_cast<Urgency>(rank); }

enum class CoreClass : uint8_t { kPerformance, kEfficiency, kAny };
enum class WeightPrecision : uint8_t { kW8A16, kW4A8 };
enum class IsaTier : uint8_t { kBest, kAvx512, kAvx2, kNeonDotprod, kNeon, kScalar };
enum class KvPrecision : uint8_t { kFp16, kInt8 };
enum class DeadlineMissAction : uint8_t { kStop, kFinishDegraded };

std::string_view UrgencyName(Urgency u);            // "CRITICAL", "HIGH", "NORMAL", "BACKGROUND"
std::string_view CoreClassName(CoreClass c);        // "perf", "efficiency", "any"
std::string_view PrecisionName(WeightPrecision p);  // "W8A16", "W4A8"
std::string_view IsaTierName(IsaTier t);            // "best", "avx512", ...
std::string_view KvPrecisionName(KvPrecision k);    // "fp16", "int8"
std::string_view DeadlineMissActionName(DeadlineMissAction a);

// What is applied between two chunks.
struct Knobs {
  CoreClass core_class = CoreClass::kAny;
  uint32_t threads = 1;
  WeightPrecision precision = WeightPrecision::kW8A16;
  uint32_t prefill_chunk = 64;           // prompt tokens per prefill chunk
  uint32_t decode_tokens_per_chunk = 8;  // generated tokens per decode chunk
  uint32_t pause_ms = 0;                 // pacing pause after each chunk
  IsaTier isa = IsaTier::kBest;
  uint32_t layer_drop = 0;  // skip the k least influential blocks
  KvPrecision kv_precision = KvPrecision::kFp16;

  bool operator==(const Knobs&) const = default;
};

struct ClassConfig {
  uint32_t default_deadline_ms = 0;
  uint32_t queue_capacity = 0;
  uint32_t aging_step_ms = 0;  // 0 = never ages
  DeadlineMissAction deadline_miss = DeadlineMissAction::kStop;
};

// Band 0 is the base band: enter_c = exit_c = -infinity.
struct ThermalBand {
  std::string name;
  double enter_c = -std::numeric_limits<double>::infinity();
  double exit_c = -std::numeric_limits<double>::infinity();
  int64_t min_dwell_ms = 0;
};

struct MemoryActions {
  bool greedy_only = false;
  bool kv_int8 = false;
  uint32_t context_cap = 0;  // 0 = no cap
  uint32_t output_cap = 0;   // 0 = no cap
  bool use_fallback_model = false;
  bool spill_idle_sessions = false;  // idle sessions' KV to disk, slot pages released
  bool park_to_disk = false;         // parked turns' KV to disk, park areas released

  bool operator==(const MemoryActions&) const = default;
};

// Memory bands are listed mildest first; actions accumulate down the ladder.
struct MemoryBand {
  std::string name;
  uint64_t enter_below_bytes = 0;  // enter when MemAvailable < this
  uint64_t exit_above_bytes = 0;   // leave when MemAvailable > this
  int64_t min_dwell_ms = 0;
  double psi_enter = 0.0;  // PSI some avg10 percent; 0 = unused
  double psi_exit = 0.0;
  MemoryActions actions;
};

inline constexpr int64_t kDefaultFaultWindowMs = 60000;
// Thermal bands a policy may have (the governor keeps a fixed per-band table).
inline constexpr int kMaxThermalBands = 16;

struct Policy {
  std::string name;
  std::array<ClassConfig, kNumUrgencies> classes{};
  Urgency aging_ceiling = Urgency::kCritical;
  std::vector<ThermalBand> thermal_bands;  // >= 1, coolest first
  std::vector<MemoryBand> memory_bands;    // mildest first, may be empty
  // knobs[band][rank]: the knobs of one class in one thermal band.
  std::vector<std::array<Knobs, kNumUrgencies>> knobs;
  std::array<Knobs, kNumUrgencies> conservative{};  // sensor not OK
  // Slots a non-CRITICAL turn must leave free for CRITICAL (capped at slots - 1).
  uint32_t critical_reserved_slots = 0;
  // A fault never runs less throttled than the hottest band seen in this window
  // before it (ConservativeMode.fault_window_ms; docs/policy.md).
  int64_t fault_window_ms = kDefaultFaultWindowMs;

  const ClassConfig& Class(Urgency u) const { return classes[Rank(u)]; }
  const Knobs& KnobsFor(Urgency u, size_t band) const { return knobs[band][Rank(u)]; }
  // Index of the thermal band with this name, or -1.
  int ThermalBandIndex(std::string_view band_name) const;
};

// Per knob, the more throttled of a and b (pure; docs/policy.md "Monotone
// degradation"; the per-field rules are at the definition in policy.cc): core
// class efficiency > performance > any, fewer threads, W4A8 > W8A16, smaller
// prefill and decode chunks, longer pause, the lower ISA cap (an x86 cap against
// an ARM one: scalar), more layer drop, KV int8 > fp16.
Knobs MoreThrottled(const Knobs& a, const Knobs& b);

// One line per knob set, e.g. "perf x2, W8A16, chunk 64/8, pause 0 ms, isa best,
// drop 0, KV fp16".
std::string KnobsToString(const Knobs& k);
// The same text into a caller's buffer (no allocation); snprintf semantics.
int FormatKnobs(const Knobs& k, char* buf, size_t size);

// Parses and validates a policy in protobuf text format. `origin` names the text
// in error messages (usually the file path). Syntax errors -> kParse with
// "origin:line:column: ..."; semantic errors -> kInvalidPolicy with one line per
// problem "origin:line: field.path: what".
Result<Policy> ParsePolicyText(std::string_view text, std::string_view origin = "<policy>");
Result<Policy> LoadPolicyFile(const std::filesystem::path& path);

// Validates and converts an already parsed message (no line numbers in errors).
Result<Policy> PolicyFromProto(const ari::policy::Policy& proto);

// The inverse: for tools that write policies (e.g. a tuner). Round-trips through
// PolicyFromProto.
void PolicyToProto(const Policy& policy, ari::policy::Policy* proto);
std::string PolicyToText(const Policy& policy);

}  // namespace ari::qos
