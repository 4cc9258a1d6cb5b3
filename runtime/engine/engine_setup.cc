// The engine's setup (EngineImpl::Init: the model or its pack, the thread pool, the arena
// and the park areas, the prefix and spill stores, layer prefetch, the tier choice) and its
// memory management (LockMemory, ReleaseMemory, Rewarm). The class: engine_impl.h.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/engine/engine_impl.h"
#include "runtime/gguf/gguf.h"
#include "runtime/kernels/layout.h"
#include "runtime/kernels/tier_choice.h"
#include "runtime/model/pack_cache.h"

namespace ari::runtime::engine_internal {

Result<void> EngineImpl::Init(const EngineOptions& o) {
  opts_ = o;
  align_ = o.alignment;
  if (align_ < 64 || (align_ & (align_ - 1)) != 0) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: alignment must be a power of two >= 64");
  }
  if (o.slots < 1 || o.max_chunk < 1 || o.max_output < 1 || o.context_length < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "engine: slots, max_chunk, max_output and "
                     "context_length must be positive");
  }
  if (auto r = LoadModel(o); !r) return r;
  const ModelConfig& c = model_->config();
  if (o.kv_type == KvType::kInt8 && (!packed_ || KvCacheView::Int8Group(c) == 0)) {
    return MakeError(ErrorCode::kUnsupported, "engine: INT8 KV needs a pack and head_dim % 4 == 0");
  }
  ctx_ = std::min(o.context_length, c.context_length > 0 ? c.context_length : o.context_length);
  int participants = o.threads > 0 ? o.threads
                     : !o.cpus.empty()
                         ? static_cast<int>(o.cpus.size())
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto pool = ThreadPool::Create(participants, o.cpus);
  if (!pool) return std::unexpected(pool.error());
  pool_ = std::move(*pool);
  threads_ = participants;
  const ArenaLayout layout =
      PlanArena(c, o, ctx_, participants, align_, packed_.has_value(), plan_);
  plan_.model_file_bytes = model_->file().bytes().size();
  huge_pages_ = ChooseHugePages(o.huge_pages, "/", plan_.notes);
  if (auto r = CarveArena(o, layout); !r) return r;
  if (auto r = parks_.Init(*model_, o.park_areas, o.kv_type, ctx_, o.max_chunk, o.max_output,
                           packed_.has_value(), huge_pages_, o.prefault ? pool_.get() : nullptr);
      !r) {
    return r;
  }
  if (o.prefault && o.park_areas > 0) {
    plan_.notes.push_back(DescribePrefault("park areas", parks_.prefault()));
  }
  // The prefaults ran on the pool; the CPUs a chunk reports (TakeObserved) are the chunk's.
  pool_->TakeObserved();
  if (o.park_areas > 0) {
    plan_.notes.push_back("park areas: " + std::to_string(o.park_areas) + " x " +
                          std::to_string(parks_.bytes_per_area()) + " bytes, outside the arena" +
                          (o.prefault ? "" : ", touched only when a turn is parked"));
  }
  if (!o.prefix_cache.dir.empty() && packed_) {
    auto id = PrefixModelId(loaded_path_);
    if (!id) return std::unexpected(id.error());
    model_id_ = *id;
    prefixes_.Init(o.prefix_cache.dir, o.prefix_cache.max_bytes);
  }
  if (!o.spill.dir.empty() && packed_) {
    auto id = PrefixModelId(loaded_path_);
    if (!id) return std::unexpected(id.error());
    const uint64_t slot_bytes =
        KvCacheView::Bytes(c, o.kv_type == KvType::kF32 ? KvType::kF32 : o.kv_type, ctx_);
    if (auto r = spills_.Init(o.spill.dir, o.spill.max_bytes, *id, *model_, ctx_, slot_bytes,
                              o.spill.level);
        !r) {
      return r;
    }
    parks_.set_disk(&spills_);  // parked turns may go to disk too (OffloadParked)
  }
  if (packed_) {
    const auto on = PlanLayerPrefetch(model_->file(), *packed_, o.layer_prefetch, prefetch_, plan_);
    prefetch_ctl_.Init(o.layer_prefetch, o.layer_prefetch_recheck_tokens,
                       {&*prefetch_[0], &*prefetch_[1]}, on);
    ff_.SetPrefetch(prefetch_ctl_.Active(0), prefetch_ctl_.Active(1));
  }
  // The token embedding is read row by row from the mapping: MADV_RANDOM keeps a row's
  // fault from reading the table around it (docs/memory.md, "Disk embedding").
  if (auto adv = PagingAdvisor(model_->file()).AdviseEmbedding(); !adv) {
    plan_.notes.push_back("embedding MADV_RANDOM not applied: " + adv.error().ToString());
  } else {
    plan_.notes.push_back("embedding table advised MADV_RANDOM (rows read on demand)");
  }
  if (packed_) NoteTierChoice();  // measured here, once per process, not in the first chunk
  return {};
}

