// Semantic validation of a policy: every problem is reported with its field path
// and, when the policy came from text, the line it is on.
#include "qos/policy_validate.h"

#include <array>
#include <cstdio>
#include <map>
#include <string>

#include "qos/policy.h"

namespace ari::qos::internal {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using Tree = google::protobuf::TextFormat::ParseInfoTree;
namespace pb = ari::policy;

template <class... Args>
std::string Fmt(const char* fmt, Args... args) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), fmt, static_cast<double>(args)...);
  return buf;
}

std::string FirstAt(int line) {
  return line > 0 ? " (first at line " + std::to_string(line) + ")" : "";
}

// A message under validation: where it is in the policy and in the text.
struct Node {
  const Message* msg = nullptr;
  const Tree* tree = nullptr;  // null: no locations known
  std::string path;            // "" for the root, e.g. "thermal_bands[2]"
  int line = 0;                // 1-based line where the message starts, 0 = unknown
};

class Validator {
 public:
  explicit Validator(std::string_view origin) : origin_(origin) {}

  static std::string PathOf(const Node& n, std::string_view field, int index) {
    std::string p = n.path.empty() ? std::string(field) : n.path + "." + std::string(field);
    if (index >= 0) {
      p += '[';
      p += std::to_string(index);
      p += ']';
    }
    return p;
  }

  const FieldDescriptor* Field(const Node& n, std::string_view field) const {
    return n.msg->GetDescriptor()->FindFieldByName(std::string(field));
  }

  // Line of a field's value (1-based), or the enclosing message's line when the
  // field does not appear in the text (e.g. missing).
  int LineOf(const Node& n, std::string_view field, int index = -1) const {
    const FieldDescriptor* fd = Field(n, field);
    // A repeated field as a whole has no location of its own: use the parent's.
    if (n.tree != nullptr && fd != nullptr && (index >= 0) == fd->is_repeated()) {
      const int line = n.tree->GetLocation(fd, index).line;
      if (line >= 0) return line + 1;
    }
    return n.line;
  }

  Node Child(const Node& n, std::string_view field, int index) const {
    const FieldDescriptor* fd = Field(n, field);
    const auto* refl = n.msg->GetReflection();
    Node c;
    c.msg =
        index >= 0 ? &refl->GetRepeatedMessage(*n.msg, fd, index) : &refl->GetMessage(*n.msg, fd);
    c.path = PathOf(n, field, index);
    c.line = LineOf(n, field, index);
    if (n.tree != nullptr && (index >= 0 || refl->HasField(*n.msg, fd))) {
      c.tree = n.tree->GetTreeForNested(fd, index);
    }
    return c;
  }

  void FailAt(int line, const std::string& path, const std::string& what) {
    std::string e(origin_);
    if (line > 0) {
      e += ':';
      e += std::to_string(line);
    }
    e.append(": ").append(path).append(": ").append(what);
    errors_.push_back(std::move(e));
  }
  void Fail(const Node& n, std::string_view field, const std::string& what, int index = -1) {
    FailAt(LineOf(n, field, index), PathOf(n, field, index), what);
  }

  // An enum field must be set (non-zero) and a known value. Returns true if usable.
  bool CheckEnum(const Node& n, std::string_view field) {
    const FieldDescriptor* fd = Field(n, field);
    const int v = n.msg->GetReflection()->GetEnumValue(*n.msg, fd);
    const auto* type = fd->enum_type();
    std::string allowed;
    for (int i = 1; i < type->value_count(); ++i) {
      allowed += (i > 1 ? ", " : "") + type->value(i)->name();
    }
    if (v == 0) {
      Fail(n, field, "missing (one of " + allowed + ")");
      return false;
    }
    if (type->FindValueByNumber(v) == nullptr) {
      Fail(n, field, "unknown value " + std::to_string(v) + " (one of " + allowed + ")");
      return false;
    }
    return true;
  }

  void CheckRange(const Node& n, std::string_view field, uint64_t v, uint64_t lo, uint64_t hi) {
    if (v < lo || v > hi) {
      Fail(n, field,
           std::to_string(v) + (v < lo ? " must be >= " + std::to_string(lo)
                                       : " must be <= " + std::to_string(hi)));
    }
  }

