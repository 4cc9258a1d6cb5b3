// The governor's pure decision function; see governor.h for the rules.
#include "qos/governor.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ari::qos {
namespace {

constexpr int64_t kNsPerMs = 1000000;
constexpr uint64_t kMiB = 1024ull * 1024ull;

// Local copy of the state names: thermal/ may be header-only while it grows.
const char* SensorFault(thermal::SensorState s) {
  switch (s) {
    case thermal::SensorState::kOk: return "ok";
    case thermal::SensorState::kNoSensor: return "no sensor";
    case thermal::SensorState::kVanished: return "vanished";
    case thermal::SensorState::kStale: return "stale";
    case thermal::SensorState::kInvalid: return "invalid";
  }
  return "fault";
}

int64_t ElapsedMs(int64_t since_ns, int64_t now_ns) {
  return now_ns > since_ns ? (now_ns - since_ns) / kNsPerMs : 0;
}

uint64_t Mb(uint64_t bytes) { return bytes / kMiB; }

// Fault floor bookkeeping on an OK reading: the band now in force and the band the
// reading itself lies in (higher while a dwell holds the way up) are seen now.
void RecordSeen(const Policy& p, double t, int64_t now_ns, GovernorState* next) {
  const int n = std::min(static_cast<int>(p.thermal_bands.size()), kMaxThermalBands);
  int lies = 0;
  while (lies + 1 < n && t >= p.thermal_bands[lies + 1].enter_c) ++lies;
  for (int b : {next->thermal_band, lies}) {
    if (b < 0 || b >= n) continue;
    next->band_seen_mask |= uint32_t{1} << b;
    next->band_seen_ns[b] = now_ns;
  }
  next->fault_floor_band = -1;
}

// The fault floor at the start of a fault: the band in force (kept from the last good
// reading), raised to the hottest band seen within policy.fault_window_ms before now.
// -1 when there never was a good reading.
int FaultFloor(const Policy& p, const GovernorState& s, int64_t now_ns) {
  if (!s.initialized) return -1;
  const int n = std::min(static_cast<int>(p.thermal_bands.size()), kMaxThermalBands);
  int floor = s.thermal_band;
  for (int b = n - 1; b > floor; --b) {
    if ((s.band_seen_mask & (uint32_t{1} << b)) != 0 &&
        ElapsedMs(s.band_seen_ns[b], now_ns) <= p.fault_window_ms) {
      floor = b;
      break;
    }
  }
  return floor;
}

// Sensor not OK: conservative mode with the fault floor latched at the fault's first
// decision (kept while the fault lasts); the band state is kept for the recovery.
void DecideFault(const Policy& p, const GovernorState& s, const GovernorInputs& in,
                 GovernorState* next, Decision* d) {
  ReasonText& r = d->reason;
  const int floor = s.conservative ? s.fault_floor_band : FaultFloor(p, s, in.now_ns);
  next->conservative = true;
  next->fault_floor_band = floor;
  d->conservative = true;
  d->fault_floor_band = floor;
  r.Appendf("CONSERVATIVE: sensor %s", in.reading.ok() ? "invalid" : SensorFault(in.reading.state));
  if (!in.reading.source.empty()) {
    r.Appendf(" (%.*s)", static_cast<int>(in.reading.source.size()), in.reading.source.data());
  }
  if (s.initialized) {
    r.Appendf(", band %s kept", p.thermal_bands[s.thermal_band].name.c_str());
  }
  if (floor >= 0) {
    r.Appendf("; at least as throttled as band %s", p.thermal_bands[floor].name.c_str());
  }
}

// Thermal part: updates state/decision, writes "band ..." into the reason.
void DecideThermal(const Policy& p, const GovernorState& s, const GovernorInputs& in,
                   GovernorState* next, Decision* d) {
  const int n = static_cast<int>(p.thermal_bands.size());
  ReasonText& r = d->reason;
  const double t = in.reading.celsius;
  d->thermal_band = s.thermal_band;
  if (!in.reading.ok() || !std::isfinite(t)) {
    DecideFault(p, s, in, next, d);
    return;
  }
  next->conservative = false;
  if (s.conservative) r.Append("sensor ok again; ");
  if (!s.initialized) {
    int band = 0;
    while (band + 1 < n && t >= p.thermal_bands[band + 1].enter_c) ++band;
    next->initialized = true;
    next->thermal_band = band;
    next->thermal_since_ns = in.now_ns;
    d->thermal_band = band;
    d->thermal_changed = true;
    r.Appendf("band %s (%.1f C, first reading)", p.thermal_bands[band].name.c_str(), t);
    RecordSeen(p, t, in.now_ns, next);
    return;
  }
  const int cur = s.thermal_band;
  const ThermalBand& band = p.thermal_bands[cur];
  const int64_t held_ms = ElapsedMs(s.thermal_since_ns, in.now_ns);
  const bool dwell_done = held_ms >= band.min_dwell_ms;
  int up = cur;
  while (up + 1 < n && t >= p.thermal_bands[up + 1].enter_c) ++up;
  int target = cur;
  if (up > cur) {
    const ThermalBand& to = p.thermal_bands[up];
    const bool last = up == n - 1;
    if (dwell_done || last) {
      target = up;
      r.Appendf("band %s (%.1f C >= %.1f enter%s)", to.name.c_str(), t, to.enter_c,
                dwell_done ? "" : ", last band skips dwell");
    } else {
      r.Appendf("band %s held by dwell (%.1f C >= %.1f enter %s; %lld/%lld ms)", band.name.c_str(),
                t, to.enter_c, to.name.c_str(), static_cast<long long>(held_ms),
                static_cast<long long>(band.min_dwell_ms));
    }
  } else if (cur > 0 && t < band.exit_c) {
    const ThermalBand& to = p.thermal_bands[cur - 1];
    if (dwell_done) {
      target = cur - 1;
      r.Appendf("band %s (%.1f C < %.1f exit %s)", to.name.c_str(), t, band.exit_c,
                band.name.c_str());
    } else {
      r.Appendf("band %s held by dwell (%.1f C < %.1f exit; %lld/%lld ms)", band.name.c_str(), t,
                band.exit_c, static_cast<long long>(held_ms),
                static_cast<long long>(band.min_dwell_ms));
    }
  } else {
    r.Appendf("band %s (%.1f C", band.name.c_str(), t);
    if (cur + 1 < n) r.Appendf(", up at >= %.1f", p.thermal_bands[cur + 1].enter_c);
    if (cur > 0) r.Appendf(", down at < %.1f", band.exit_c);
    r.Append(")");
  }
  if (target != cur) {
    next->thermal_band = target;
    next->thermal_since_ns = in.now_ns;
    d->thermal_changed = true;
  }
  d->thermal_band = next->thermal_band;
  RecordSeen(p, t, in.now_ns, next);
}

bool MemEnter(const MemoryBand& b, uint64_t avail, const std::optional<double>& psi) {
  return avail < b.enter_below_bytes || (b.psi_enter > 0.0 && psi && *psi >= b.psi_enter);
}

bool MemExit(const MemoryBand& b, uint64_t avail, const std::optional<double>& psi) {
  return avail > b.exit_above_bytes && (b.psi_enter <= 0.0 || !psi || *psi < b.psi_exit);
}

// Memory ladder: updates state/decision, appends "; memory ..." to the reason.
void DecideMemory(const Policy& p, const GovernorState& s, const GovernorInputs& in,
                  GovernorState* next, Decision* d) {
  const int m = static_cast<int>(p.memory_bands.size());
  ReasonText& r = d->reason;
  const int cur = std::clamp(s.memory_band, -1, m - 1);
  next->memory_band = cur;
  auto name = [&](int i) { return i < 0 ? "ok" : p.memory_bands[i].name.c_str(); };
  if (m == 0) return;
  if (!in.mem_available_bytes) {
    if (cur >= 0) r.Appendf("; memory unknown, band %s kept", name(cur));
  } else {
    const uint64_t avail = *in.mem_available_bytes;
    const auto& psi = in.psi_some_avg10;
    int deeper = cur;
    while (deeper + 1 < m && MemEnter(p.memory_bands[deeper + 1], avail, psi)) ++deeper;
    if (deeper > cur) {
      const MemoryBand& to = p.memory_bands[deeper];
      next->memory_band = deeper;
      next->memory_since_ns = in.now_ns;
      d->memory_changed = true;
      if (avail < to.enter_below_bytes) {
        r.Appendf("; memory %s (%llu MB < %llu enter)", to.name.c_str(),
                  static_cast<unsigned long long>(Mb(avail)),
                  static_cast<unsigned long long>(Mb(to.enter_below_bytes)));
      } else {
        r.Appendf("; memory %s (PSI %.1f %% >= %.1f enter, %llu MB)", to.name.c_str(), *psi,
                  to.psi_enter, static_cast<unsigned long long>(Mb(avail)));
      }
    } else if (cur >= 0 && MemExit(p.memory_bands[cur], avail, psi)) {
      const MemoryBand& band = p.memory_bands[cur];
      const int64_t held_ms = ElapsedMs(s.memory_since_ns, in.now_ns);
      if (held_ms >= band.min_dwell_ms) {
        next->memory_band = cur - 1;
        next->memory_since_ns = in.now_ns;
        d->memory_changed = true;
        r.Appendf("; memory %s (%llu MB > %llu exit %s)", name(cur - 1),
                  static_cast<unsigned long long>(Mb(avail)),
                  static_cast<unsigned long long>(Mb(band.exit_above_bytes)), band.name.c_str());
      } else {
        r.Appendf("; memory %s held by dwell (%llu MB > %llu exit; %lld/%lld ms)",
                  band.name.c_str(), static_cast<unsigned long long>(Mb(avail)),
                  static_cast<unsigned long long>(Mb(band.exit_above_bytes)),
                  static_cast<long long>(held_ms), static_cast<long long>(band.min_dwell_ms));
      }
    } else if (cur >= 0) {
      r.Appendf("; memory %s (%llu MB, relax at > %llu)", name(cur),
                static_cast<unsigned long long>(Mb(avail)),
                static_cast<unsigned long long>(Mb(p.memory_bands[cur].exit_above_bytes)));
    }
  }
  d->memory_band = next->memory_band;
  MemoryActions& a = d->memory;
  for (int i = 0; i <= d->memory_band; ++i) {
    const MemoryActions& b = p.memory_bands[i].actions;
    a.greedy_only |= b.greedy_only;
    a.kv_int8 |= b.kv_int8;
    a.use_fallback_model |= b.use_fallback_model;
    a.spill_idle_sessions |= b.spill_idle_sessions;
    a.park_to_disk |= b.park_to_disk;
    if (b.context_cap != 0)
      a.context_cap = a.context_cap == 0 ? b.context_cap : std::min(a.context_cap, b.context_cap);
    if (b.output_cap != 0)
      a.output_cap = a.output_cap == 0 ? b.output_cap : std::min(a.output_cap, b.output_cap);
  }
  if (d->memory_band >= 0) {
    r.Append(":");
    if (a.greedy_only) r.Append(" greedy");
    if (a.kv_int8) r.Append(" KV-int8");
    if (a.context_cap != 0) r.Appendf(" ctx<=%u", a.context_cap);
    if (a.output_cap != 0) r.Appendf(" out<=%u", a.output_cap);
    if (a.use_fallback_model) r.Append(" fallback-model");
    if (a.spill_idle_sessions) r.Append(" spill-idle");
    if (a.park_to_disk) r.Append(" park-to-disk");
  }
}

}  // namespace

