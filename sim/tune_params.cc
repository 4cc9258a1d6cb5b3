// Tuner search space: parsing and applying parameters to a policy; see tune.h.
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "idl/sim_tune.pb.h"
#include "sim/tune.h"

namespace ari::sim {
namespace {

std::vector<std::string> Split(std::string_view s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (true) {
    const size_t e = s.find('.', b);
    out.emplace_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (e == std::string_view::npos) break;
    b = e + 1;
  }
  return out;
}

std::string Fmt(double v) {
  char b[40];
  std::snprintf(b, sizeof(b), "%.10g", v);
  return b;
}

Result<double> Number(std::string_view name, std::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(d)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(name) + ": \"" + s + "\" is not a number");
  }
  return d;
}

Result<uint32_t> Unsigned(std::string_view name, std::string_view v) {
  auto d = Number(name, v);
  if (!d) return std::unexpected(d.error());
  if (*d < 0 || *d > 4e9 || std::floor(*d) != *d) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(name) + ": \"" + std::string(v) +
                                                      "\" is not a non-negative integer");
  }
  return static_cast<uint32_t>(*d);
}

Result<std::vector<int>> Classes(const std::string& c) {
  if (c == "*") return std::vector<int>{0, 1, 2, 3};
  for (qos::Urgency u : qos::kAllUrgencies) {
    if (qos::UrgencyName(u) == c) return std::vector<int>{qos::Rank(u)};
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown class \"" + c + "\" (CRITICAL, HIGH, NORMAL, BACKGROUND, *)");
}

Result<std::vector<size_t>> Bands(const qos::Policy& p, const std::string& b) {
  std::vector<size_t> out;
  if (b == "*") {
    for (size_t i = 0; i < p.thermal_bands.size(); ++i) out.push_back(i);
    return out;
  }
  const int i = p.ThermalBandIndex(b);
  if (i < 0) return MakeError(ErrorCode::kInvalidArgument, "unknown thermal band \"" + b + "\"");
  out.push_back(static_cast<size_t>(i));
  return out;
}

Result<void> SetKnob(qos::Knobs& k, const std::string& field, std::string_view v,
                     std::string_view name) {
  const std::string s(v);
  if (field == "precision") {
    if (s == "W8A16")
      k.precision = qos::WeightPrecision::kW8A16;
    else if (s == "W4A8")
      k.precision = qos::WeightPrecision::kW4A8;
    else
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string(name) + ": precision W8A16 or W4A8");
    return {};
  }
  if (field == "core_class") {
    if (s == "PERFORMANCE")
      k.core_class = qos::CoreClass::kPerformance;
    else if (s == "EFFICIENCY")
      k.core_class = qos::CoreClass::kEfficiency;
    else if (s == "ANY_CORE" || s == "ANY")
      k.core_class = qos::CoreClass::kAny;
    else
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string(name) + ": PERFORMANCE, EFFICIENCY or ANY_CORE");
    return {};
  }
  if (field == "isa") {
    static constexpr std::pair<std::string_view, qos::IsaTier> kIsa[] = {
        {"ISA_BEST", qos::IsaTier::kBest}, {"ISA_AVX512", qos::IsaTier::kAvx512},
        {"ISA_AVX2", qos::IsaTier::kAvx2}, {"ISA_NEON_DOTPROD", qos::IsaTier::kNeonDotprod},
        {"ISA_NEON", qos::IsaTier::kNeon}, {"ISA_SCALAR", qos::IsaTier::kScalar}};
    for (const auto& [n, t] : kIsa) {
      if (n == s) {
        k.isa = t;
        return {};
      }
    }
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(name) + ": isa ISA_BEST, ISA_AVX2, ...");
  }
  auto u = Unsigned(name, v);
  if (!u) return std::unexpected(u.error());
  if (field == "threads")
    k.threads = *u;
  else if (field == "prefill_chunk")
    k.prefill_chunk = *u;
  else if (field == "decode_tokens_per_chunk")
    k.decode_tokens_per_chunk = *u;
  else if (field == "pause_ms")
    k.pause_ms = *u;
  else if (field == "layer_drop")
    k.layer_drop = *u;
  else
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(name) + ": unknown knob \"" + field + "\"");
  return {};
}

