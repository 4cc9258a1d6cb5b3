// The engine's side of the prompt-prefix cache; see engine_prefix.h.
#include "runtime/engine/engine_prefix.h"

#include <charconv>
#include <cstdio>
#include <string>

#include "runtime/engine/engine_park.h"
#include "runtime/kernels/cpu_features.h"
#include "runtime/kernels/tier_choice.h"
#include "runtime/model/model_config.h"
#include "runtime/model/pack_cache.h"

namespace ari::runtime::engine_internal {

uint64_t PrefixComputeId(Precision p, KvType kv) {
  const kernels::IsaTier tier = kernels::ActiveIsaTier();
  uint64_t id =
      static_cast<uint64_t>(p) | static_cast<uint64_t>(kv) << 8 | static_cast<uint64_t>(tier) << 16;
  const auto chosen = kernels::ChosenTiers(tier);
  for (size_t f = 0; f < chosen.size(); ++f) {
    id |= static_cast<uint64_t>(chosen[f]) << (24 + 8 * f);
  }
  return id;
}

Result<uint64_t> PrefixModelId(const std::filesystem::path& loaded) {
  auto key = PackSourceKey(loaded);
  if (!key) return std::unexpected(key.error());
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(key->data(), key->data() + key->size(), v, 16);
  if (ec != std::errc{} || end != key->data() + key->size()) {
    return MakeError(ErrorCode::kInternal, "prefix cache: bad model key " + *key);
  }
  return v;
}

Result<PrefixInfo> AddPrefix(Engine& engine, std::span<Slot> slots, PrefixStore& store,
                             uint64_t model_id, const ModelConfig& c, int32_t max_chunk,
                             std::span<const TokenId> tokens, Precision p, bool& building) {
  if (p == Precision::kReference || slots.empty() || slots[0].ref) {
    return MakeError(ErrorCode::kUnsupported, "engine: the prefix cache needs a pack");
  }
  if (!store.enabled()) {
    return MakeError(ErrorCode::kUnsupported,
                     "engine: no prefix cache folder (EngineOptions::prefix_cache.dir)");
  }
  if (tokens.size() < 2) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: a cached prefix needs >= 2 tokens");
  }
  int32_t slot = -1;
  for (size_t i = 0; i < slots.size() && slot < 0; ++i) {
    if (slots[i].hist_len == 0 && slots[i].finished) slot = static_cast<int32_t>(i);
  }
  if (slot < 0) return MakeError(ErrorCode::kOutOfMemory, "engine: AddPrefix needs an empty slot");
  Slot& s = slots[static_cast<size_t>(slot)];
  const KvType kv = s.home_kv;
  const PrefixIdentity id{model_id, PrefixComputeId(p, kv), kv, static_cast<uint32_t>(c.n_layers),
                          static_cast<uint32_t>(KvCacheView::RowBytes(c, kv))};
  PrefixInfo info;
  auto loaded = store.Load(id, tokens);
  if (!loaded && loaded.error().code == ErrorCode::kFormat) {  // a file present, untrusted
    info.rebuilt_reason = loaded.error().message;
    std::fprintf(stderr, "ari: prefix cache: %s: not used, rebuilding\n",
                 info.rebuilt_reason.c_str());
  }
  if (!loaded) {
    TurnSpec turn;  // an ordinary turn: its rows are what any turn computes
    turn.prompt = tokens;
    turn.max_tokens = 1;
    turn.keep_context = false;
    ChunkKnobs k;
    k.precision = p;
    k.max_isa = kernels::ActiveIsaTier();  // the tier of the compute id
    k.kv_type = kv;
    k.prefill_tokens = max_chunk;
    building = true;
    Result<void> ran = engine.StartTurn(slot, turn);
    while (ran && s.position < static_cast<int32_t>(tokens.size())) {
      auto r = engine.RunChunk(slot, k);
      if (!r) ran = std::unexpected(r.error());
    }
    building = false;
    if (ran && (s.kv.type != kv || s.position != static_cast<int32_t>(tokens.size()))) {
      ran = MakeError(ErrorCode::kInternal, "engine: prefix build left the slot inconsistent");
    }
    if (ran) {
      const size_t layer = static_cast<size_t>(s.kv.ctx) * id.row_bytes;
      loaded = store.Store(id, tokens, [&](uint32_t l, bool is_v) {
        return static_cast<const std::byte*>(is_v ? s.kv.v : s.kv.k) + l * layer;
      });
    }
    engine.ResetSlot(slot);
    if (!ran) return std::unexpected(ran.error());
    if (!loaded) return std::unexpected(loaded.error());
    info.built = true;
  }
  info.path = (*loaded)->path;
  info.file_bytes = (*loaded)->file_bytes;
  return info;
}

int32_t UsePrefix(PrefixStore& store, Slot& s, Precision p, const ModelConfig& c) {
  if (s.ref || s.hist_len < 2 || store.size() == 0) return 0;
  int32_t use = 0;
  PrefixEntry* e = store.Find(std::span<const TokenId>(s.history, static_cast<size_t>(s.hist_len)),
                              PrefixComputeId(p, s.kv.type), s.kv.type, s.hist_len - 1, use);
  if (e == nullptr || use == 0 || !store.Touch(*e)) return 0;
  const size_t rb = KvCacheView::RowBytes(c, s.kv.type);
  const auto rows = static_cast<int32_t>(e->tokens.size());
  CopyKvRows(e->k, static_cast<std::byte*>(s.kv.k), c.n_layers, s.kv.ctx, rows, use, rb, false);
  CopyKvRows(e->v, static_cast<std::byte*>(s.kv.v), c.n_layers, s.kv.ctx, rows, use, rb, false);
  s.position = use;
  return use;
}

}  // namespace ari::runtime::engine_internal
