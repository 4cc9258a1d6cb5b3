// Thermal RC model of the SoC: what the simulator and the tests use as "the
// world". One or two thermal nodes, heated by the inference engine and cooled
// toward an ambient temperature that may change at any time.
//
// Power (W), constant during a step:
//   P = idle_power_w + busy * cores * per_core(precision) * class_scale
//   busy = load.busy_fraction clamped to [0, 1]; cores = load.active_cores;
//   per_core = w8a16_power_per_core_w or w4a8_power_per_core_w;
//   class_scale = 1 for performance cores, efficiency_core_power_scale otherwise.
//
// Two nodes (die d, package/heatsink p, ambient a):
//   C_d dT_d/dt = P - (T_d - T_p) / R_dp
//   C_p dT_p/dt = (T_d - T_p) / R_dp - (T_p - T_a) / R_pa
//   steady state: T_p* = T_a + P R_pa,  T_d* = T_p* + P R_dp
// One node (die only; same steady state, total heat capacity):
//   C dT/dt = P - (T - T_a) / R,   R = R_dp + R_pa,  C = C_d + C_p
//   T(t) = T* + (T(0) - T*) exp(-t / (R C)),  T* = T_a + P R
//
// Integration is exact for piecewise-constant P and T_a: with x = (T_d, T_p),
// x' = A x + u, the step is x(dt) = x* + exp(A dt) (x(0) - x*), where exp(A dt)
// of the 2x2 matrix A = [[-a, a], [b, -(b+c)]] (a = 1/(R_dp C_d),
// b = 1/(R_dp C_p), c = 1/(R_pa C_p)) is computed from its two real, distinct,
// negative eigenvalues (discriminant (a-c)^2 + b^2 + 2ab + 2bc > 0). No step
// size limit: any dt >= 0 is stable and exact.
//
// Defaults (a passively cooled automotive SoC, 4 busy W8A16 performance cores at
// 25 C ambient settle near 92.5 C; time constants 4.6 s and 260 s):
//   R_dp = 1.0 K/W, R_pa = 4.0 K/W, C_d = 5 J/K, C_p = 60 J/K,
//   idle 1.5 W, W8A16 3.0 W/core, W4A8 2.0 W/core, efficiency cores x0.4.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "thermal/clock.h"
#include "thermal/error.h"
#include "thermal/source.h"
#include "thermal/topology.h"

namespace ari::thermal {

enum class PowerPrecision : uint8_t { kW8A16 = 0, kW4A8 = 1 };

struct RcParams {
  int nodes = 2;                   // 1 or 2
  double r_die_pkg_k_per_w = 1.0;  // R_dp
  double r_pkg_amb_k_per_w = 4.0;  // R_pa
  double c_die_j_per_k = 5.0;      // C_d
  double c_pkg_j_per_k = 60.0;     // C_p
  double idle_power_w = 1.5;
  double w8a16_power_per_core_w = 3.0;
  double w4a8_power_per_core_w = 2.0;
  double efficiency_core_power_scale = 0.4;
  double ambient_celsius = 25.0;
  double initial_celsius = 25.0;  // both nodes at start
};

struct RcLoad {
  double busy_fraction = 0.0;  // measured share of wall time the workers computed
  int active_cores = 0;
  PowerPrecision precision = PowerPrecision::kW8A16;
  CoreClass core_class = CoreClass::kPerformance;
};

class RcModel {
 public:
  // Validates: nodes 1 or 2, R and C finite > 0, powers finite >= 0, scale in
  // (0, 1], temperatures finite.
  static Result<RcModel> Create(const RcParams& params);

  // Advances virtual time by dt_s seconds (finite, >= 0) with constant load and
  // the current ambient. Returns kInvalidArgument (state unchanged) otherwise.
  Result<void> Step(double dt_s, const RcLoad& load);
  // Step without the check, for callers whose dt_s is finite and > 0 by construction.
  void Advance(double dt_s, const RcLoad& load);

  // Changes the ambient (finite) from now on.
  Result<void> SetAmbient(double celsius);
  // Puts both nodes (1 node: the die) at these temperatures.
  void Reset(double die_celsius, double pkg_celsius);

  double PowerW(const RcLoad& load) const;
  // Analytic steady-state die temperature for a constant load at the current ambient.
  double SteadyStateDie(const RcLoad& load) const;
  // Time constants (s), slowest first: 1 node {RC, RC}; 2 nodes {-1/l_slow, -1/l_fast}.
  double slow_time_constant_s() const { return tau_slow_s_; }
  double fast_time_constant_s() const { return tau_fast_s_; }

  double die_celsius() const { return die_c_; }
  double package_celsius() const { return params_.nodes == 2 ? pkg_c_ : die_c_; }
  double ambient_celsius() const { return ambient_c_; }
  double time_s() const { return time_s_; }
  const RcParams& params() const { return params_; }

 private:
  explicit RcModel(const RcParams& p);

  RcParams params_;
  double die_c_ = 0.0;
  double pkg_c_ = 0.0;
  double ambient_c_ = 0.0;
  double time_s_ = 0.0;
  // 2x2 system: A = [[-a, a], [b, -(b+c)]], eigenvalues l1 > l2 (both < 0).
  double a_ = 0.0, b_ = 0.0, c_ = 0.0, l1_ = 0.0, l2_ = 0.0;
  double tau_slow_s_ = 0.0, tau_fast_s_ = 0.0;
};

// TemperatureSource over an RcModel in clock time: the model is advanced to
// clock.NowNs() (with the load in force since the last call) whenever the load
// or ambient changes or a reading is taken, so the integration is exact for a
// piecewise-constant load. Reports the die temperature, validated like every
// source (a die above 150 C reads kInvalid).
class RcModelSource final : public TemperatureSource {
 public:
  // `clock` must outlive the source; model time starts at the clock's now.
  RcModelSource(RcModel model, const Clock& clock, ValidationLimits limits = {},
                std::string label = "rc-model");

  void ReadInto(Reading& out) override;
  std::string_view name() const override { return label_; }

  void SetLoad(const RcLoad& load);
  Result<void> SetAmbient(double celsius);
  const RcLoad& load() const { return load_; }
  // Advances the model to the clock's now (also done by the calls above).
  void AdvanceToNow();
  const RcModel& model() const { return model_; }
  RcModel& mutable_model() { return model_; }

 private:
  RcModel model_;
  const Clock& clock_;
  ReadingValidator validator_;
  std::string label_;
  RcLoad load_;
  int64_t last_ns_;
};

}  // namespace ari::thermal
