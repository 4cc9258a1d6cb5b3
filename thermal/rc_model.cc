#include "thermal/rc_model.h"

#include <algorithm>
#include <cmath>

namespace ari::thermal {
namespace {

bool Positive(double v) { return std::isfinite(v) && v > 0.0; }
bool NonNegative(double v) { return std::isfinite(v) && v >= 0.0; }

}  // namespace

Result<RcModel> RcModel::Create(const RcParams& p) {
  if (p.nodes != 1 && p.nodes != 2) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rc model: nodes must be 1 or 2, got " + std::to_string(p.nodes));
  }
  if (!Positive(p.r_die_pkg_k_per_w) || !Positive(p.r_pkg_amb_k_per_w)) {
    return MakeError(ErrorCode::kInvalidArgument, "rc model: thermal resistances must be > 0");
  }
  if (!Positive(p.c_die_j_per_k) || !Positive(p.c_pkg_j_per_k)) {
    return MakeError(ErrorCode::kInvalidArgument, "rc model: heat capacities must be > 0");
  }
  if (!NonNegative(p.idle_power_w) || !NonNegative(p.w8a16_power_per_core_w) ||
      !NonNegative(p.w4a8_power_per_core_w)) {
    return MakeError(ErrorCode::kInvalidArgument, "rc model: powers must be finite and >= 0");
  }
  if (!Positive(p.efficiency_core_power_scale) || p.efficiency_core_power_scale > 1.0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rc model: efficiency_core_power_scale must be in (0, 1]");
  }
  if (!std::isfinite(p.ambient_celsius) || !std::isfinite(p.initial_celsius)) {
    return MakeError(ErrorCode::kInvalidArgument, "rc model: temperatures must be finite");
  }
  return RcModel(p);
}

RcModel::RcModel(const RcParams& p)
    : params_(p),
      die_c_(p.initial_celsius),
      pkg_c_(p.initial_celsius),
      ambient_c_(p.ambient_celsius) {
  if (p.nodes == 1) {
    const double tau =
        (p.r_die_pkg_k_per_w + p.r_pkg_amb_k_per_w) * (p.c_die_j_per_k + p.c_pkg_j_per_k);
    tau_slow_s_ = tau_fast_s_ = tau;
    return;
  }
  a_ = 1.0 / (p.r_die_pkg_k_per_w * p.c_die_j_per_k);
  b_ = 1.0 / (p.r_die_pkg_k_per_w * p.c_pkg_j_per_k);
  c_ = 1.0 / (p.r_pkg_amb_k_per_w * p.c_pkg_j_per_k);
  const double tr = -(a_ + b_ + c_);
  const double disc = (a_ - c_) * (a_ - c_) + b_ * b_ + 2.0 * a_ * b_ + 2.0 * b_ * c_;
  const double root = std::sqrt(disc);
  // l2 (fast) has no cancellation; l1 (slow, closer to 0) = det / l2 with det = a c
  // avoids the cancellation of (tr + root) / 2 when the die is much faster.
  l2_ = 0.5 * (tr - root);
  l1_ = (a_ * c_) / l2_;
  tau_slow_s_ = -1.0 / l1_;
  tau_fast_s_ = -1.0 / l2_;
}

double RcModel::PowerW(const RcLoad& load) const {
  const double busy =
      std::clamp(std::isfinite(load.busy_fraction) ? load.busy_fraction : 0.0, 0.0, 1.0);
  const int cores = std::max(load.active_cores, 0);
  const double per_core = load.precision == PowerPrecision::kW8A16 ? params_.w8a16_power_per_core_w
                                                                   : params_.w4a8_power_per_core_w;
  const double scale =
      load.core_class == CoreClass::kPerformance ? 1.0 : params_.efficiency_core_power_scale;
  return params_.idle_power_w + busy * cores * per_core * scale;
}

double RcModel::SteadyStateDie(const RcLoad& load) const {
  return ambient_c_ + PowerW(load) * (params_.r_die_pkg_k_per_w + params_.r_pkg_amb_k_per_w);
}

Result<void> RcModel::Step(double dt_s, const RcLoad& load) {
  if (!std::isfinite(dt_s) || dt_s < 0.0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rc model: step must be finite and >= 0, got " + std::to_string(dt_s));
  }
  if (dt_s > 0.0) Advance(dt_s, load);
  return {};
}

void RcModel::Advance(double dt_s, const RcLoad& load) {
  const double power = PowerW(load);
  if (params_.nodes == 1) {
    const double target = SteadyStateDie(load);
    die_c_ = target + (die_c_ - target) * std::exp(-dt_s / tau_slow_s_);
  } else {
    const double pkg_star = ambient_c_ + power * params_.r_pkg_amb_k_per_w;
    const double die_star = pkg_star + power * params_.r_die_pkg_k_per_w;
    const double y0 = die_c_ - die_star;
    const double y1 = pkg_c_ - pkg_star;
    // exp(A t) = [e1 (A - l2 I) - e2 (A - l1 I)] / (l1 - l2)
    const double e1 = std::exp(l1_ * dt_s);
    const double e2 = std::exp(l2_ * dt_s);
    const double inv = 1.0 / (l1_ - l2_);
    const double m00 = (e1 * (-a_ - l2_) - e2 * (-a_ - l1_)) * inv;
    const double m01 = (e1 - e2) * a_ * inv;
    const double m10 = (e1 - e2) * b_ * inv;
    const double m11 = (e1 * (-(b_ + c_) - l2_) - e2 * (-(b_ + c_) - l1_)) * inv;
    die_c_ = die_star + m00 * y0 + m01 * y1;
    pkg_c_ = pkg_star + m10 * y0 + m11 * y1;
  }
  time_s_ += dt_s;
}

Result<void> RcModel::SetAmbient(double celsius) {
  if (!std::isfinite(celsius)) {
    return MakeError(ErrorCode::kInvalidArgument, "rc model: ambient must be finite");
  }
  ambient_c_ = celsius;
  return {};
}

void RcModel::Reset(double die_celsius, double pkg_celsius) {
  die_c_ = die_celsius;
  pkg_c_ = params_.nodes == 2 ? pkg_celsius : die_celsius;
}

RcModelSource::RcModelSource(RcModel model, const Clock& clock, ValidationLimits limits,
                             std::string label)
    : model_(model),
      clock_(clock),
      validator_(limits),
      label_(std::move(label)),
      last_ns_(clock.NowNs()) {
  validator_.MarkPresent();
}

void RcModelSource::AdvanceToNow() {
  const int64_t now = clock_.NowNs();
  if (now > last_ns_) {
    model_.Advance(NsToSeconds(now - last_ns_), load_);  // dt > 0 and finite
    last_ns_ = now;
  }
}

void RcModelSource::SetLoad(const RcLoad& load) {
  AdvanceToNow();
  load_ = load;
}

Result<void> RcModelSource::SetAmbient(double celsius) {
  AdvanceToNow();
  return model_.SetAmbient(celsius);
}

void RcModelSource::ReadInto(Reading& out) {
  AdvanceToNow();
  const int64_t now = clock_.NowNs();
  const Validated v = validator_.Observe(RawStatus::kValue, model_.die_celsius(), now, now);
  out.celsius = v.celsius;
  out.state = v.state;
  out.time_ns = v.time_ns;
  out.source.assign(label_);
}

}  // namespace ari::thermal