  // `k` is the parent's knobs field (the message Child(parent, "knobs") walks into).
  void CheckKnobs(const Node& parent, const pb::Knobs& k) {
    const auto* refl = parent.msg->GetReflection();
    if (!refl->HasField(*parent.msg, Field(parent, "knobs"))) {
      Fail(parent, "knobs", "missing");
      return;
    }
    const Node n = Child(parent, "knobs", -1);
    CheckEnum(n, "core_class");
    CheckRange(n, "threads", k.threads(), 1, kMaxThreads);
    CheckEnum(n, "precision");
    CheckRange(n, "prefill_chunk", k.prefill_chunk(), 1, kMaxPrefillChunk);
    CheckRange(n, "decode_tokens_per_chunk", k.decode_tokens_per_chunk(), 1, kMaxDecodeTokens);
    CheckRange(n, "pause_ms", k.pause_ms(), 0, kMaxPauseMs);
    CheckEnum(n, "isa");
    CheckRange(n, "layer_drop", k.layer_drop(), 0, kMaxLayerDrop);
    CheckEnum(n, "kv_precision");
  }

  void CheckDwell(const Node& n, int64_t dwell) {
    if (dwell < 0) Fail(n, "min_dwell_ms", std::to_string(dwell) + " must be >= 0");
    if (dwell > kMaxDwellMs) {
      Fail(n, "min_dwell_ms", std::to_string(dwell) + " must be <= " + std::to_string(kMaxDwellMs));
    }
  }

  void Classes(const Node& root, const pb::Policy& p) {
    std::array<int, 5> seen_line{};  // by proto enum value 1..4
    std::array<bool, 5> seen{};
    for (int i = 0; i < p.classes_size(); ++i) {
      const Node n = Child(root, "classes", i);
      const auto& c = p.classes(i);
      if (CheckEnum(n, "urgency")) {
        const int u = c.urgency();
        if (seen[u]) {
          Fail(n, "urgency",
               "duplicate class " + pb::Urgency_Name(c.urgency()) + FirstAt(seen_line[u]));
        }
        seen[u] = true;
        seen_line[u] = n.line;
        if (c.urgency() == pb::CRITICAL && c.aging_step_ms() != 0) {
          Fail(n, "aging_step_ms", "CRITICAL cannot age (must be 0)");
        }
      }
      if (c.default_deadline_ms() == 0) Fail(n, "default_deadline_ms", "must be > 0");
      CheckRange(n, "queue_capacity", c.queue_capacity(), 1, kMaxQueueCapacity);
      CheckEnum(n, "deadline_miss");
    }
    for (int u = pb::CRITICAL; u <= pb::BACKGROUND; ++u) {
      if (!seen[u]) {
        Fail(root, "classes", "missing class " + pb::Urgency_Name(static_cast<pb::Urgency>(u)));
      }
    }
    CheckEnum(root, "aging_ceiling");
    CheckRange(root, "critical_reserved_slots", p.critical_reserved_slots(), 0, kMaxReservedSlots);
  }

