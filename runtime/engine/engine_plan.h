// Private to the engine (engine_setup.cc, engine_plan.cc): how the engine's one arena is laid
// out. Not part of the API (runtime/engine/engine.h has MemoryPlan, what it reports).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "runtime/engine/engine.h"
#include "runtime/engine/paging.h"
#include "runtime/model/model_config.h"
#include "runtime/model/pack_file.h"

namespace ari::runtime {

// Bytes of each part of the arena, aligned; kv, hist and outb are per slot.
struct ArenaLayout {
  uint64_t ws = 0;    // the packed forward pass's activations and scratch (0 without a pack)
  uint64_t kv = 0;    // a slot's KV cache (0 without a pack: the sessions have their own)
  uint64_t hist = 0;  // a slot's token history [ctx]
  uint64_t outb = 0;  // a slot's generated tokens [max_output]
  uint64_t mask = 0;  // the layer drop mask [n_layers]
};

// The layout for these options, and the plan `ari-run --memory-plan` prints: its parts,
// notes and total (model_file_bytes is left to the caller).
ArenaLayout PlanArena(const ModelConfig& c, const EngineOptions& o, int32_t ctx, int participants,
                      size_t align, bool packed, MemoryPlan& plan);

// The MADV_WILLNEED advisors of the packed layers of both precisions (prefetch[0] W8,
// prefetch[1] W4) and the plan's note; per precision, whether prefetch is on for `mode`
// (kAuto: when more than 1% of that precision's sampled packed layer pages were not
// resident).
std::array<bool, 2> PlanLayerPrefetch(const GgufFile& f, const PackedWeights& packed,
                                      LayerPrefetch mode,
                                      std::optional<PagingAdvisor> (&prefetch)[2],
                                      MemoryPlan& plan);

}  // namespace ari::runtime