void EngineImpl::NoteTierChoice() {
  const std::string report = kernels::TierChoiceReport();
  size_t a = 0;
  while (a < report.size()) {
    size_t e = report.find('\n', a);
    if (e == std::string::npos) e = report.size();
    plan_.notes.push_back("kernel tier by measurement: " + report.substr(a, e - a));
    a = e + 1;
  }
}

Result<void> EngineImpl::LoadModel(const EngineOptions& o) {
  loaded_path_ = o.model_path;
  if (o.plain_gguf == PlainGguf::kAutoPack) {
    auto probe = GgufFile::Open(o.model_path);
    if (!probe) return std::unexpected(probe.error());
    if (!IsPack(*probe)) {
      auto cached = EnsurePack(o.model_path, o.pack_cache);
      if (!cached) return std::unexpected(cached.error());
      loaded_path_ = cached->path;
      plan_.notes.push_back("plain GGUF " + o.model_path.string() + " runs as the pack " +
                            cached->path.string() + (cached->built ? " (built now)" : " (cached)"));
    }
  }
  ModelLoadOptions lo;
  lo.require_tokenizer = o.require_tokenizer;
  auto m = Model::Load(loaded_path_, lo);
  if (!m) return std::unexpected(m.error());
  model_ = std::move(*m);
  if (IsPack(model_->file())) {
    auto pw = BindPack(model_->file(), model_->config());
    if (!pw) return std::unexpected(pw.error());
    packed_ = std::move(*pw);
  } else {
    std::fprintf(stderr,
                 "ari: %s runs on the fp32 reference path (asked for): one precision, "
                 "no precision switching, threads or layer drop\n",
                 o.model_path.c_str());
  }
  return {};
}

Result<void> EngineImpl::CarveArena(const EngineOptions& o, const ArenaLayout& a) {
  const ModelConfig& c = model_->config();
  arena_ = PoolBuffer(plan_.total_bytes, align_, huge_pages_);
  if (!arena_.allocated()) {
    return MakeError(ErrorCode::kOutOfMemory, "engine: cannot allocate the arena (" +
                                                  std::to_string(plan_.total_bytes) + " bytes)");
  }
  if (o.prefault) {
    const PrefaultReport rep = PrefaultOnPool(*pool_, arena_);
    plan_.notes.push_back("arena, park areas and slot text buffers prefaulted at start");
    plan_.notes.push_back(DescribePrefault("arena", rep));
  }
  std::byte* p = arena_.data();
  if (packed_) {
    if (auto r = ff_.Init(*model_, *packed_, p, a.ws, o.max_chunk, ctx_, threads_, align_); !r) {
      return r;
    }
  }
  p += a.ws;
  slots_.resize(static_cast<size_t>(o.slots));
  uint64_t ref_bytes = 0;
  for (Slot& s : slots_) {
    const uint64_t half = KvCacheView::Bytes(c, o.kv_type, ctx_) / 2;
    s.kv = KvCacheView{o.kv_type, p, p + half, ctx_};
    s.home_kv = o.kv_type;
    s.kv_half = half;
    p += a.kv;
    s.history = reinterpret_cast<TokenId*>(p);
    s.out = reinterpret_cast<TokenId*>(p + a.hist);
    p += a.hist + a.outb;
    s.sampler = std::make_unique<Sampler>(c.vocab_size, SamplingParams{});
    if (model_->tokenizer()) s.decoder = std::make_unique<StreamDecoder>(*model_->tokenizer());
    s.text.reserve(static_cast<size_t>(o.max_output) * 64 + 256);
    if (o.prefault) {  // writes every page of the reserved capacity, keeps it
      s.text.assign(s.text.capacity(), '\0');
      s.text.clear();
    }
    if (!packed_) {
      SessionOptions so;
      so.context_length = ctx_;
      so.max_batch = o.max_chunk;
      auto sess = Session::Create(*model_, so);
      if (!sess) return std::unexpected(sess.error());
      s.ref = std::move(*sess);
      ref_bytes += s.ref->arena_bytes();
    }
  }
  drop_mask_ = reinterpret_cast<uint8_t*>(p);
  std::fill(drop_mask_, drop_mask_ + c.n_layers, uint8_t{0});
  if (ref_bytes) plan_.parts.push_back({"reference sessions (own arenas)", ref_bytes});
  return {};
}

