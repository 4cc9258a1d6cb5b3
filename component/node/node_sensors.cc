// The node's sensors: the temperature source the config names (libsensors, sysfs, the RC
// model, a replayed trace, the simulation's DDS environment or none) and the memory
// reading, and what NodeStatus reports of them.
#include "component/node/node_sensors.h"

#include <cmath>
#include <memory>
#include <utility>

#include "component/node/env_replay.h"
#include "component/node/node.h"
#include "component/node/node_log.h"
#include "thermal/clock.h"
#include "thermal/rc_model.h"
#include "thermal/replay_source.h"
#include "thermal/sensors_source.h"
#include "thermal/sysfs_source.h"

namespace ari::component {
namespace {

using node_internal::Log;
using node_internal::Resolve;

// Lets a shared (caller-owned) source stand where the node expects to own one.
class SharedSource final : public thermal::TemperatureSource {
 public:
  explicit SharedSource(std::shared_ptr<thermal::TemperatureSource> inner)
      : inner_(std::move(inner)) {}
  void ReadInto(thermal::Reading& out) override { inner_->ReadInto(out); }
  std::string_view name() const override { return inner_->name(); }

 private:
  std::shared_ptr<thermal::TemperatureSource> inner_;
};

}  // namespace

Result<void> Node::OpenTemperatureSource(const NodeOverrides& ov) {
  const config::NodeConfig& c = config_;
  const auto& clock = thermal::SteadyClock::Instance();
  std::unique_ptr<thermal::TemperatureSource> src;
  bool simulated = false;
  const auto kind = ov.temperature ? config::SENSOR_NONE : c.sensor().kind();
  if (kind == config::SENSOR_SENSORS || kind == config::SENSOR_AUTO) {
    auto s = thermal::SensorsSource::Open({}, clock);
    if (s && !(*s)->input_names().empty()) {
      src = std::move(*s);
    } else if (kind == config::SENSOR_SENSORS) {
      return MakeError(ErrorCode::kConfig,
                       "libsensors: " + (s ? (*s)->detail() : s.error().ToString()));
    }
  }
  if (!src && (kind == config::SENSOR_SYSFS || kind == config::SENSOR_AUTO)) {
    thermal::SysfsOptions so;
    if (!c.sensor().sysfs_root().empty()) so.root = c.sensor().sysfs_root();
    for (const auto& t : c.sensor().sysfs_types()) so.types.push_back(t);
    src = std::make_unique<thermal::SysfsSource>(so, clock);
  }
  if (kind == config::SENSOR_RC_MODEL) {
    auto m = thermal::RcModel::Create(thermal::RcParams{});
    if (!m) return MakeError(ErrorCode::kConfig, "rc model: " + m.error().ToString());
    src = std::make_unique<thermal::RcModelSource>(*m, clock);
    simulated = true;
  } else if (kind == config::SENSOR_REPLAY) {
    auto t = thermal::ReplayTrace::Load(Resolve(ov.base_dir, c.sensor().replay_csv()));
    if (!t) return MakeError(ErrorCode::kConfig, "replay: " + t.error().ToString());
    thermal::ReplayOptions ro;
    ro.loop = true;
    src = std::make_unique<thermal::ReplaySource>(std::move(*t), clock, clock.NowNs(), ro);
    simulated = true;
  } else if (kind == config::SENSOR_DDS_REPLAY) {  // simulation only (env_replay.h)
    EnvReplayOptions er;
    if (c.sensor().dds_replay_max_age_ms()) {
      er.max_age_ns = int64_t{c.sensor().dds_replay_max_age_ms()} * 1'000'000;
    }
    env_ = std::make_unique<EnvReplay>(er);
    src = env_->TemperatureSource();
    simulated = true;
  } else if (kind == config::SENSOR_NONE) {
    src.reset();
  }
  if (ov.temperature) src = std::make_unique<SharedSource>(ov.temperature);
  if (src) temperature_ = std::make_unique<RecordingSource>(std::move(src), simulated);
  return {};
}

void Node::OpenMemorySource(const NodeOverrides& ov) {
  memory_source_ = ov.memory_source;
  if (!memory_source_ && env_) {
    memory_source_ = [env = env_.get()] { return env->Memory(); };
    Log("memory and temperature from ari/v2/sim_environment (SENSOR_DDS_REPLAY)");
  } else if (memory_source_) {
    Log("memory reading injected by the caller");
  } else if (auto m = thermal::MemoryMonitor::Create(); m) {
    memory_ = std::make_unique<thermal::MemoryMonitor>(std::move(*m));
  } else {
    Log("memory monitor unavailable: %s", m.error().ToString().c_str());
  }
}

float Node::TemperatureC() const { return temperature_ ? temperature_->celsius() : NAN; }

ari_SensorState Node::SensorWireState() const {
  return temperature_ ? temperature_->wire_state() : ari_SENSOR_MISSING;
}

}  // namespace ari::component