  void ThermalBands(const Node& root, const pb::Policy& p) {
    if (p.thermal_bands_size() == 0) {
      Fail(root, "thermal_bands", "at least one band is required");
      return;
    }
    if (p.thermal_bands_size() > kMaxThermalBands) {
      Fail(root, "thermal_bands",
           std::to_string(p.thermal_bands_size()) + " bands, at most " +
               std::to_string(kMaxThermalBands));
    }
    for (int i = 0; i < p.thermal_bands_size(); ++i) {
      const Node n = Child(root, "thermal_bands", i);
      const auto& b = p.thermal_bands(i);
      CheckName(n, i, b.name(), &thermal_names_);
      CheckDwell(n, b.min_dwell_ms());
      if (i == 0) {
        if (b.has_enter_c()) Fail(n, "enter_c", "the first (base) band has no thresholds");
        if (b.has_exit_c()) Fail(n, "exit_c", "the first (base) band has no thresholds");
        continue;
      }
      if (!b.has_enter_c()) Fail(n, "enter_c", "missing");
      if (!b.has_exit_c()) Fail(n, "exit_c", "missing");
      if (!b.has_enter_c() || !b.has_exit_c()) continue;
      bool in_range = true;
      for (const auto& [field, v] : {std::pair{"enter_c", b.enter_c()}, {"exit_c", b.exit_c()}}) {
        if (!(v >= kMinCelsius && v <= kMaxCelsius)) {  // also catches NaN
          Fail(n, field, Fmt("%.1f C outside [%.0f, %.0f] C", v, kMinCelsius, kMaxCelsius));
          in_range = false;
        }
      }
      if (!in_range) continue;
      if (b.exit_c() >= b.enter_c()) {
        Fail(n, "exit_c",
             Fmt("exit_c %.1f must be below enter_c %.1f (hysteresis)", b.exit_c(), b.enter_c()));
      }
      const auto& prev = p.thermal_bands(i - 1);
      if (i >= 2 && prev.has_enter_c()) {
        if (b.enter_c() <= prev.enter_c()) {
          Fail(n, "enter_c",
               Fmt("enter_c %.1f out of order: must be above the previous band's enter_c %.1f "
                   "(bands are listed coolest first)",
                   b.enter_c(), prev.enter_c()));
        } else if (b.exit_c() <= prev.enter_c()) {
          Fail(n, "exit_c",
               Fmt("overlaps the previous band: exit_c %.1f must be above its enter_c %.1f",
                   b.exit_c(), prev.enter_c()) +
                   " (\"" + prev.name() + "\")");
        }
      }
    }
  }

  void MemoryBands(const Node& root, const pb::Policy& p) {
    for (int i = 0; i < p.memory_bands_size(); ++i) {
      const Node n = Child(root, "memory_bands", i);
      const auto& b = p.memory_bands(i);
      CheckName(n, i, b.name(), &memory_names_);
      CheckDwell(n, b.min_dwell_ms());
      if (b.enter_below_mb() == 0) Fail(n, "enter_below_mb", "must be > 0");
      if (b.exit_above_mb() <= b.enter_below_mb()) {
        Fail(n, "exit_above_mb",
             Fmt("exit_above_mb %.0f must be above enter_below_mb %.0f (hysteresis)",
                 b.exit_above_mb(), b.enter_below_mb()));
      }
      if (i > 0) {
        const auto& prev = p.memory_bands(i - 1);
        if (b.enter_below_mb() >= prev.enter_below_mb()) {
          Fail(n, "enter_below_mb",
               Fmt("enter_below_mb %.0f out of order: must be below the previous band's "
                   "enter_below_mb %.0f (bands are listed mildest first)",
                   b.enter_below_mb(), prev.enter_below_mb()));
        } else if (b.exit_above_mb() >= prev.enter_below_mb()) {
          Fail(n, "exit_above_mb",
               Fmt("overlaps the previous band: exit_above_mb %.0f must be below its "
                   "enter_below_mb %.0f",
                   b.exit_above_mb(), prev.enter_below_mb()) +
                   " (\"" + prev.name() + "\")");
        }
      }
      if (!(b.psi_enter() >= 0.0 && b.psi_enter() <= 100.0)) {
        Fail(n, "psi_enter", Fmt("%.1f outside [0, 100] percent", b.psi_enter()));
      } else if (b.psi_enter() > 0.0 && !(b.psi_exit() >= 0.0 && b.psi_exit() < b.psi_enter())) {
        Fail(n, "psi_exit",
             Fmt("psi_exit %.1f must be in [0, psi_enter %.1f) (hysteresis)", b.psi_exit(),
                 b.psi_enter()));
      } else if (b.psi_enter() == 0.0 && b.psi_exit() != 0.0) {
        Fail(n, "psi_exit", "set without psi_enter");
      }
    }
  }