Result<uint64_t> EngineImpl::LockMemory() {
  if (!locked_.empty()) return locked_bytes();
  std::vector<MemoryRegion> regions{{arena_.data(), plan_.total_bytes}};
  parks_.AppendRegions(regions);
  for (Slot& s : slots_) regions.push_back({s.text.data(), s.text.capacity()});
  auto r = LockRegions(regions);
  if (r) locked_ = std::move(regions);
  return r;
}

Result<MemoryYield> EngineImpl::ReleaseMemory(bool drop_page_cache) {
  if (!packed_ || !model_->file().mapped()) {
    return MakeError(ErrorCode::kUnsupported,
                     "engine: memory yield needs a mapped pack (the reference path keeps "
                     "its sessions' own arenas)");
  }
  if (released_) return MakeError(ErrorCode::kInvalidArgument, "engine: memory already released");
  // Locked pages cannot be released (madvise EINVAL): unlock first, lock again on Rewarm.
  relock_ = !locked_.empty();
  if (relock_) {
    if (UnlockRegions(locked_) != 0) {
      return MakeError(ErrorCode::kIo, "engine: munlock of the locked regions failed");
    }
    locked_.clear();
  }
  std::vector<MemoryRegion> kv;
  for (int32_t i = 0; i < num_slots(); ++i) {
    ResetSlot(i);
    const Slot& s = slots_[static_cast<size_t>(i)];
    kv.push_back({s.kv.k, s.kv_half});
    kv.push_back({s.kv.v, s.kv_half});
  }
  std::vector<MemoryRegion> parks;
  parks_.AppendFreeRegions(parks);
  MemoryYield y;
  y.kv_bytes = ReleaseRegions(kv);
  y.park_bytes = ReleaseRegions(parks);
  released_regions_ = std::move(kv);
  released_regions_.insert(released_regions_.end(), parks.begin(), parks.end());
  released_ = true;  // from here on Rewarm restores, whatever fails below
  auto m = DropMapping(model_->file().bytes());
  if (!m) return std::unexpected(m.error());
  y.model_bytes = *m;
  if (drop_page_cache) {
    if (auto d = DropPageCache(loaded_path_); !d) return std::unexpected(d.error());
    y.page_cache_dropped = true;
  }
  return y;
}

Result<uint64_t> EngineImpl::Rewarm() {
  if (!released_) return MakeError(ErrorCode::kInvalidArgument, "engine: nothing released");
  // The packed matrices of the precisions run since start (W8A16 when none ran yet): what
  // the chunk loop will read. The other precision, the norms and the embedding table (read
  // per row, MADV_RANDOM: docs/memory.md "Disk embedding") fault in on first use.
  std::vector<ByteRange> weights;
  for (int pi = 0; pi < 2; ++pi) {
    if (!precision_used_[pi] && (pi != 0 || precision_used_[1])) continue;
    const auto prec = pi == 0 ? kernels::PackedPrecision::kW8 : kernels::PackedPrecision::kW4;
    auto add = [&](const kernels::PackedMatrix& m) {
      weights.push_back({reinterpret_cast<uintptr_t>(m.data),
                         static_cast<size_t>(kernels::PackedBytes(prec, m.rows, m.cols))});
    };
    for (const PackedLayer& L : packed_->layers[static_cast<size_t>(pi)]) {
      for (const kernels::PackedMatrix* m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
        add(*m);
      }
    }
    add(packed_->classifier[static_cast<size_t>(pi)]);
  }
  auto warmed = WarmMapping(model_->file().bytes(), MergeRanges(weights));
  if (opts_.prefault) {
    for (const MemoryRegion& r : released_regions_) {
      Prefault(r.begin, r.bytes);
    }
  }
  released_regions_.clear();
  released_ = false;
  if (relock_) {
    relock_ = false;
    if (auto l = LockMemory(); !l) return std::unexpected(l.error());
  }
  return warmed;
}

}  // namespace ari::runtime::engine_internal
