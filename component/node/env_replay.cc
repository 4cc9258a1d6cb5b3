// Environment replay (simulation only); see env_replay.h.
#include "component/node/env_replay.h"

#include <cmath>
#include <cstdio>
#include <mutex>

namespace ari::component {
namespace {

const thermal::Clock& ClockOf(const EnvReplayOptions& o) {
  return o.clock ? *o.clock : thermal::SteadyClock::Instance();
}

}  // namespace

struct EnvReplay::State {
  mutable std::mutex mutex;
  EnvSnapshot latest;
};

namespace {

class DdsReplaySource final : public thermal::TemperatureSource {
 public:
  DdsReplaySource(std::shared_ptr<const void> keep, std::mutex* mutex, const EnvSnapshot* latest,
                  const thermal::Clock& clock, int64_t max_age_ns)
      : keep_(std::move(keep)),
        mutex_(mutex),
        latest_(latest),
        clock_(clock),
        validator_(thermal::ValidationLimits{.max_age_ns = max_age_ns}) {}

  void ReadInto(thermal::Reading& out) override {
    bool has = false;
    double celsius = NAN;
    int64_t received = 0;
    {
      std::lock_guard<std::mutex> l(*mutex_);
      has = latest_->has_sample;
      celsius = latest_->soc_celsius;
      received = latest_->received_ns;
    }
    const int64_t now = clock_.NowNs();
    thermal::Validated v;
    if (has && !std::isnan(celsius)) {
      v = validator_.Observe(thermal::RawStatus::kValue, celsius, received, now);
    } else if (has) {
      v = validator_.Observe(thermal::RawStatus::kNoNewValue, 0, now, now);
    } else {
      v = validator_.Observe(thermal::RawStatus::kMissing, 0, now, now);
    }
    out.celsius = v.celsius;
    out.state = v.state;
    out.time_ns = v.time_ns;
    out.source.assign("dds-replay");
  }
  std::string_view name() const override { return "dds-replay"; }

 private:
  std::shared_ptr<const void> keep_;  // keeps the shared state alive
  std::mutex* mutex_;
  const EnvSnapshot* latest_;
  const thermal::Clock& clock_;
  thermal::ReadingValidator validator_;
};

}  // namespace

EnvReplay::EnvReplay(const EnvReplayOptions& options)
    : options_(options), state_(std::make_shared<State>()) {
  if (options_.memory_fallback) {
    if (auto m = thermal::MemoryMonitor::Create(); m) monitor_.emplace(std::move(*m));
  }
}

EnvReplay::~EnvReplay() { Stop(); }

Result<void> EnvReplay::Start(std::shared_ptr<dds::Domain> domain) {
  return subscription_.Start(
      std::move(domain), dds::TopicKind::kSimEnvironment,
      [this](const void* s) { Apply(*static_cast<const ari_SimEnvironment*>(s)); }, "env replay");
}

void EnvReplay::Stop() { subscription_.Stop(); }

void EnvReplay::Apply(const ari_SimEnvironment& s) {
  const int64_t now = ClockOf(options_).NowNs();
  std::lock_guard<std::mutex> l(state_->mutex);
  EnvSnapshot& e = state_->latest;
  e.has_sample = true;
  e.seq = s.seq;
  e.log_time_ms = s.log_time_ms;
  e.soc_celsius = s.soc_temperature_c;
  e.ambient_celsius = s.ambient_c;
  e.memory_available_bytes = s.memory_available_bytes;
  for (int i = 0; i < ari_kMaxFreqClusters; ++i) e.cpu_freq_cap_khz[i] = s.cpu_freq_cap_khz[i];
  e.received_ns = now;
  ++e.samples;
  if (options_.on_sample) options_.on_sample(e);
}

std::unique_ptr<thermal::TemperatureSource> EnvReplay::TemperatureSource() const {
  return std::make_unique<DdsReplaySource>(state_, &state_->mutex, &state_->latest,
                                           ClockOf(options_), options_.max_age_ns);
}

std::optional<thermal::MemoryReading> EnvReplay::Memory() const {
  const EnvSnapshot e = Latest();
  const int64_t now = ClockOf(options_).NowNs();
  if (e.has_sample && e.memory_available_bytes > 0) {
    if (now - e.received_ns > options_.max_age_ns) return std::nullopt;  // stale
    thermal::MemoryReading m;
    m.available_bytes = e.memory_available_bytes;
    m.system_available_bytes = e.memory_available_bytes;
    return m;
  }
  if (!monitor_) return std::nullopt;
  auto r = monitor_->Read();
  if (!r) return std::nullopt;
  return *r;
}

EnvSnapshot EnvReplay::Latest() const {
  std::lock_guard<std::mutex> l(state_->mutex);
  return state_->latest;
}

}  // namespace ari::component
