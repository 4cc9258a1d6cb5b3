// The engine's park areas; see engine_park.h.
#include "runtime/engine/engine_park.h"

#include <cstring>
#include <string>
#include <utility>

#include "runtime/engine/engine_standby.h"
#include "runtime/model/model.h"

namespace ari::runtime::engine_internal {

Result<void> ParkStore::Init(const Model& model, int32_t areas, KvType home, int32_t ctx,
                             int32_t max_chunk, int32_t max_output, bool packed, bool huge_pages,
                             ThreadPool* prefault) {
  if (areas < 0) return MakeError(ErrorCode::kInvalidArgument, "engine: park_areas < 0");
  model_ = &model;
  const ModelConfig& c = model.config();
  ctx_ = ctx;
  layers_ = c.n_layers;
  half_bytes_ = packed ? KvCacheView::Bytes(c, home, ctx) / 2 : 0;
  const uint64_t hist = static_cast<uint64_t>(ctx) * sizeof(TokenId);
  const uint64_t outb = static_cast<uint64_t>(max_output) * sizeof(TokenId);
  area_bytes_ = 2 * half_bytes_ + hist + outb;
  areas_.resize(static_cast<size_t>(areas));
  for (Area& a : areas_) {
    // Default-initialized bytes, written now when prefaulting (a first park, i.e. a CRITICAL
    // arrival, then takes no page fault); else touched only when a turn is parked.
    a.mem = PoolBuffer(area_bytes_, alignof(std::max_align_t), huge_pages);
    if (!a.mem.allocated()) {
      return MakeError(ErrorCode::kOutOfMemory, "engine: cannot allocate a park area (" +
                                                    std::to_string(area_bytes_) + " bytes)");
    }
    if (prefault != nullptr) AddPrefaultReport(PrefaultOnPool(*prefault, a.mem), prefault_);
    a.k = a.mem.data();
    a.v = a.k + half_bytes_;
    a.history = reinterpret_cast<TokenId*>(a.v + half_bytes_);
    a.out = reinterpret_cast<TokenId*>(a.v + half_bytes_ + hist);
    a.sampler = std::make_unique<Sampler>(c.vocab_size, SamplingParams{});
    if (model.tokenizer()) a.decoder = std::make_unique<StreamDecoder>(*model.tokenizer());
    if (!packed) {
      SessionOptions so;
      so.context_length = ctx;
      so.max_batch = max_chunk;
      auto sess = Session::Create(model, so);
      if (!sess) return std::unexpected(sess.error());
      a.ref = std::move(*sess);
    }
  }
  return {};
}

void ParkStore::AppendRegions(std::vector<MemoryRegion>& out) const {
  for (const Area& a : areas_) out.push_back({a.mem.data(), area_bytes_});
}

void ParkStore::AppendFreeRegions(std::vector<MemoryRegion>& out) const {
  for (const Area& a : areas_) {
    if (!a.used) out.push_back({a.mem.data(), area_bytes_});
  }
}

void CopyKvRows(const std::byte* from, std::byte* to, int32_t layers, int32_t ctx,
                int32_t compact_rows, int32_t positions, size_t row_bytes, bool to_compact) {
  const size_t n = static_cast<size_t>(positions) * row_bytes;
  for (int32_t l = 0; l < layers; ++l) {
    const size_t slot_off = static_cast<size_t>(l) * static_cast<size_t>(ctx) * row_bytes;
    const size_t compact_off =
        static_cast<size_t>(l) * static_cast<size_t>(compact_rows) * row_bytes;
    std::memcpy(to + (to_compact ? compact_off : slot_off),
                from + (to_compact ? slot_off : compact_off), n);
  }
}

Result<ParkId> ParkStore::Park(Slot& s) {
  if (areas_.empty()) return MakeError(ErrorCode::kUnsupported, "engine: no park areas");
  if (s.finished) return MakeError(ErrorCode::kInvalidArgument, "engine: no turn to park in slot");
  for (size_t i = 0; i < areas_.size(); ++i) {
    Area& a = areas_[i];
    if (a.used) continue;
    if (s.ref) {
      std::swap(a.ref, s.ref);  // the fp32 KV goes with its Session
    } else {
      const size_t rb = KvCacheView::RowBytes(model_->config(), s.kv.type);
      CopyKvRows(static_cast<const std::byte*>(s.kv.k), a.k, layers_, ctx_, s.position, s.position,
                 rb, true);
      CopyKvRows(static_cast<const std::byte*>(s.kv.v), a.v, layers_, ctx_, s.position, s.position,
                 rb, true);
    }
    std::memcpy(a.history, s.history, static_cast<size_t>(s.hist_len) * sizeof(TokenId));
    std::memcpy(a.out, s.out, static_cast<size_t>(s.generated) * sizeof(TokenId));
    a.kv_type = s.kv.type;
    a.position = s.position;
    a.hist_len = s.hist_len;
    a.generated = s.generated;
    a.max_tokens = s.max_tokens;
    a.out_cap = s.out_cap;
    a.pinned = s.pinned;
    std::swap(a.sampler, s.sampler);
    std::swap(a.decoder, s.decoder);
    a.used = true;
    return static_cast<ParkId>(i);
  }
  return MakeError(ErrorCode::kOutOfMemory,
                   "engine: every park area is in use (" + std::to_string(areas_.size()) + ")");
}

Result<void> ParkStore::Resume(ParkId id, Slot& s) {
  if (!holds(id)) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: no parked turn " + std::to_string(id));
  }
  Area& a = areas_[static_cast<size_t>(id)];
  if (a.on_disk) {
    KvRowsView rows;
    rows.k = a.k;
    rows.v = a.v;
    rows.rows_per_layer = a.position;
    rows.history = a.history;
    std::string why;
    auto ok =
        disk_ ? disk_->Read(a.disk_key, SpillKind::kParkedTurn, rows, &why) : Result<bool>(false);
    if (!ok) return std::unexpected(ok.error());
    if (!*ok || rows.position != a.position || rows.type != a.kv_type) {
      return MakeError(ErrorCode::kIo, "engine: parked turn " + std::to_string(id) +
                                           " cannot be read back from disk: " +
                                           (why.empty() ? std::string("file missing") : why));
    }
    a.on_disk = false;
  }
  if (s.ref) {
    std::swap(a.ref, s.ref);
  } else {
    s.kv.type = a.kv_type;
    const size_t rb = KvCacheView::RowBytes(model_->config(), a.kv_type);
    CopyKvRows(a.k, static_cast<std::byte*>(s.kv.k), layers_, ctx_, a.position, a.position, rb,
               false);
    CopyKvRows(a.v, static_cast<std::byte*>(s.kv.v), layers_, ctx_, a.position, a.position, rb,
               false);
  }
  std::memcpy(s.history, a.history, static_cast<size_t>(a.hist_len) * sizeof(TokenId));
  std::memcpy(s.out, a.out, static_cast<size_t>(a.generated) * sizeof(TokenId));
  s.position = a.position;
  s.hist_len = a.hist_len;
  s.generated = a.generated;
  s.max_tokens = a.max_tokens;
  s.out_cap = a.out_cap;
  s.pinned = a.pinned;
  std::swap(a.sampler, s.sampler);
  std::swap(a.decoder, s.decoder);
  s.active = true;
  s.finished = false;
  a.used = false;
  return {};
}

