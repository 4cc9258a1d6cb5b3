// Private to the node's .cc files (node.cc, node_sensors.cc): the temperature source the
// node reads through, which remembers the last reading for NodeStatus. Not part of the API.
#pragma once

#include <atomic>
#include <cmath>
#include <memory>
#include <string_view>
#include <utility>

#include "component/node/node.h"
#include "thermal/source.h"

namespace ari::component {

// Forwards to the real source and remembers the last reading for NodeStatus.
class Node::RecordingSource final : public thermal::TemperatureSource {
 public:
  RecordingSource(std::unique_ptr<thermal::TemperatureSource> inner, bool simulated)
      : inner_(std::move(inner)), simulated_(simulated) {}
  void ReadInto(thermal::Reading& out) override {
    inner_->ReadInto(out);
    celsius_.store(static_cast<float>(out.celsius));
    state_.store(static_cast<int>(out.state));
  }
  std::string_view name() const override { return inner_->name(); }
  float celsius() const { return celsius_.load(); }
  ari_SensorState wire_state() const {
    switch (static_cast<thermal::SensorState>(state_.load())) {
      case thermal::SensorState::kOk: return simulated_ ? ari_SENSOR_SIMULATED : ari_SENSOR_OK;
      case thermal::SensorState::kStale: return ari_SENSOR_STALE;
      default: return ari_SENSOR_MISSING;
    }
  }

 private:
  std::unique_ptr<thermal::TemperatureSource> inner_;
  bool simulated_;
  std::atomic<float> celsius_{NAN};
  std::atomic<int> state_{static_cast<int>(thermal::SensorState::kNoSensor)};
};

}  // namespace ari::component
