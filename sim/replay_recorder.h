// Model-mode replay internals (sim/replay.cc): the recorder every scheduler callback
// and the simulated engine's observer feed into; it keeps the RC model's load, the
// power, band, cap and hardware-trip accounts and the timeline samples. Not a public API.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "qos/scheduler.h"
#include "sim/replay.h"
#include "sim/sim_engine.h"
#include "thermal/clock.h"
#include "thermal/rc_model.h"

namespace ari::sim::internal {

inline double NsToS(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// Everything the scheduler's callbacks and the engine observer feed into.
class Recorder final : public qos::ChunkSink, public ChunkObserver {
 public:
  Recorder(const ReplayOptions& o, thermal::ManualClock& clock, thermal::RcModelSource& rc,
           const thermal::CpuTopology& topo, ReplayReport& report)
      : o_(o),
        clock_(clock),
        rc_(rc),
        report_(report),
        idle_power_w_(rc.model().PowerW(thermal::RcLoad{})),
        power_w_(idle_power_w_),
        last_power_ns_(clock.NowNs()) {
    for (int c : topo.efficiency) eff_mask_ |= uint64_t{1} << c;
    const size_t nb = o.policy->thermal_bands.size();
    report_.summary.band_time_s.assign(nb, 0.0);
    report_.summary.drop_busy_s.assign(1, 0.0);
    report_.summary.drop_tokens.assign(1, 0);
  }

  uint64_t efficiency_mask() const { return eff_mask_; }
  std::unordered_map<uint64_t, size_t> index;  // request id -> report_.requests index
  std::vector<int64_t> submit_ns, arrival_ns;  // by index

  // --- ChunkObserver: the RC load follows the chunks.
  void OnChunkBegin(const runtime::ChunkKnobs& k, runtime::ChunkPhase phase, int tokens,
                    double seconds, bool eff, uint32_t cap_khz) override {
    thermal::RcLoad load;
    load.busy_fraction = hw_power_factor_;  // hardware DVFS: less dynamic power
    load.active_cores = std::max(1, k.threads);
    load.precision = k.precision == runtime::Precision::kW4A8 ? thermal::PowerPrecision::kW4A8
                                                              : thermal::PowerPrecision::kW8A16;
    load.core_class = eff ? thermal::CoreClass::kEfficiency : thermal::CoreClass::kPerformance;
    AccountPower();
    rc_.SetLoad(load);
    power_w_ = rc_.model().PowerW(load);
    ReplaySummary& s = report_.summary;
    const int p = k.precision == runtime::Precision::kW4A8 ? 1 : 0;
    s.precision_busy_s[p] += seconds;
    s.precision_tokens[p] += tokens;
    const size_t d = static_cast<size_t>(std::max(0, k.layer_drop));
    if (s.drop_busy_s.size() <= d) {
      s.drop_busy_s.resize(d + 1, 0.0);
      s.drop_tokens.resize(d + 1, 0);
    }
    s.drop_busy_s[d] += seconds;
    s.drop_tokens[d] += tokens;
    auto& pd = s.precision_drop_tokens[static_cast<size_t>(p)];
    if (pd.size() <= d) pd.resize(d + 1, 0);
    pd[d] += tokens;
    s.busy_s += seconds;
    ++s.chunks;
    if (cap_khz != 0 && o_.cost->FrequencyFactor(phase, eff, cap_khz) != 1.0) {
      s.capped_busy_s[eff ? 1 : 0] += seconds;
    }
    if (o_.on_chunk) {
      ChunkTrace t;
      t.t_s = NsToS(clock_.NowNs());
      t.knobs = k;
      t.phase = phase;
      t.tokens = tokens;
      t.seconds = seconds;
      t.efficiency = eff;
      t.cap_khz = cap_khz;
      o_.on_chunk(t);
    }
    in_chunk_ = true;
    chunk_end_ns_ = clock_.NowNs() + std::max<int64_t>(1, thermal::SecondsToNs(seconds));
  }
  void OnChunkEnd() override {
    in_chunk_ = false;
    AccountPower();
    rc_.SetLoad(thermal::RcLoad{});
    power_w_ = idle_power_w_;
    Peak();
  }

  // Energy: integral of the constant power since the last change.
  void AccountPower() {
    const int64_t now = clock_.NowNs();
    report_.summary.energy_j += power_w_ * NsToS(now - last_power_ns_);
    last_power_ns_ = now;
  }
  void Peak() {
    rc_.AdvanceToNow();
    const double t = rc_.model().die_celsius();
    if (t > report_.summary.peak_die_c) {
      report_.summary.peak_die_c = t;
      report_.summary.peak_t_s = NsToS(clock_.NowNs());
    }
  }
  // Frequency caps in force from now on ([0] performance, [1] efficiency).
  void SetCaps(const std::array<uint32_t, 2>& caps) {
    AccountCaps();
    caps_ = caps;
  }
  void AccountCaps() {
    const int64_t now = clock_.NowNs();
    for (size_t c = 0; c < 2; ++c) {
      if (caps_[c] != 0) report_.summary.cap_time_s[c] += NsToS(now - last_cap_ns_);
    }
    last_cap_ns_ = now;
  }
  // Hardware trip level (0 none, 1 passive, 2 critical) from now on.
  void SetHwLevel(int level, double power_factor) {
    AccountHw();
    if (level > hw_level_) ++report_.summary.hw_throttle_events;
    hw_level_ = level;
    hw_power_factor_ = power_factor;
  }
  void AccountHw() {
    const int64_t now = clock_.NowNs();
    const double dt = NsToS(now - last_hw_ns_);
    if (hw_level_ >= 1) report_.summary.hw_throttle_s += dt;
    if (hw_level_ >= 2) report_.summary.hw_critical_s += dt;
    last_hw_ns_ = now;
  }
  int hw_level() const { return hw_level_; }
  // Band and memory-band time up to now.
  void AccountBands() {
    const int64_t now = clock_.NowNs();
    const double dt = NsToS(now - last_band_ns_);
    report_.summary.band_time_s[static_cast<size_t>(band_)] += dt;
    if (memory_band_ >= 0) report_.summary.memory_band_time_s += dt;
    last_band_ns_ = now;
  }

  // --- Timeline samples every sample period (also inside chunks).
  int64_t NextTickNs() const override { return next_sample_; }
  void OnTick() override {
    if (clock_.NowNs() >= next_sample_) TakeSample();
  }
  int64_t next_sample() const { return next_sample_; }
  void TakeSample() {
    const int64_t now = clock_.NowNs();
    Peak();
    AccountBands();
    AccountPower();
    if (o_.record_samples) {
      Sample sm;
      sm.t_s = NsToS(now);
      sm.die_c = rc_.model().die_celsius();
      sm.ambient_c = rc_.model().ambient_celsius();
      sm.power_w = power_w_;
      sm.band = band_;
      const double span = NsToS(now - last_sample_ns_);
      // Busy share since the last sample; a chunk in progress counts up to now.
      double busy = report_.summary.busy_s - busy_at_sample_;
      if (in_chunk_) busy -= NsToS(chunk_end_ns_ - now);
      sm.busy = span > 0 ? std::clamp(busy / span, 0.0, 1.0) : 0;
      report_.samples.push_back(sm);
      busy_at_sample_ = report_.summary.busy_s - (in_chunk_ ? NsToS(chunk_end_ns_ - now) : 0.0);
    }
    last_sample_ns_ = now;
    const int64_t period = o_.sample_period_ms * thermal::kNsPerMs;
    while (next_sample_ <= now) next_sample_ += period;
  }

  // --- ChunkSink
  void OnChunk(const qos::ChunkEvent&) override {}
  void OnTerminal(const qos::TerminalEvent& t) override {
    auto it = index.find(t.id);
    if (it == index.end()) return;
    RequestReport& r = report_.requests[it->second];
    const int64_t sub = submit_ns[it->second], arr = arrival_ns[it->second];
    r.status = std::string(qos::TerminalStatusName(t.status));
    r.message = std::string(t.message);
    r.tokens = t.tokens_generated;
    if (t.queue_wait_ns >= 0) r.queue_wait_s = NsToS(sub + t.queue_wait_ns - arr);
    if (t.first_token_ns >= 0) r.ttft_s = NsToS(sub + t.first_token_ns - arr);
    r.completion_s = NsToS(clock_.NowNs() - arr);
    // NodeStatus.decode_tokens_per_s as ari-node keeps it (node_stream.cc): EWMA, weight
    // 1/4, of the rate of turns of more than 8 tokens (first token to the end).
    if (t.tokens_generated > 8 && t.first_token_ns >= 0) {
      const double s = NsToS(clock_.NowNs() - (sub + t.first_token_ns));
      if (s > 0) {
        const double rate = (t.tokens_generated - 1) / s;
        decode_tokens_per_s_ =
            decode_tokens_per_s_ > 0 ? 0.75 * decode_tokens_per_s_ + 0.25 * rate : rate;
      }
    }
    r.deadline_missed = t.status != qos::TerminalStatus::kDone || t.deadline_missed ||
                        (r.deadline_s > 0 && r.completion_s > r.deadline_s + 1e-9);
  }
  void OnDecision(const qos::Decision& d, int64_t now_ns) override {
    AccountBands();
    band_ = d.thermal_band;
    memory_band_ = d.memory_band;
    last_reason_.assign(d.Reason());
    if (o_.record_decisions) report_.decisions.push_back(Record(d, now_ns));
  }
  void OnPark(const qos::ParkEvent& e) override {
    ReplaySummary& m = report_.summary;
    if (e.kind == qos::ParkEventKind::kParked) ++m.parks;
    if (e.kind == qos::ParkEventKind::kResumed) ++m.resumes;
    m.park_s += NsToS(e.duration_ns);
  }
  void OnStep(const qos::StepInfo& s) override {
    auto it = index.find(s.id);
    if (it == index.end()) return;
    RequestReport& r = report_.requests[it->second];
    ++r.chunks;
    r.mask_s += NsToS(s.ran.mask_ns);
    report_.summary.mask_s += NsToS(s.ran.mask_ns);
    report_.summary.masked_tokens += s.ran.masked_tokens;
    if (!o_.record_decisions) return;
    char buf[200];
    const qos::Decision& d = *last_decision_;
    qos::FormatKnobs(d.knobs, buf, sizeof(buf));
    if (r.decisions.empty() || r.decisions.back().knobs != buf ||
        r.decisions.back().band != d.thermal_band) {
      r.decisions.push_back(Record(d, s.start_ns));
    }
  }

  DecisionRecord Record(const qos::Decision& d, int64_t now_ns) const {
    DecisionRecord rec;
    rec.t_s = NsToS(now_ns);
    rec.urgency = std::string(qos::UrgencyName(d.urgency));
    rec.idle = d.idle;
    rec.band = d.thermal_band;
    rec.memory_band = d.memory_band;
    rec.conservative = d.conservative;
    rec.knobs = qos::KnobsToString(d.knobs);
    rec.reason = std::string(d.Reason());
    return rec;
  }

  const qos::Decision* last_decision_ = nullptr;
  int band() const { return band_; }
  int memory_band() const { return memory_band_; }
  double decode_tokens_per_s() const { return decode_tokens_per_s_; }
  double power_w() const { return power_w_; }

 private:
  const ReplayOptions& o_;
  thermal::ManualClock& clock_;
  thermal::RcModelSource& rc_;
  ReplayReport& report_;
  uint64_t eff_mask_ = 0;
  double idle_power_w_ = 0, power_w_ = 0;
  int64_t last_power_ns_ = 0, last_band_ns_ = 0, last_cap_ns_ = 0, last_hw_ns_ = 0;
  int hw_level_ = 0;
  double hw_power_factor_ = 1.0;
  std::array<uint32_t, 2> caps_{};
  int band_ = 0, memory_band_ = -1;
  double decode_tokens_per_s_ = 0;
  std::string last_reason_;
  int64_t next_sample_ = 0, last_sample_ns_ = 0, chunk_end_ns_ = 0;
  double busy_at_sample_ = 0;
  bool in_chunk_ = false;
};

}  // namespace ari::sim::internal
