// The QoS governor: a pure function (policy, state, inputs) -> decision + reason
// + next state. No clock, no I/O, no heap allocation: the node and the simulator
// call the very same code, in real or virtual time (time comes in inputs.now_ns).
//
// Rules (docs/policy.md has the long form):
//  - Thermal band: going up, enter band i when T >= enter_c[i] (several bands at
//    once if T is high enough); going down, leave band i when T < exit_c[i], one
//    band per decision. Every change waits until the current band has been held
//    min_dwell_ms, except entering the last (hottest) band, which is immediate.
//  - Sensor not OK (absent, vanished, stale, invalid): conservative mode. Per
//    class and per knob the more throttled (MoreThrottled) of the policy's
//    conservative knobs and the knobs of the fault floor: the hottest band in
//    force or read within policy.fault_window_ms before the fault, latched at the
//    fault's first decision for the whole fault, so a fault never runs less
//    throttled than the node was. The band state is kept and resumes on recovery.
//  - Memory ladder on top: deeper bands apply at once; relaxing goes one band per
//    decision after the band's min_dwell_ms. Actions accumulate down the ladder.
//    An unknown MemAvailable keeps the current memory band.
//  - The knobs are those of the active request's class; when idle, of the most
//    urgent class waiting; when nothing waits, NORMAL's.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "qos/policy.h"
#include "thermal/reading.h"

namespace ari::qos {

// The governor's memory between decisions (small, copyable, no heap).
struct GovernorState {
  bool initialized = false;  // false until the first OK temperature reading
  int thermal_band = 0;      // index into Policy::thermal_bands
  int64_t thermal_since_ns = 0;
  bool conservative = false;  // the last decision was made in conservative mode
  int memory_band = -1;       // index into Policy::memory_bands, -1 = none
  int64_t memory_since_ns = 0;
  // Bands seen on OK readings (in force, or where the reading itself lies): bit b
  // set = band b seen, last at band_seen_ns[b]. Feeds the fault floor.
  uint32_t band_seen_mask = 0;
  std::array<int64_t, kMaxThermalBands> band_seen_ns{};
  int fault_floor_band = -1;  // latched while conservative; -1 = none (never an OK reading)

  bool operator==(const GovernorState&) const = default;
};

struct GovernorInputs {
  thermal::Reading reading;
  std::optional<uint64_t> mem_available_bytes;  // MemAvailable (or cgroup headroom)
  std::optional<double> psi_some_avg10;         // /proc/pressure/memory "some avg10", percent
  std::array<uint32_t, kNumUrgencies> queue_depths{};  // waiting requests by class rank
  std::optional<Urgency> active;                       // class of the request running now
  int64_t now_ns = 0;
};

// A reason that lives in the decision itself (no allocation per decision).
class ReasonText {
 public:
  static constexpr size_t kCapacity = 480;
  std::string_view view() const { return std::string_view(buf_.data(), len_); }
  void Append(std::string_view s);
  void Appendf(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void Clear() { len_ = 0; }

 private:
  std::array<char, kCapacity> buf_{};
  size_t len_ = 0;
};

struct Decision {
  Urgency urgency = Urgency::kNormal;  // class whose knobs these are
  bool idle = false;                   // nothing active and nothing waiting
  Knobs knobs;                         // after the memory ladder
  int thermal_band = 0;                // band in force (kept during conservative mode)
  bool conservative = false;           // sensor not OK: knobs from policy.conservative
  int fault_floor_band = -1;           // conservative: band whose knobs bound the knobs
  int memory_band = -1;                // -1 = no memory pressure
  MemoryActions memory;                // accumulated ladder actions in force
  bool thermal_changed = false;        // band changed in this decision
  bool memory_changed = false;
  ReasonText reason;  // e.g. "band hot (86.2 C >= 85.0 enter); CRITICAL -> ..."

  std::string_view Reason() const { return reason.view(); }
};

struct GovernorOutput {
  Decision decision;
  GovernorState state;
};

GovernorOutput Decide(const Policy& policy, const GovernorState& state, const GovernorInputs& in);

}  // namespace ari::qos
