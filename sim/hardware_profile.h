// Hardware profiles of the simulator: a head-unit SoC as data (idl/sim_hardware.proto,
// protobuf text in config/hardware/<name>.textproto; docs/hardware_profiles.md names
// the source of every figure). A profile gives model-mode replay its core counts, the
// cost model for one model size (0.5b, 1.5b, 3b), the thermal RC model and the SoC's
// own protection (hardware DVFS trip points, ReplayOptions::protection).
//
// Validation (like policies): syntax errors "origin:line:column: ..."; every semantic
// problem one line "origin:line: field: what" (the line of the offending field, else of
// its message): name set; performance.count >= 1, efficiency.count >= 0, nominal_mhz > 0
// for a class with cores; efficiency_speed in (0, 1]; thread_scaling in [0, 1];
// memory_mb > 0; cost entries (unless builtin_cost) with model, precision W4A8|W8A16,
// tps > 0, overheads >= 0, layers >= 1, threads >= 0; every model with both precisions;
// thermal R, C > 0, powers >= 0, nodes 1|2, power scale in (0, 1]; trips: celsius in
// (ambient_max_c, 150], hysteresis >= 0, clock_fraction in (0, 1], critical above passive
// with a fraction <= passive's; power_exponent >= 0.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "idl/sim_hardware.pb.h"
#include "sim/cost_model.h"
#include "sim/error.h"
#include "sim/replay.h"

namespace ari::sim {

// A trip point at or below this is refused ("trip point below ambient"): the hottest
// ambient the shipped scenarios use (summer-heat-soak, traffic-jam-heat: 45 C).
inline constexpr double kMaxAmbientCelsius = 45.0;

struct HardwareProfile {
  ari::hw::HardwareProfile proto;
  std::string origin;  // file or "<hardware>"

  const std::string& name() const { return proto.name(); }
  // Model sizes with cost figures ("0.5b", ...), in file order; empty for builtin_cost.
  std::vector<std::string> Models() const;
};

Result<HardwareProfile> ParseHardwareProfileText(std::string_view text,
                                                 std::string_view origin = "<hardware>");
Result<HardwareProfile> LoadHardwareProfile(const std::filesystem::path& path);
// NAME (config/hardware/NAME.textproto, found like the shipped policy) or a FILE path
// (contains '/' or ends in ".textproto").
Result<HardwareProfile> FindHardwareProfile(std::string_view name_or_file);

// The cost model for `model` ("" = the profile's default_model; builtin_cost: the
// compiled-in dev-VM model, any model name accepted). kInvalidArgument names the sizes
// the profile has.
Result<CostModel> ProfileCostModel(const HardwareProfile& profile, std::string_view model = "");
// RC parameters (ambient/initial come from the log at replay).
thermal::RcParams ProfileRcParams(const HardwareProfile& profile);
// Sets CPUs, RC parameters, base power and protection of `options` from the profile
// (options.cost is left to the caller: ProfileCostModel).
void ApplyHardwareProfile(const HardwareProfile& profile, ReplayOptions& options);

}  // namespace ari::sim
