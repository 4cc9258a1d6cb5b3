// Private to the engine: the park areas of slot parking (ChunkRunner::ParkSlot). Each area
// is allocated once at Create (sized for a whole slot of the home KV type: K and V halves,
// the history and the output tokens; prefaulted then unless EngineOptions::prefault is off) and
// takes a turn's state out of a slot: the KV rows of the positions so far, copied compactly in the
// slot's current type (F16, F32 or INT8), the history and output tokens, the counters, and, by
// pointer swap (no copy, no allocation), the sampler (RNG, repetition history, constraint),
// the stream decoder (pending UTF-8 bytes) and, on the reference path, the Session (its fp32
// KV). Park/Resume perform no heap allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_memory.h"
#include "runtime/engine/engine_slot.h"
#include "runtime/engine/engine_spill.h"

namespace ari::runtime {
class Model;
}

namespace ari::runtime::engine_internal {

// Copies the first `positions` rows of every layer between a slot's KV half (layer l's rows
// start at row l * ctx) and a compact buffer (layer l's rows start at row l * compact_rows,
// compact_rows >= positions): the layout of park areas and prefix cache files.
void CopyKvRows(const std::byte* from, std::byte* to, int32_t layers, int32_t ctx,
                int32_t compact_rows, int32_t positions, size_t row_bytes, bool to_compact);

class ParkStore {
 public:
  // `packed`: the KV lives in the slots' views (else in each slot's reference Session).
  // `prefault` (not null): the areas' pages are written at once, on that pool's threads
  // (else on the first park).
  // `huge_pages`: the areas' pages (PoolBuffer).
  Result<void> Init(const Model& model, int32_t areas, KvType home, int32_t ctx, int32_t max_chunk,
                    int32_t max_output, bool packed, bool huge_pages, ThreadPool* prefault);
  // The areas' memory (Engine::LockMemory).
  void AppendRegions(std::vector<MemoryRegion>& out) const;
  // The memory of the areas holding no turn (memory yield: their pages may be released).
  void AppendFreeRegions(std::vector<MemoryRegion>& out) const;
  int32_t size() const { return static_cast<int32_t>(areas_.size()); }
  uint64_t bytes_per_area() const { return area_bytes_; }
  // What Init's prefault of the areas did (all areas summed; empty without a prefault).
  const PrefaultReport& prefault() const { return prefault_; }
  bool holds(ParkId id) const {
    return id >= 0 && id < size() && areas_[static_cast<size_t>(id)].used;
  }
  // Moves the slot's turn into a free area (the caller then resets the slot).
  Result<ParkId> Park(Slot& s);
  // Restores area `id` into the (reset) slot `s` and frees the area (reading its KV back
  // from disk first when it was offloaded; an untrusted or missing file is kIo, the turn
  // then cannot continue).
  Result<void> Resume(ParkId id, Slot& s);
  void Drop(ParkId id);
  // Parked turns on disk (ChunkRunner::OffloadParked): `disk` (the engine's spill store)
  // takes area `id`'s KV rows and history as a ".kvpark" file and the area's KV pages are
  // released. The bytes written (0 when already on disk). kUnsupported without a spill
  // folder or on the reference path.
  void set_disk(SpillStore* disk) { disk_ = disk; }
  Result<uint64_t> Offload(ParkId id);
  bool on_disk(ParkId id) const { return holds(id) && areas_[static_cast<size_t>(id)].on_disk; }
  // Hands the pages of the areas holding no turn back to the kernel: the bytes released.
  uint64_t ReleaseFree();

 private:
  struct Area {
    bool used = false;
    PoolBuffer mem;  // area_bytes_
    std::byte* k = nullptr;
    std::byte* v = nullptr;
    TokenId* history = nullptr;
    TokenId* out = nullptr;
    KvType kv_type = KvType::kF16;
    int32_t position = 0, hist_len = 0, generated = 0, max_tokens = 0, out_cap = 0, pinned = 0;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<StreamDecoder> decoder;
    std::unique_ptr<Session> ref;
    bool on_disk = false;  // the KV rows are in the spill folder (disk_key), pages released
    uint64_t disk_key = 0;
  };
  const Model* model_ = nullptr;
  SpillStore* disk_ = nullptr;
  uint64_t offloads_ = 0;  // makes every offload's file name new
  std::vector<Area> areas_;
  int32_t ctx_ = 0, layers_ = 0;
  uint64_t half_bytes_ = 0, area_bytes_ = 0;
  PrefaultReport prefault_;
};

}  // namespace ari::runtime::engine_internal