void ParkStore::Drop(ParkId id) {
  if (id < 0 || id >= size()) return;
  Area& a = areas_[static_cast<size_t>(id)];
  if (a.on_disk && disk_) disk_->Forget(a.disk_key, SpillKind::kParkedTurn);
  a.on_disk = false;
  a.used = false;
}

Result<uint64_t> ParkStore::Offload(ParkId id) {
  if (!holds(id)) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: no parked turn " + std::to_string(id));
  }
  Area& a = areas_[static_cast<size_t>(id)];
  if (a.on_disk) return uint64_t{0};
  if (disk_ == nullptr || !disk_->enabled()) {
    return MakeError(ErrorCode::kUnsupported, "engine: no spill folder for parked turns");
  }
  if (a.ref) return MakeError(ErrorCode::kUnsupported, "engine: reference path turns stay in RAM");
  KvRowsView rows;
  rows.k = a.k;
  rows.v = a.v;
  rows.rows_per_layer = a.position;
  rows.type = a.kv_type;
  rows.position = a.position;
  rows.hist_len = a.hist_len;
  rows.pinned = a.pinned;
  rows.history = a.history;
  const uint64_t key = (++offloads_ << 8) | static_cast<uint64_t>(id);
  auto n = disk_->Write(rows, key, SpillKind::kParkedTurn);
  if (!n) return n;
  const MemoryRegion kv{a.k, 2 * half_bytes_};  // history and output tokens stay (small)
  ReleaseRegions({&kv, 1});
  a.disk_key = key;
  a.on_disk = true;
  return n;
}

uint64_t ParkStore::ReleaseFree() {
  std::vector<MemoryRegion> free;
  AppendFreeRegions(free);
  return ReleaseRegions(free);
}

}  // namespace ari::runtime::engine_internal