void ReasonText::Append(std::string_view s) {
  const size_t room = kCapacity - len_;
  const size_t n = std::min(room, s.size());
  std::memcpy(buf_.data() + len_, s.data(), n);
  len_ += n;
}

void ReasonText::Appendf(const char* fmt, ...) {
  const size_t room = kCapacity - len_;
  if (room <= 1) return;
  va_list args;
  va_start(args, fmt);
  const int n = std::vsnprintf(buf_.data() + len_, room, fmt, args);
  va_end(args);
  if (n > 0) len_ += std::min(static_cast<size_t>(n), room - 1);
}

GovernorOutput Decide(const Policy& policy, const GovernorState& state, const GovernorInputs& in) {
  GovernorOutput out;
  out.state = state;
  Decision& d = out.decision;
  const int n = static_cast<int>(policy.thermal_bands.size());
  const bool usable = n > 0 && policy.knobs.size() >= static_cast<size_t>(n);
  GovernorState s = state;
  s.thermal_band = usable ? std::clamp(s.thermal_band, 0, n - 1) : 0;
  s.fault_floor_band = usable ? std::clamp(s.fault_floor_band, -1, n - 1) : -1;

  if (usable) {
    DecideThermal(policy, s, in, &out.state, &d);
  } else {  // not a loader-made policy: be safe rather than index out of range
    d.conservative = true;
    out.state.conservative = true;
    out.state.fault_floor_band = -1;
    d.reason.Append("CONSERVATIVE: policy has no thermal band table");
  }
  DecideMemory(policy, s, in, &out.state, &d);

  // Whose knobs: the running request's class; else the most urgent waiting; else NORMAL.
  if (in.active) {
    d.urgency = *in.active;
  } else {
    d.idle = true;
    d.urgency = Urgency::kNormal;
    for (Urgency u : kAllUrgencies) {
      if (in.queue_depths[Rank(u)] > 0) {
        d.urgency = u;
        d.idle = false;
        break;
      }
    }
  }
  if (!d.conservative) {
    d.knobs = policy.KnobsFor(d.urgency, static_cast<size_t>(d.thermal_band));
  } else if (d.fault_floor_band >= 0) {  // monotone: never less throttled than the floor
    d.knobs = MoreThrottled(policy.conservative[Rank(d.urgency)],
                            policy.KnobsFor(d.urgency, static_cast<size_t>(d.fault_floor_band)));
  } else {
    d.knobs = policy.conservative[Rank(d.urgency)];
  }
  if (d.memory.kv_int8) d.knobs.kv_precision = KvPrecision::kInt8;

  char knobs[192];
  FormatKnobs(d.knobs, knobs, sizeof(knobs));
  d.reason.Appendf("; %s%s -> %s", d.idle ? "idle, " : "", UrgencyName(d.urgency).data(), knobs);
  if (!in.active && !d.idle) d.reason.Append(" (next waiting)");
  const auto& q = in.queue_depths;
  if (q[0] + q[1] + q[2] + q[3] > 0) {
    d.reason.Appendf("; waiting C%u H%u N%u B%u", q[0], q[1], q[2], q[3]);
  }
  return out;
}

}  // namespace ari::qos
