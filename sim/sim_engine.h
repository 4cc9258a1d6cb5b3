// A simulated engine for model-mode replay: implements runtime::ChunkRunner with the
// cost model, in virtual time. RunChunk advances the ManualClock by the modeled chunk
// duration (so the scheduler sees the chunk take that long) and tells an observer when
// the chunk starts and ends (the replay drives the RC thermal model with it).
//
// Tokens: prefill consumes the turn's prompt in chunks of at most knobs.prefill_tokens;
// decode emits knobs.decode_tokens per chunk (token id 1, no text) until the turn's
// max_tokens (no end-of-generation token in model mode: answers run to max_tokens, or to
// output_cap). Buffers are allocated once; RunChunk does not allocate.
//
// Slot parking: `park_areas` areas; ParkSlot/ResumeParked move a slot's turn state and
// each advance the clock by CostModel::ParkSeconds(the turn's KV positions) (observer
// ticks included, no chunk: the copy is not modeled as heat).
//
// Parked sessions on disk: SpillSlot keeps an idle slot's session (its KV positions) in a
// preallocated table (64 sessions; the oldest is forgotten when full) and advances the
// clock by CostModel::SpillSeconds; RestoreSession brings it back into a slot for
// CostModel::RestoreSeconds. ari-tune thus weighs the ladder's spill_idle_sessions.
// Parked turns on disk (the ladder's park_to_disk): OffloadParked charges
// CostModel::SpillSeconds(the turn's positions) and the turn's resume
// CostModel::RestoreSeconds on top of the park cost.
//
// CPU frequency caps: SetFrequencyCaps() sets the cap in force per cluster class; a
// chunk's duration uses the cap of its class at the chunk's start (CostModel::
// FrequencyFactor), a cap changing during the chunk does not affect it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "sim/cost_model.h"
#include "thermal/clock.h"

namespace ari::sim {

class ChunkObserver {
 public:
  virtual ~ChunkObserver() = default;
  // Before the clock advances by `seconds` for this chunk / after it did. `efficiency`:
  // the chunk runs on efficiency cores; `cap_khz`: the frequency cap of that class in
  // force at its start (0 none; `seconds` includes its effect).
  virtual void OnChunkBegin(const runtime::ChunkKnobs& knobs, runtime::ChunkPhase phase, int tokens,
                            double seconds, bool efficiency, uint32_t cap_khz) = 0;
  virtual void OnChunkEnd() = 0;
  // The clock advances through a chunk in pieces ending at most at NextTickNs(); OnTick()
  // is called after each piece (the replay samples the temperature there).
  virtual int64_t NextTickNs() const { return INT64_MAX; }
  virtual void OnTick() {}
};

class SimEngine final : public runtime::ChunkRunner {
 public:
  // `efficiency_mask`: CPUs of the efficiency class (bit i = CPU i); a chunk whose
  // cpu_mask lies within it runs at the cost model's efficiency speed.
  SimEngine(const CostModel& cost, thermal::ManualClock& clock, int32_t slots,
            uint64_t efficiency_mask, ChunkObserver* observer, int32_t max_output = 4096,
            int32_t park_areas = 0);

  int32_t num_slots() const override { return static_cast<int32_t>(slots_.size()); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& turn) override;
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& knobs) override;
  int32_t num_park_areas() const override { return static_cast<int32_t>(parks_.size()); }
  runtime::Result<runtime::ParkId> ParkSlot(int32_t slot) override;
  runtime::Result<void> ResumeParked(runtime::ParkId id, int32_t slot) override;
  void DropParked(runtime::ParkId id) override;
  runtime::Result<uint64_t> SpillSlot(int32_t slot, uint64_t session) override;
  runtime::Result<bool> RestoreSession(int32_t slot, uint64_t session,
                                       std::string* rejected) override;
  uint64_t ReleaseSlotPages(int32_t slot) override;
  runtime::Result<uint64_t> OffloadParked(runtime::ParkId id) override;

  // CPU frequency caps in kHz (0 = uncapped) from now on, per cluster class.
  void SetFrequencyCaps(uint32_t performance_khz, uint32_t efficiency_khz) {
    cap_performance_khz_ = performance_khz;
    cap_efficiency_khz_ = efficiency_khz;
  }

  double busy_seconds() const { return busy_s_; }
  int64_t chunks() const { return chunks_; }
  int64_t parks() const { return parks_done_; }
  int64_t resumes() const { return resumes_done_; }
  double park_seconds() const { return park_s_; }  // parks + resumes
  int64_t spills() const { return spills_done_; }
  int64_t restores() const { return restores_done_; }
  double spill_seconds() const { return spill_s_; }  // spills + restores (+ parked turns')
  int64_t parks_offloaded() const { return parks_offloaded_; }

 private:
  struct Slot {
    int32_t prompt_left = 0;
    int32_t max_tokens = 0;
    int32_t generated = 0;
    int32_t position = 0;
    bool active = false;
    bool masked = false;  // decode under a response format: charged the mask cost
  };
  struct ParkArea {
    Slot state;
    bool used = false;
    bool on_disk = false;  // OffloadParked: the resume also pays the restore
  };
  void Advance(double seconds);  // clock + observer ticks

  const CostModel& cost_;
  thermal::ManualClock& clock_;
  std::vector<Slot> slots_;
  std::vector<ParkArea> parks_;
  int64_t parks_done_ = 0, resumes_done_ = 0, parks_offloaded_ = 0;
  double park_s_ = 0;
  struct Spilled {
    uint64_t session = 0;  // 0 = free entry
    int32_t position = 0;
    int64_t seq = 0;
  };
  std::vector<Spilled> spilled_ = std::vector<Spilled>(64);
  int64_t spills_done_ = 0, restores_done_ = 0;
  double spill_s_ = 0;
  uint64_t efficiency_mask_;
  ChunkObserver* observer_;
  std::vector<runtime::TokenId> tokens_;  // max_output ids, all 1
  double busy_s_ = 0;
  int64_t chunks_ = 0;
  uint32_t cap_performance_khz_ = 0, cap_efficiency_khz_ = 0;
};

}  // namespace ari::sim
