// Simulated engine; see sim_engine.h.
#include "sim/sim_engine.h"

#include <algorithm>
#include <cmath>

namespace ari::sim {

SimEngine::SimEngine(const CostModel& cost, thermal::ManualClock& clock, int32_t slots,
                     uint64_t efficiency_mask, ChunkObserver* observer, int32_t max_output,
                     int32_t park_areas)
    : cost_(cost),
      clock_(clock),
      slots_(static_cast<size_t>(std::max(1, slots))),
      parks_(static_cast<size_t>(std::max(0, park_areas))),
      efficiency_mask_(efficiency_mask),
      observer_(observer),
      tokens_(static_cast<size_t>(std::max(1, max_output)), 1) {}

runtime::Result<void> SimEngine::StartTurn(int32_t slot, const runtime::TurnSpec& turn) {
  if (slot < 0 || slot >= num_slots()) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "sim engine: bad slot");
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!turn.keep_context) s.position = 0;
  s.prompt_left = static_cast<int32_t>(turn.prompt.size());
  s.max_tokens = std::clamp<int32_t>(turn.max_tokens, 1, static_cast<int32_t>(tokens_.size()));
  s.generated = 0;
  s.masked = turn.masked;
  s.active = true;
  return {};
}

runtime::Result<runtime::ChunkResult> SimEngine::RunChunk(int32_t slot,
                                                          const runtime::ChunkKnobs& knobs) {
  if (slot < 0 || slot >= num_slots() || !slots_[static_cast<size_t>(slot)].active) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "sim engine: no turn in slot");
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  runtime::ChunkResult r;
  r.precision = knobs.precision;
  r.isa = knobs.max_isa;
  r.threads = std::max(1, knobs.threads);
  r.layers_dropped = knobs.layer_drop;
  r.kv_type = knobs.kv_type;
  r.cpus_ran = knobs.cpu_mask;  // simulated: it runs as decided
  r.threads_ran = r.threads;
  int32_t n = 0;
  if (s.prompt_left > 0) {
    n = std::min(s.prompt_left, std::max(1, knobs.prefill_tokens));
    s.prompt_left -= n;
    r.phase = runtime::ChunkPhase::kPrefill;
    r.prompt_tokens = n;
    r.prompt_remaining = s.prompt_left;
  } else {
    int32_t limit = s.max_tokens;
    if (knobs.output_cap > 0) limit = std::min(limit, knobs.output_cap);
    n = std::clamp(std::min(std::max(1, knobs.decode_tokens), limit - s.generated), 0,
                   static_cast<int32_t>(tokens_.size()));
    r.phase = runtime::ChunkPhase::kDecode;
    s.generated += n;
    r.tokens = std::span<const runtime::TokenId>(tokens_.data(), static_cast<size_t>(n));
    r.finished = s.generated >= limit;
    r.stop_reason = runtime::StopReason::kMaxTokens;
    if (r.finished) s.active = false;
  }
  s.position += n;
  const bool eff = knobs.cpu_mask != 0 && (knobs.cpu_mask & ~efficiency_mask_) == 0;
  const uint32_t cap = eff ? cap_efficiency_khz_ : cap_performance_khz_;
  double sec = cost_.ChunkSeconds(knobs, r.phase, n, eff, cap);
  if (s.masked && r.phase == runtime::ChunkPhase::kDecode) {
    const double mask_s = cost_.MaskSeconds(n, eff, cap);
    sec += mask_s;
    r.masked_tokens = n;
    r.mask_ns = thermal::SecondsToNs(mask_s);
  }
  const int64_t ns = std::max<int64_t>(1, thermal::SecondsToNs(sec));
  const int64_t end = clock_.NowNs() + ns;
  if (observer_) observer_->OnChunkBegin(knobs, r.phase, n, sec, eff, cap);
  while (clock_.NowNs() < end) {
    int64_t until = observer_ ? std::min(end, observer_->NextTickNs()) : end;
    if (until <= clock_.NowNs()) until = end;
    clock_.SetNs(until);
    if (observer_) observer_->OnTick();
  }
  if (observer_) observer_->OnChunkEnd();
  r.compute_ns = ns;
  busy_s_ += static_cast<double>(ns) * 1e-9;
  ++chunks_;
  return r;
}

