// Private to the engine (engine.cc, engine_prefix.cc): the engine's side of the prompt-prefix
// cache (Engine::AddPrefix; files: prefix_cache.h). Building a prefix runs it as an
// ordinary turn in an empty slot (so its rows are bit for bit what a turn computes) and
// writes the slot's rows; using one copies the rows into an empty slot's KV.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/core/error.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_slot.h"
#include "runtime/engine/prefix_cache.h"

namespace ari::runtime::engine_internal {

// The settings KV rows depend on besides the model and the tokens: the precision, the
// slot's KV type and the kernels (active ISA tier and each matmul family's chosen tier).
// Allocation-free.
uint64_t PrefixComputeId(Precision p, KvType kv);

// Digest of the model file the engine runs (its PackSourceKey).
Result<uint64_t> PrefixModelId(const std::filesystem::path& loaded);

// AddPrefix: loads or builds the prefix's file. `engine` runs the build turn (StartTurn +
// RunChunk) in the first slot of `slots` holding no conversation; `building` is set
// meanwhile (no cache lookup for the build turn itself).
Result<PrefixInfo> AddPrefix(Engine& engine, std::span<Slot> slots, PrefixStore& store,
                             uint64_t model_id, const ModelConfig& c, int32_t max_chunk,
                             std::span<const TokenId> tokens, Precision p, bool& building);

// At the first prefill chunk of an empty slot: copies the longest usable cached prefix
// into `s` (position advanced) and returns its token count (0: none). No allocation.
int32_t UsePrefix(PrefixStore& store, Slot& s, Precision p, const ModelConfig& c);

}  // namespace ari::runtime::engine_internal
