// Internal building blocks of the scenario generators (sim/scenarios.h):
// driving pattern, memory availability, SoC temperature and CPU frequency caps.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "idl/drive_log.pb.h"
#include "sim/error.h"
#include "sim/prng.h"

namespace ari::sim::internal {

namespace dl = ari::drivelog;

enum class DrivePattern { kCity, kHighway, kMountain };

struct DriveSpec {
  DrivePattern pattern = DrivePattern::kCity;
  double depart_s = 10;        // leaves PARK for DRIVE at this time
  bool cold_ignition = false;  // OFF -> ACCESSORY (2 s) -> CRANKING (5 s) -> ON (6 s)
};
// vehicle_state every 5 s over [0, duration]; the car stops and parks in the last 30 s.
void GenerateVehicle(const DriveSpec& spec, uint64_t duration_ms, Prng& rng,
                     std::vector<dl::Event>* out);

struct MemorySpec {
  uint64_t baseline_bytes = 2560ull << 20;  // typical available memory
  bool squeeze = false;                     // another app takes memory in waves
};
// memory_available every 1 s over [0, duration].
void GenerateMemory(const MemorySpec& spec, uint64_t duration_ms, Prng& rng,
                    std::vector<dl::Event>* out);

// One request's demand on the SoC: arrival time and service time, in seconds.
struct Job {
  double arrival_s = 0;
  double work_s = 0;
};

struct SocSpec {
  double initial_celsius = 25;
  double base_power_w = 1.5;  // everything but inference (RcParams::idle_power_w)
};
// soc_temperature every 1 s and cpu_frequency_cap on changes (one at t = 0).
// `ambient` gives the true ambient (C) at a time (s); jobs sorted by arrival.
Result<void> GenerateSoc(const SocSpec& spec, const std::function<double(double)>& ambient,
                         std::span<const Job> jobs, uint64_t duration_ms, Prng& rng,
                         std::vector<dl::Event>* out);

// Rounds to one decimal (sensor resolution), turning -0.0 into 0.0.
double Round1(double v);

}  // namespace ari::sim::internal
