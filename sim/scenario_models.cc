#include "sim/scenario_models.h"

#include <algorithm>
#include <cmath>

#include "thermal/rc_model.h"

namespace ari::sim::internal {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

dl::Event At(uint64_t t_ms) {
  dl::Event e;
  e.set_t_ms(t_ms);
  return e;
}

// Next driving segment of a pattern: how long, at what target speed.
struct Segment {
  double length_s;
  double target_kmh;
};

Segment NextSegment(DrivePattern pattern, bool stopped_before, Prng& rng) {
  switch (pattern) {
    case DrivePattern::kCity:
      if (!stopped_before && rng.Bernoulli(0.45)) return {rng.Uniform(15, 60), 0};  // red light
      return {rng.Uniform(30, 120), rng.Uniform(25, 50)};
    case DrivePattern::kHighway:
      if (rng.Bernoulli(0.1)) return {rng.Uniform(30, 120), rng.Uniform(55, 80)};  // slowdown
      return {rng.Uniform(60, 300), rng.Uniform(105, 130)};
    case DrivePattern::kMountain:
      return {rng.Uniform(20, 60), rng.Uniform(30, 65)};  // hairpins and short straights
  }
  return {60, 0};
}

}  // namespace

double Round1(double v) {
  const double r = std::round(v * 10.0) / 10.0;
  return r == 0.0 ? 0.0 : r;
}

void GenerateVehicle(const DriveSpec& spec, uint64_t duration_ms, Prng& rng,
                     std::vector<dl::Event>* out) {
  const double end_s = static_cast<double>(duration_ms) / 1000.0;
  const double park_s = std::max(spec.depart_s, end_s - 30.0);  // stop and park at the end
  double speed = 0;
  Segment seg{0, 0};
  double seg_end = spec.depart_s;
  for (uint64_t t_ms = 0; t_ms <= duration_ms; t_ms += 1000) {
    const double t = static_cast<double>(t_ms) / 1000.0;
    double target = 0;
    if (t >= spec.depart_s && t < park_s) {
      if (t >= seg_end) {
        seg = NextSegment(spec.pattern, seg.target_kmh == 0, rng);
        seg_end = t + seg.length_s;
      }
      target = seg.target_kmh;
    }
    // Accelerate at most 8 km/h per second, brake at most 10 km/h per second.
    speed = target > speed ? std::min(target, speed + 8.0) : std::max(target, speed - 10.0);
    if (t_ms % 5000 != 0) continue;
    dl::Ignition ignition = dl::IGNITION_ON;
    if (spec.cold_ignition) {
      ignition = t < 2   ? dl::IGNITION_OFF
                 : t < 5 ? dl::IGNITION_ACCESSORY
                 : t < 6 ? dl::IGNITION_CRANKING
                         : dl::IGNITION_ON;
    }
    const bool driving = t >= spec.depart_s && (t < park_s || speed > 0);
    dl::Event e = At(t_ms);
    auto* v = e.mutable_vehicle_state();
    const double noisy = speed > 0 ? std::max(0.0, speed + rng.Normal(0, 0.8)) : 0.0;
    v->set_speed_kmh(Round1(noisy));
    v->set_ignition(ignition);
    v->set_gear(driving ? dl::GEAR_DRIVE : dl::GEAR_PARK);
    out->push_back(std::move(e));
    // The cold-start ignition steps fall between 5 s samples: add them.
    if (spec.cold_ignition && t_ms == 0) {
      for (auto [ms, ign] :
           {std::pair{2000ull, dl::IGNITION_ACCESSORY}, std::pair{5000ull, dl::IGNITION_CRANKING},
            std::pair{6000ull, dl::IGNITION_ON}}) {
        if (ms == 5000 || ms > duration_ms) continue;  // 5 s is a regular sample
        dl::Event s = At(ms);
        s.mutable_vehicle_state()->set_ignition(ign);
        s.mutable_vehicle_state()->set_gear(dl::GEAR_PARK);
        out->push_back(std::move(s));
      }
    }
  }
}