void SimEngine::Advance(double seconds) {
  const int64_t end = clock_.NowNs() + std::max<int64_t>(0, thermal::SecondsToNs(seconds));
  while (clock_.NowNs() < end) {
    int64_t until = observer_ ? std::min(end, observer_->NextTickNs()) : end;
    if (until <= clock_.NowNs()) until = end;
    clock_.SetNs(until);
    if (observer_) observer_->OnTick();
  }
}

runtime::Result<runtime::ParkId> SimEngine::ParkSlot(int32_t slot) {
  if (slot < 0 || slot >= num_slots() || !slots_[static_cast<size_t>(slot)].active) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "sim engine: no turn in slot");
  }
  for (size_t i = 0; i < parks_.size(); ++i) {
    if (parks_[i].used) continue;
    Slot& s = slots_[static_cast<size_t>(slot)];
    parks_[i] = ParkArea{s, true};
    const double sec = cost_.ParkSeconds(s.position);
    s = Slot{};
    Advance(sec);
    park_s_ += sec;
    ++parks_done_;
    return static_cast<runtime::ParkId>(i);
  }
  return runtime::MakeError(runtime::ErrorCode::kOutOfMemory, "sim engine: park areas full");
}

runtime::Result<void> SimEngine::ResumeParked(runtime::ParkId id, int32_t slot) {
  if (id < 0 || static_cast<size_t>(id) >= parks_.size() || !parks_[static_cast<size_t>(id)].used ||
      slot < 0 || slot >= num_slots()) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "sim engine: bad park id/slot");
  }
  ParkArea& a = parks_[static_cast<size_t>(id)];
  slots_[static_cast<size_t>(slot)] = a.state;
  a.used = false;
  const double sec = cost_.ParkSeconds(a.state.position);
  Advance(sec);
  park_s_ += sec;
  ++resumes_done_;
  if (a.on_disk) {
    const double back = cost_.RestoreSeconds(a.state.position);
    Advance(back);
    spill_s_ += back;
    a.on_disk = false;
  }
  return {};
}

runtime::Result<uint64_t> SimEngine::OffloadParked(runtime::ParkId id) {
  if (id < 0 || static_cast<size_t>(id) >= parks_.size() || !parks_[static_cast<size_t>(id)].used) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "sim engine: bad park id");
  }
  ParkArea& a = parks_[static_cast<size_t>(id)];
  if (a.on_disk) return uint64_t{0};
  a.on_disk = true;
  const double sec = cost_.SpillSeconds(a.state.position);
  Advance(sec);
  spill_s_ += sec;
  ++parks_offloaded_;
  return static_cast<uint64_t>(a.state.position) * 64;  // a nominal file size
}

runtime::Result<uint64_t> SimEngine::SpillSlot(int32_t slot, uint64_t session) {
  if (slot < 0 || slot >= num_slots() || session == 0) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "sim engine: bad slot");
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.active) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument,
                              "sim engine: slot has a turn in progress");
  }
  Spilled* dst = &spilled_[0];  // the session's entry, else a free one, else the oldest
  for (Spilled& e : spilled_) {
    if (e.session == session || (dst->session != session && e.seq < dst->seq)) dst = &e;
    if (e.session == session) break;
  }
  *dst = Spilled{session, s.position, ++spills_done_};
  const double sec = cost_.SpillSeconds(s.position);
  s = Slot{};
  Advance(sec);
  spill_s_ += sec;
  return static_cast<uint64_t>(dst->position) * 64;  // a nominal file size
}

runtime::Result<bool> SimEngine::RestoreSession(int32_t slot, uint64_t session,
                                                std::string* rejected) {
  rejected->clear();
  if (slot < 0 || slot >= num_slots()) {
    return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "sim engine: bad slot");
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  s = Slot{};
  for (Spilled& e : spilled_) {
    if (session == 0 || e.session != session) continue;
    s.position = e.position;
    e = Spilled{};
    const double sec = cost_.RestoreSeconds(s.position);
    Advance(sec);
    spill_s_ += sec;
    ++restores_done_;
    return true;
  }
  return false;
}

uint64_t SimEngine::ReleaseSlotPages(int32_t slot) {
  if (slot < 0 || slot >= num_slots() || slots_[static_cast<size_t>(slot)].active) return 0;
  slots_[static_cast<size_t>(slot)] = Slot{};
  return 0;  // no memory is modeled
}

void SimEngine::DropParked(runtime::ParkId id) {
  if (id >= 0 && static_cast<size_t>(id) < parks_.size())
    parks_[static_cast<size_t>(id)] = ParkArea{};
}

}  // namespace ari::sim