std::string KnobValue(const qos::Knobs& k, const std::string& field) {
  if (field == "precision") return std::string(qos::PrecisionName(k.precision));
  if (field == "core_class") {
    return k.core_class == qos::CoreClass::kPerformance  ? "PERFORMANCE"
           : k.core_class == qos::CoreClass::kEfficiency ? "EFFICIENCY"
                                                         : "ANY_CORE";
  }
  if (field == "isa")
    return "ISA_" + [&] {
      std::string n(qos::IsaTierName(k.isa));
      for (char& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return n;
    }();
  if (field == "threads") return std::to_string(k.threads);
  if (field == "prefill_chunk") return std::to_string(k.prefill_chunk);
  if (field == "decode_tokens_per_chunk") return std::to_string(k.decode_tokens_per_chunk);
  if (field == "pause_ms") return std::to_string(k.pause_ms);
  if (field == "layer_drop") return std::to_string(k.layer_drop);
  return "?";
}

// Applies (value given) or reads (value null) one parameter.
Result<std::string> Access(qos::Policy& p, std::string_view name, const std::string_view* value) {
  const std::vector<std::string> parts = Split(name);
  const std::string n(name);
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, n + ": " + why);
  };
  if (parts[0] == "thermal_bands" && parts.size() == 3) {
    auto bands = Bands(p, parts[1]);
    if (!bands) return bad(bands.error().message);
    qos::ThermalBand& b = p.thermal_bands[bands->front()];
    if (bands->front() == 0) return bad("the base band has no thresholds");
    if (parts[2] == "enter_c" || parts[2] == "exit_c") {
      double& field = parts[2] == "enter_c" ? b.enter_c : b.exit_c;
      if (!value) return Fmt(field);
      auto d = Number(n, *value);
      if (!d) return std::unexpected(d.error());
      if (parts[2] == "enter_c") b.exit_c += *d - b.enter_c;  // keep the hysteresis
      field = *d;
      return std::string();
    }
    if (parts[2] == "min_dwell_ms") {
      if (!value) return std::to_string(b.min_dwell_ms);
      auto u = Unsigned(n, *value);
      if (!u) return std::unexpected(u.error());
      b.min_dwell_ms = *u;
      return std::string();
    }
    return bad("unknown field (enter_c, exit_c, min_dwell_ms)");
  }
  if (parts[0] == "knobs" && parts.size() == 4) {
    auto cls = Classes(parts[1]);
    if (!cls) return bad(cls.error().message);
    auto bands = Bands(p, parts[2]);
    if (!bands) return bad(bands.error().message);
    for (size_t b : *bands) {
      for (int c : *cls) {
        qos::Knobs& k = p.knobs[b][static_cast<size_t>(c)];
        if (!value) return KnobValue(k, parts[3]);
        if (auto r = SetKnob(k, parts[3], *value, n); !r) return std::unexpected(r.error());
      }
    }
    return std::string();
  }
  if (parts[0] == "classes" && parts.size() == 3 && parts[2] == "aging_step_ms") {
    auto cls = Classes(parts[1]);
    if (!cls) return bad(cls.error().message);
    for (int c : *cls) {
      uint32_t& f = p.classes[static_cast<size_t>(c)].aging_step_ms;
      if (!value) return std::to_string(f);
      auto u = Unsigned(n, *value);
      if (!u) return std::unexpected(u.error());
      f = *u;
    }
    return std::string();
  }
  if (parts[0] == "memory_bands" && parts.size() == 3) {
    for (qos::MemoryBand& m : p.memory_bands) {
      if (m.name != parts[1]) continue;
      uint64_t& f = parts[2] == "enter_below_mb" ? m.enter_below_bytes : m.exit_above_bytes;
      if (parts[2] != "enter_below_mb" && parts[2] != "exit_above_mb") {
        return bad("unknown field (enter_below_mb, exit_above_mb)");
      }
      if (!value) return std::to_string(f >> 20);
      auto u = Unsigned(n, *value);
      if (!u) return std::unexpected(u.error());
      f = uint64_t{*u} << 20;
      return std::string();
    }
    return bad("unknown memory band \"" + parts[1] + "\"");
  }
  return bad("unknown parameter path (see idl/sim_tune.proto)");
}

}  // namespace

Result<void> ApplyTuneParam(qos::Policy& policy, std::string_view name, std::string_view value) {
  auto r = Access(policy, name, &value);
  if (!r) return std::unexpected(r.error());
  return {};
}

