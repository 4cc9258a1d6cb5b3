// Scenario generators: synthetic drive logs, deterministic per seed (sim/prng.h).
//
// Every scenario emits, over [0, duration]:
//   - vehicle_state every 5 s (speed, ignition, gear) from a per-scenario
//     driving pattern (city stop-and-go, highway, mountain curves, parking);
//   - ambient_temperature every 10 s from the scenario's ambient profile;
//   - soc_temperature ("soc-die") every 1 s: the thermal RC model
//     (thermal/rc_model.h, default parameters, 2 nodes) driven by the
//     scenario's ambient, a base power for the rest of the SoC and the load of
//     the generated requests served one at a time (prefill 2 ms per prompt
//     byte / 4, decode 40 ms per token, 4 performance cores at W8A16);
//   - cpu_frequency_cap when a platform thermal manager would change its cap
//     (big cluster 1.6 GHz at 85 C, 1.0 GHz at 95 C, released below 80 C);
//   - memory_available every 1 s (baseline with noise; squeeze waves in
//     memory-squeeze);
//   - requests: Poisson arrivals per prompt category with time-varying rates
//     (thinning), prompts drawn uniformly from the category:
//       NAVIGATION -> CRITICAL, client "nav", deadline 1.5..3 s
//       VEHICLE_FUNCTIONS -> HIGH, client "vehicle", deadline 3..5 s
//       CHAT -> NORMAL, client "assistant", conversations share a session id
//       EXPLANATION -> NORMAL, client "assistant"
//       SUMMARY -> BACKGROUND, client "summarizer"
//     (deadline 0 = the policy's class default for the last three).
// Events are merged in time order (ties: vehicle, ambient, cap, soc, memory,
// request); request ids count 1, 2, ... in time order. docs/drive_logs.md
// describes each scenario.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "idl/drive_log.pb.h"
#include "sim/error.h"

namespace ari::sim {

struct ScenarioInfo {
  std::string_view name;
  std::string_view description;
};

// The scenarios, in a fixed order.
std::span<const ScenarioInfo> Scenarios();

inline constexpr uint64_t kMaxScenarioDurationMs = 24ull * 3600 * 1000;

struct ScenarioOptions {
  std::string scenario;                   // a name from Scenarios()
  uint64_t duration_ms = 3600ull * 1000;  // 1 s .. 24 h
  uint64_t seed = 1;
  const ari::drivelog::PromptSet* prompts = nullptr;  // nullptr: the built-in set
};

// The generator's SoC base power (W) for a scenario: everything but inference, i.e.
// thermal::RcParams::idle_power_w of its world. Model-mode replay uses it for logs the
// generator wrote. Unknown names: the RcParams default.
double ScenarioBasePowerW(std::string_view scenario);

// A valid, time-ordered log. kInvalidArgument for an unknown scenario, a
// duration out of range or a prompt set lacking a category the scenario uses.
Result<ari::drivelog::DriveLog> GenerateScenario(const ScenarioOptions& options);

// "90s", "30m", "1h", "1500ms", "1h30m", "2.5h" -> milliseconds (> 0).
Result<uint64_t> ParseDuration(std::string_view text);

}  // namespace ari::sim