  void KnobRules(const Node& root, const pb::Policy& p) {
    const int nb = p.thermal_bands_size();
    std::vector<std::array<int, 5>> cell_line(nb, std::array<int, 5>{});
    for (int i = 0; i < p.knobs_size(); ++i) {
      const Node n = Child(root, "knobs", i);
      const auto& r = p.knobs(i);
      const bool urgency_ok = CheckEnum(n, "urgency");
      int band = -1;
      if (r.band().empty()) {
        Fail(n, "band", "missing");
      } else if (auto it = thermal_names_.find(r.band()); it == thermal_names_.end()) {
        std::string known;
        for (const auto& b : p.thermal_bands()) known += (known.empty() ? "" : ", ") + b.name();
        Fail(n, "band", "unknown band \"" + r.band() + "\" (thermal_bands: " + known + ")");
      } else {
        band = it->second.index;
      }
      CheckKnobs(n, r.knobs());
      if (!urgency_ok || band < 0) continue;
      int& seen = cell_line[band][r.urgency()];
      if (seen != 0) {
        Fail(n, "urgency",
             "duplicate rule for " + pb::Urgency_Name(r.urgency()) + " in band \"" + r.band() +
                 "\"" + FirstAt(seen));
      } else {
        seen = n.line > 0 ? n.line : -1;
      }
    }
    for (int b = 0; b < nb; ++b) {
      const auto named = thermal_names_.find(p.thermal_bands(b).name());
      if (named == thermal_names_.end() || named->second.index != b) continue;  // reported
      const Node band_node = Child(root, "thermal_bands", b);
      for (int u = pb::CRITICAL; u <= pb::BACKGROUND; ++u) {
        if (cell_line[b][u] != 0) continue;
        FailAt(band_node.line, "knobs",
               "missing rule for urgency " + pb::Urgency_Name(static_cast<pb::Urgency>(u)) +
                   " in band \"" + p.thermal_bands(b).name() + "\"");
      }
    }
  }

  void Conservative(const Node& root, const pb::Policy& p) {
    if (!p.has_conservative()) {
      Fail(root, "conservative", "missing (knobs per class for a faulty temperature sensor)");
      return;
    }
    const Node c = Child(root, "conservative", -1);
    if (p.conservative().has_fault_window_ms()) {
      const int64_t w = p.conservative().fault_window_ms();
      if (w < 0) {
        Fail(c, "fault_window_ms",
             std::to_string(w) + " is negative (0 = only the band in force at the fault)");
      } else if (w > kMaxFaultWindowMs) {
        Fail(c, "fault_window_ms",
             std::to_string(w) + " is above the maximum " + std::to_string(kMaxFaultWindowMs));
      }
    }
    std::array<int, 5> seen{};
    for (int i = 0; i < p.conservative().knobs_size(); ++i) {
      const Node n = Child(c, "knobs", i);
      const auto& k = p.conservative().knobs(i);
      CheckKnobs(n, k.knobs());
      if (!CheckEnum(n, "urgency")) continue;
      if (seen[k.urgency()] != 0) {
        Fail(n, "urgency",
             "duplicate class " + pb::Urgency_Name(k.urgency()) + FirstAt(seen[k.urgency()]));
      }
      seen[k.urgency()] = n.line > 0 ? n.line : -1;
    }
    for (int u = pb::CRITICAL; u <= pb::BACKGROUND; ++u) {
      if (seen[u] == 0) {
        Fail(c, "knobs",
             "missing knobs for class " + pb::Urgency_Name(static_cast<pb::Urgency>(u)));
      }
    }
  }

  std::vector<std::string> TakeErrors() { return std::move(errors_); }

 private:
  struct NameInfo {
    int index;
    int line;
  };
  void CheckName(const Node& n, int index, const std::string& name,
                 std::map<std::string, NameInfo>* names) {
    if (name.empty()) {
      Fail(n, "name", "must not be empty");
      return;
    }
    auto [it, inserted] = names->emplace(name, NameInfo{index, n.line});
    if (!inserted) {
      Fail(n, "name", "duplicate band name \"" + name + "\"" + FirstAt(it->second.line));
    }
  }

  std::string origin_;
  std::vector<std::string> errors_;
  std::map<std::string, NameInfo> thermal_names_;
  std::map<std::string, NameInfo> memory_names_;
};

}  // namespace

std::vector<std::string> ValidatePolicyProto(const pb::Policy& policy, const Tree* tree,
                                             std::string_view origin) {
  Validator v(origin);
  Node root;
  root.msg = &policy;
  root.tree = tree;
  root.line = tree != nullptr ? 1 : 0;
  v.Classes(root, policy);
  v.ThermalBands(root, policy);
  v.MemoryBands(root, policy);
  v.KnobRules(root, policy);
  v.Conservative(root, policy);
  return v.TakeErrors();
}

}  // namespace ari::qos::internal