Result<std::string> TuneParamValue(const qos::Policy& policy, std::string_view name) {
  qos::Policy copy = policy;
  return Access(copy, name, nullptr);
}

namespace {

constexpr std::string_view kRoutingPrefix = "routing.";

// The RoutingWeights field a "routing.*" name means (float or int64 seen as double).
struct RoutingField {
  std::string_view name;
  float component::RoutingWeights::*f = nullptr;
  int64_t component::RoutingWeights::*i = nullptr;
};
constexpr RoutingField kRoutingFields[] = {
    {"warm_celsius", &component::RoutingWeights::warm_celsius, nullptr},
    {"hot_celsius", &component::RoutingWeights::hot_celsius, nullptr},
    {"warm_slowdown", &component::RoutingWeights::warm_slowdown, nullptr},
    {"hot_slowdown", &component::RoutingWeights::hot_slowdown, nullptr},
    {"unknown_tokens_per_s", &component::RoutingWeights::unknown_tokens_per_s, nullptr},
    {"turn_tokens", &component::RoutingWeights::turn_tokens, nullptr},
    {"chunk_tokens", &component::RoutingWeights::chunk_tokens, nullptr},
    {"stale_ms", nullptr, &component::RoutingWeights::stale_ms},
};

Result<const RoutingField*> FindRoutingField(std::string_view name) {
  if (IsRoutingParam(name)) {
    const std::string_view field = name.substr(kRoutingPrefix.size());
    for (const RoutingField& f : kRoutingFields) {
      if (f.name == field) return &f;
    }
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string(name) + ": unknown routing parameter (see sim/tune.h)");
}

}  // namespace

bool IsRoutingParam(std::string_view name) { return name.starts_with(kRoutingPrefix); }

Result<void> ApplyRoutingParam(component::RoutingWeights& w, std::string_view name,
                               std::string_view value) {
  auto f = FindRoutingField(name);
  if (!f) return std::unexpected(f.error());
  auto d = Number(name, value);
  if (!d) return std::unexpected(d.error());
  if (!(*d > 0) || *d > 1e9) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(name) + ": \"" + std::string(value) + "\" must be positive");
  }
  if ((*f)->f != nullptr) {
    w.*((*f)->f) = static_cast<float>(*d);
  } else {
    w.*((*f)->i) = static_cast<int64_t>(std::llround(*d));
  }
  return {};
}

Result<std::string> RoutingParamValue(const component::RoutingWeights& w, std::string_view name) {
  auto f = FindRoutingField(name);
  if (!f) return std::unexpected(f.error());
  return (*f)->f != nullptr ? Fmt(w.*((*f)->f)) : std::to_string(w.*((*f)->i));
}

Result<TuneSpace> ParseTuneSpace(std::string_view text, std::string_view origin) {
  ari::tune::Space msg;
  google::protobuf::TextFormat::Parser parser;
  struct Collector : google::protobuf::io::ErrorCollector {
    std::string first;
    void AddError(int line, int column, const std::string& message) override {
      if (first.empty())
        first = std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
    }
  } errors;
  parser.RecordErrorsTo(&errors);
  const std::string o(origin);
  if (!parser.ParseFromString(std::string(text), &msg)) {
    return MakeError(ErrorCode::kParse, o + ":" + errors.first);
  }
  TuneSpace s;
  s.peak_celsius_limit = msg.peak_celsius_limit();
  if (msg.param_size() == 0) return MakeError(ErrorCode::kInvalidArgument, o + ": no param");
  for (const auto& p : msg.param()) {
    TuneParam t;
    t.name = p.name();
    if (p.values_size() > 0) {
      t.values.assign(p.values().begin(), p.values().end());
    } else {
      if (!(p.step() > 0) || p.max() < p.min()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         o + ": param " + p.name() + ": give values, or min <= max and step > 0");
      }
      const int n = static_cast<int>(std::floor((p.max() - p.min()) / p.step() + 1e-9)) + 1;
      if (n > 1000)
        return MakeError(ErrorCode::kInvalidArgument,
                         o + ": param " + p.name() + ": more than 1000 values");
      for (int i = 0; i < n; ++i) t.values.push_back(Fmt(p.min() + i * p.step()));
    }
    s.params.push_back(std::move(t));
  }
  return s;
}

Result<TuneSpace> LoadTuneSpace(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kIo, path.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTuneSpace(ss.str(), path.string());
}

}  // namespace ari::sim
