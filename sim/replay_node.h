// Model-mode replay internals (sim/replay.cc): one simulated node, i.e. virtual time, the
// RC model as its temperature source, the simulated engine and the real scheduler, all
// recording into one report. ReplayModel plays a whole log through one; ReplayFleet
// (sim/fleet.h) drives several, feeding each the events routed to it. Not a public API.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "qos/scheduler.h"
#include "sim/drive_log.h"
#include "sim/replay.h"
#include "sim/replay_recorder.h"
#include "sim/sim_engine.h"
#include "thermal/clock.h"
#include "thermal/rc_model.h"

namespace ari::sim::internal {

// The parts of ReplayModel a fleet replay shares (sim/replay.cc).
ReplayReport StartReplayReport(const dl::DriveLog& log, const ReplayOptions& o);
thermal::RcParams ReplayRcParams(const dl::DriveLog& log, const ReplayOptions& o);
int64_t ReplayEndNs(const dl::DriveLog& log);             // the log's duration or last event
Result<void> CheckReplayOptions(const ReplayOptions& o);  // what ReplayModel refuses
// Fills report.summary's totals and report.classes once the replay ended at end_ns.
void SummarizeReplay(int64_t end_ns, std::chrono::steady_clock::time_point wall0,
                     const QualityTable* quality, ReplayReport& report);

class ModelReplay {
 public:
  ModelReplay(const dl::DriveLog& log, const ReplayOptions& o, const thermal::RcModel& model,
              ReplayReport& report);

  Result<void> CreateScheduler();
  // Single node: steps the scheduler through the log's own events in virtual time until
  // every request ended.
  void Play();
  // Fleet: the caller feeds the events. Apply one event at the node's time `now`
  // (ambient + ambient_offset_c, memory, caps, a request routed here).
  void Apply(const dl::Event& e, int64_t now);
  // Steps until the node's clock reaches t_ns (a chunk in progress may run past it).
  void AdvanceTo(int64_t t_ns);
  // Steps until the log's end and every request here ended (or a day past the end).
  void RunOut();
  // Closes the accounts and shuts the scheduler down; returns the virtual time.
  int64_t Finish();

  void set_ambient_offset_c(double c) { ambient_offset_c_ = c; }
  int64_t now_ns() const { return clock_.NowNs(); }
  const qos::Scheduler& scheduler() const { return *sched_; }
  const Recorder& recorder() const { return rec_; }
  double die_celsius() const { return source_.model().die_celsius(); }
  int slots() const { return o_.slots; }

 private:
  struct StepOut {
    bool ran = false;
    int64_t next_ns = 0;  // when the node next needs a step (its own schedule, samples)
  };
  // One scheduler step at the clock's time (protection, samples, the step itself).
  StepOut StepNow();
  void ApplyEvents(int64_t now);
  // The SoC's protection: trip level from the die temperature, caps and power factor.
  void UpdateProtection();
  void ApplyCaps();
  void SubmitRequest(const dl::Event& e, int64_t now);

  const dl::DriveLog& log_;
  const ReplayOptions& o_;
  ReplayReport& report_;
  thermal::ManualClock clock_;
  thermal::RcModelSource source_;
  const thermal::CpuTopology topo_;
  Recorder rec_;
  SimEngine engine_;
  std::optional<uint64_t> mem_bytes_;
  std::unique_ptr<qos::Scheduler> sched_;
  int64_t end_ns_ = 0;
  int next_event_ = 0;
  std::array<uint32_t, 2> log_caps_{};
  double ambient_offset_c_ = 0;
};

}  // namespace ari::sim::internal
