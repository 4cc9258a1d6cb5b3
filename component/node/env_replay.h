// Environment replay for simulation: the node side of topic ari/v2/sim_environment.
//
// A node configured with sensor { kind: SENSOR_DDS_REPLAY } (and only such a node)
// creates an EnvReplay: a receive thread waits on a DDS waitset for SimEnvironment
// samples (from `ari-sim replay --mode live`) and keeps the latest one. The governor
// then reads
//  - its temperature through TemperatureSource() ("dds-replay"): the last sample's
//    soc_temperature_c, validated like every other source (thermal/source.h): kOk while
//    the last sample is younger than max_age (by the node's clock at reception), kStale
//    after that, kNoSensor before the first sample with a temperature, kInvalid for an
//    out-of-range value;
//  - its available memory through Memory(): the last sample's memory_available_bytes
//    while fresh; the node's own MemoryMonitor when the sample says 0 (unknown); none
//    (the ladder keeps its band) when the samples went stale.
// Ambient and CPU frequency caps are kept (Latest()) but not used by the node: the
// governor has no input for them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "ari.h"
#include "component/client/dds.h"
#include "component/client/error.h"
#include "component/client/subscription.h"
#include "thermal/clock.h"
#include "thermal/memory_monitor.h"
#include "thermal/source.h"

namespace ari::component {

struct EnvSnapshot {
  bool has_sample = false;
  uint32_t seq = 0;
  uint64_t log_time_ms = 0;
  double soc_celsius = 0;      // NaN: the simulator has no temperature yet
  double ambient_celsius = 0;  // NaN: unknown
  uint64_t memory_available_bytes = 0;
  uint32_t cpu_freq_cap_khz[ari_kMaxFreqClusters] = {};
  int64_t received_ns = 0;  // node clock at reception
  uint64_t samples = 0;     // samples received so far
};

struct EnvReplayOptions {
  const thermal::Clock* clock = nullptr;  // null: the steady clock
  int64_t max_age_ns = thermal::kDefaultMaxAgeNs;
  bool memory_fallback = true;  // use a MemoryMonitor when samples carry no memory
  std::function<void(const EnvSnapshot&)> on_sample;  // after each sample (receive thread)
};

class EnvReplay {
 public:
  explicit EnvReplay(const EnvReplayOptions& options);
  ~EnvReplay();
  EnvReplay(const EnvReplay&) = delete;
  EnvReplay& operator=(const EnvReplay&) = delete;

  // Subscribes to ari/v2/sim_environment on `domain` and starts the receive thread.
  Result<void> Start(std::shared_ptr<dds::Domain> domain);
  void Stop();  // joins the thread (idempotent; the destructor calls it)

  // Takes one sample (the receive thread calls this; tests may too).
  void Apply(const ari_SimEnvironment& sample);

  // A temperature source over the latest sample; it shares the state, so it may
  // outlive this object (it then reads stale).
  std::unique_ptr<thermal::TemperatureSource> TemperatureSource() const;
  std::optional<thermal::MemoryReading> Memory() const;
  EnvSnapshot Latest() const;

 private:
  struct State;

  EnvReplayOptions options_;
  std::shared_ptr<State> state_;
  std::optional<thermal::MemoryMonitor> monitor_;
  dds::Subscription subscription_;  // last member: its thread stops first
};

}  // namespace ari::component
