// Internal: the Engine implementation's class (EngineImpl), shared by engine.cc (turns,
// chunks, knobs, the forward pass) and engine_setup.cc (Init: model, pool, arena, park
// areas, caches; memory locking, yield and rewarm). Engine::Create (engine.cc) makes one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/core/thread_pool.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_memory.h"
#include "runtime/engine/engine_park.h"
#include "runtime/engine/engine_plan.h"
#include "runtime/engine/engine_prefix.h"
#include "runtime/engine/engine_slot.h"
#include "runtime/engine/engine_spill.h"
#include "runtime/engine/engine_standby.h"
#include "runtime/engine/fast_forward.h"
#include "runtime/engine/layer_prefetch.h"
#include "runtime/engine/paging.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "runtime/model/session.h"

namespace ari::runtime::engine_internal {

class EngineImpl final : public Engine {
 public:
  EngineImpl() = default;
  EngineImpl(const EngineImpl&) = delete;
  EngineImpl& operator=(const EngineImpl&) = delete;
  ~EngineImpl() override {
    if (UnlockRegions(locked_) != 0) {
      std::fprintf(stderr, "ari: engine: some locked memory could not be unlocked\n");
    }
  }
  Result<void> Init(const EngineOptions& o);

  const Model& model() const override { return *model_; }
  bool has_pack() const override { return packed_.has_value(); }
  const std::filesystem::path& loaded_path() const override { return loaded_path_; }
  const MemoryPlan& memory_plan() const override { return plan_; }
  int32_t num_slots() const override { return static_cast<int32_t>(slots_.size()); }
  Result<void> StartTurn(int32_t slot, const TurnSpec& turn) override;
  Result<ChunkResult> RunChunk(int32_t slot, const ChunkKnobs& knobs) override;
  void ResetSlot(int32_t slot) override {
    if (slot < 0 || slot >= num_slots()) return;
    Slot& s = slots_[static_cast<size_t>(slot)];
    s.position = s.hist_len = s.generated = s.pinned = 0;
    s.finished = true;
    s.kv.type = s.home_kv;  // an empty slot returns to its home precision
    if (s.ref) s.ref->Reset();
  }
  int32_t SlotPosition(int32_t slot) const override {
    return slot < 0 || slot >= num_slots() ? 0 : slots_[static_cast<size_t>(slot)].position;
  }
  std::span<const TokenId> SlotTokens(int32_t slot) const override {
    if (slot < 0 || slot >= num_slots()) return {};
    const Slot& s = slots_[static_cast<size_t>(slot)];
    return {s.history, static_cast<size_t>(s.hist_len)};
  }
  KvType SlotKvType(int32_t slot) const override {
    if (slot < 0 || slot >= num_slots() || !packed_) return KvType::kF32;
    return slots_[static_cast<size_t>(slot)].kv.type;
  }
  Result<void> ConvertSlotKv(int32_t slot, KvType to) override {
    if (slot < 0 || slot >= num_slots()) {
      return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
    }
    if (to != KvType::kInt8) return MakeError(ErrorCode::kUnsupported, "engine: only INT8");
    ChunkResult r;
    return ApplyKv(slots_[static_cast<size_t>(slot)], to, r);
  }
  PinningReport Pinning() const override {
    PoolPinning p = pool_->Pinning();
    return PinningReport{p.requested, p.worker_cpus, p.failures};
  }
  uint64_t WeightBytesPerToken(Precision p) const override;
  int32_t MaxLayerDrop() const override {
    return packed_ && !packed_->layer_importance.empty()
               ? std::max(0, model_->config().n_layers - 2)
               : 0;
  }
  uint64_t PoolDispatches() const override { return pool_->runs(); }
  EngineCounters Counters() const override {
    EngineCounters c{pin_failures_, cpu_mask_refusals_, isa_refusals_,
                     prefix_hits_,  prefix_tokens_,     prefix_misses_};
    const SpillCounters& sc = spills_.counters();
    c.spills = sc.spills;
    c.restores = sc.restores;
    c.spill_rejected = sc.rejected;
    c.spill_failures = sc.failures;
    c.spill_bytes = sc.bytes_on_disk;
    c.parks_offloaded = sc.parks_offloaded;
    c.prefetch_failures = ff_.prefetch_failures();
    c.prefetch_rechecks = prefetch_ctl_.rechecks();
    c.prefetch_switches = prefetch_ctl_.switches();
    c.parks_reloaded = sc.parks_reloaded;
    return c;
  }
  Result<PrefixInfo> AddPrefix(std::span<const TokenId> tokens, Precision p) override {
    // Qualified: the member of the same name hides engine_prefix.h's free function.
    return engine_internal::AddPrefix(*this, slots_, prefixes_, model_id_, model_->config(),
                                      opts_.max_chunk, tokens, p, building_prefix_);
  }
  int32_t num_park_areas() const override { return parks_.size(); }
  Result<ParkId> ParkSlot(int32_t slot) override {
    if (slot < 0 || slot >= num_slots()) {
      return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
    }
    auto id = parks_.Park(slots_[static_cast<size_t>(slot)]);
    if (id) ResetSlot(slot);  // the conversation moved with the turn
    return id;
  }
  Result<void> ResumeParked(ParkId id, int32_t slot) override {
    if (slot < 0 || slot >= num_slots() || !parks_.holds(id)) {
      return MakeError(ErrorCode::kInvalidArgument, "engine: no parked turn " + std::to_string(id) +
                                                        " or bad slot " + std::to_string(slot));
    }
    ResetSlot(slot);  // its conversation is forgotten
    return parks_.Resume(id, slots_[static_cast<size_t>(slot)]);
  }
  void DropParked(ParkId id) override { parks_.Drop(id); }
  Result<uint64_t> OffloadParked(ParkId id) override { return parks_.Offload(id); }
  uint64_t ReleaseFreeParkAreas() override { return parks_.ReleaseFree(); }
  Result<uint64_t> SpillSlot(int32_t slot, uint64_t session) override {
    if (slot < 0 || slot >= num_slots()) {
      return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
    }
    if (!spills_.enabled() || !packed_) {
      return MakeError(ErrorCode::kUnsupported, "engine: no session spill folder");
    }
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.active && !s.finished) {
      return MakeError(ErrorCode::kInvalidArgument, "engine: slot has a turn in progress");
    }
    auto n = spills_.Spill(s, session);
    if (n) ResetSlot(slot);
    return n;
  }
  Result<bool> RestoreSession(int32_t slot, uint64_t session, std::string* rejected) override {
    if (slot < 0 || slot >= num_slots()) {
      return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
    }
    ResetSlot(slot);
    if (!spills_.enabled() || !packed_) return false;
    return spills_.Restore(session, slots_[static_cast<size_t>(slot)], rejected);
  }
  void ForgetSession(uint64_t session) override { spills_.Forget(session); }
  uint64_t ReleaseSlotPages(int32_t slot) override {
    if (slot < 0 || slot >= num_slots() || !packed_) return 0;
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.active && !s.finished) return 0;
    ResetSlot(slot);
    uint64_t released = 0;
    for (void* half : {s.kv.k, s.kv.v}) {
      const ByteRange in = PageInterior(reinterpret_cast<uintptr_t>(half), s.kv_half, PageSize());
      if (!in.empty() &&
          ::madvise(reinterpret_cast<void*>(in.begin), in.size, MADV_DONTNEED) == 0) {
        released += in.size;
      }
    }
    return released;
  }
  Result<uint64_t> LockMemory() override;
  uint64_t locked_bytes() const override { return RegionBytes(locked_); }
  Result<MemoryYield> ReleaseMemory(bool drop_page_cache) override;
  Result<uint64_t> Rewarm() override;
  bool memory_released() const override { return released_; }

 private:
  void ApplyKnobs(const ChunkKnobs& k, ChunkResult& r);
  // KV precision knob: F16/F32 -> INT8 in place (and the freed tail pages released).
  Result<void> ApplyKv(Slot& s, KvType want, ChunkResult& r);
  // Context cap: keeps pinned prefix + most recent tokens; true when it shrank the slot.
  Result<bool> Shrink(Slot& s, int32_t cap);
  // The steps of Init(): the model (and its pack); the arena, planned (engine_plan.h)
  // and cut into the forward pass's workspace, the slots and the layer drop mask.
  Result<void> LoadModel(const EngineOptions& o);
  Result<void> CarveArena(const EngineOptions& o, const ArenaLayout& a);
  void NoteTierChoice();  // the kernel tier choice (TierChoiceReport) as plan notes
  // The last token's logits, in the engine's own buffers (Emit samples them in place).
  Result<float*> Forward(Slot& s, int32_t n, Precision p);
  // The chunk's work once knobs and affinity are applied (RunChunk brackets it).
  Result<void> Compute(Slot& s, const ChunkKnobs& knobs, ChunkResult& r);
  // Samples from logits, appends the token; returns true when the turn finished.
  bool Emit(Slot& s, float* logits, bool greedy, ChunkResult& r);

  EngineOptions opts_;
  std::filesystem::path loaded_path_;
  std::unique_ptr<Model> model_;
  std::optional<PackedWeights> packed_;
  std::unique_ptr<ThreadPool> pool_;
  FastForward ff_;
  MemoryPlan plan_;
  std::vector<Slot> slots_;
  ParkStore parks_;
  SpillStore spills_;       // SpillSlot / RestoreSession
  PoolBuffer arena_;        // plan_.total_bytes (engine_plan.h)
  bool huge_pages_ = true;  // the pools' pages (ChooseHugePages)
  size_t align_ = 128;
  int32_t ctx_ = 0;
  int threads_ = 1;
  int32_t drop_level_ = 0;
  uint8_t* drop_mask_ = nullptr;
  std::optional<PagingAdvisor> prefetch_[2];  // [precision index] packed layer regions
  LayerPrefetchControl prefetch_ctl_;         // which of them the forward pass uses
  uint64_t pin_failures_ = 0;                 // sum of ChunkResult::pin_failures
  uint64_t cpu_mask_refusals_ = 0;            // chunks whose cpu_mask the pool refused (any worker)
  uint64_t isa_refusals_ = 0;                 // chunks whose max_isa could not be applied
  std::vector<MemoryRegion> locked_;          // LockMemory()
  PrefixStore prefixes_;                      // AddPrefix (engine_prefix.h)
  uint64_t model_id_ = 0;                     // the prefix files' model identity
  bool building_prefix_ = false;
  uint64_t prefix_hits_ = 0, prefix_tokens_ = 0, prefix_misses_ = 0;
  // Memory yield (ReleaseMemory / Rewarm): the anonymous regions released, to prefault
  // again, and whether LockMemory's regions are to be locked again.
  bool released_ = false;
  bool relock_ = false;
  bool precision_used_[2] = {false, false};  // [W8, W4] ran since start: Rewarm warms them
  std::vector<MemoryRegion> released_regions_;
};

}  // namespace ari::runtime::engine_internal