void GenerateMemory(const MemorySpec& spec, uint64_t duration_ms, Prng& rng,
                    std::vector<dl::Event>* out) {
  const double base = static_cast<double>(spec.baseline_bytes);
  // Squeeze waves: ramp down, hold near a floor of 250..450 MB, ramp up.
  struct Wave {
    double start, down, hold, up, floor;
  };
  std::vector<Wave> waves;
  if (spec.squeeze) {
    double t = rng.Uniform(90, 180);
    const double end_s = static_cast<double>(duration_ms) / 1000.0;
    while (t < end_s) {
      Wave w{t, rng.Uniform(10, 30), rng.Uniform(30, 90), rng.Uniform(10, 30),
             rng.Uniform(250, 450) * static_cast<double>(kMiB)};
      waves.push_back(w);
      t += w.down + w.hold + w.up + rng.Uniform(150, 330);
    }
  }
  double walk = 0;
  size_t wi = 0;
  for (uint64_t t_ms = 0; t_ms <= duration_ms; t_ms += 1000) {
    const double t = static_cast<double>(t_ms) / 1000.0;
    walk = 0.99 * walk + rng.Normal(0, 4.0 * kMiB);  // slow drift of other apps
    double avail = base + walk + rng.Normal(0, 2.0 * kMiB);
    while (wi < waves.size() &&
           t > waves[wi].start + waves[wi].down + waves[wi].hold + waves[wi].up) {
      ++wi;
    }
    if (wi < waves.size() && t >= waves[wi].start) {
      const Wave& w = waves[wi];
      const double dt = t - w.start;
      double depth = 1.0;  // 0 = baseline, 1 = floor
      if (dt < w.down)
        depth = dt / w.down;
      else if (dt > w.down + w.hold)
        depth = 1.0 - (dt - w.down - w.hold) / w.up;
      const double floor = w.floor + rng.Normal(0, 8.0 * kMiB);
      avail = avail + (floor - avail) * std::clamp(depth, 0.0, 1.0);
    }
    avail = std::max(avail, 64.0 * kMiB);
    dl::Event e = At(t_ms);
    e.mutable_memory_available()->set_bytes(static_cast<uint64_t>(avail) / 4096 * 4096);
    out->push_back(std::move(e));
  }
}

Result<void> GenerateSoc(const SocSpec& spec, const std::function<double(double)>& ambient,
                         std::span<const Job> jobs, uint64_t duration_ms, Prng& rng,
                         std::vector<dl::Event>* out) {
  thermal::RcParams params;
  params.idle_power_w = spec.base_power_w;
  params.ambient_celsius = ambient(0);
  params.initial_celsius = spec.initial_celsius;
  auto created = thermal::RcModel::Create(params);
  if (!created) return MakeError(ErrorCode::kInternal, created.error().message);
  thermal::RcModel model = *created;

  // Jobs served one at a time, in arrival order: busy intervals.
  std::vector<std::pair<double, double>> busy;
  double free_at = 0;
  for (const Job& j : jobs) {
    const double start = std::max(free_at, j.arrival_s);
    free_at = start + j.work_s;
    busy.emplace_back(start, free_at);
  }

  int cap_level = 0;  // 0 none, 1 = 1.6 GHz, 2 = 1.0 GHz on the big cluster
  auto emit_cap = [&](uint64_t t_ms) {
    static constexpr uint32_t kCapKhz[] = {0, 1600000, 1000000};
    dl::Event e = At(t_ms);
    auto* little = e.mutable_cpu_frequency_cap()->add_clusters();
    little->set_cluster(0);
    little->set_name("little");
    auto* big = e.mutable_cpu_frequency_cap()->add_clusters();
    big->set_cluster(1);
    big->set_name("big");
    big->set_max_khz(kCapKhz[cap_level]);
    out->push_back(std::move(e));
  };
  emit_cap(0);

  size_t bi = 0;
  for (uint64_t t_ms = 0; t_ms <= duration_ms; t_ms += 1000) {
    const double t = static_cast<double>(t_ms) / 1000.0;
    dl::Event e = At(t_ms);
    const double die = model.die_celsius() + rng.Normal(0, 0.15);
    e.mutable_soc_temperature()->set_celsius(Round1(die));
    e.mutable_soc_temperature()->set_sensor("soc-die");
    out->push_back(std::move(e));

    const int before = cap_level;
    if (die >= 95)
      cap_level = 2;
    else if (die >= 85)
      cap_level = std::max(cap_level, 1);
    else if (die < 80)
      cap_level = 0;
    if (cap_level == 2 && die < 90) cap_level = 1;
    if (cap_level != before) emit_cap(t_ms);

    // Busy share of [t, t + 1).
    double busy_s = 0;
    while (bi < busy.size() && busy[bi].second <= t) ++bi;
    for (size_t k = bi; k < busy.size() && busy[k].first < t + 1; ++k) {
      busy_s += std::max(0.0, std::min(busy[k].second, t + 1) - std::max(busy[k].first, t));
    }
    thermal::RcLoad load;
    load.active_cores = 4;
    load.busy_fraction = std::clamp(busy_s, 0.0, 1.0) * (cap_level == 0 ? 1.0 : 0.6);
    if (auto a = model.SetAmbient(ambient(t)); !a) {
      return MakeError(ErrorCode::kInternal, a.error().message);
    }
    if (auto st = model.Step(1.0, load); !st) {
      return MakeError(ErrorCode::kInternal, st.error().message);
    }
  }
  return {};
}

}  // namespace ari::sim::internal
