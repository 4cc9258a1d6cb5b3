// Engine over a pack (FastForward + ThreadPool) or a plain GGUF (reference Forward).
#include "runtime/engine/engine.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <thread>

#include "runtime/core/thread_pool.h"
#include "runtime/engine/engine_memory.h"
#include "runtime/engine/engine_park.h"
#include "runtime/engine/engine_plan.h"
#include "runtime/engine/engine_prefix.h"
#include "runtime/engine/engine_spill.h"
#include "runtime/engine/engine_standby.h"
#include "runtime/engine/fast_forward.h"
#include "runtime/engine/layer_prefetch.h"
#include "runtime/engine/paging.h"
#include "runtime/gguf/gguf.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/kernels/layout.h"
#include "runtime/kernels/tier_choice.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_cache.h"
#include "runtime/model/pack_file.h"
#include "runtime/model/session.h"

namespace ari::runtime {

namespace {

using engine_internal::Slot;

class EngineImpl final : public Engine {
 public:
  EngineImpl() = default;
  EngineImpl(const EngineImpl&) = delete;
  EngineImpl& operator=(const EngineImpl&) = delete;
  ~EngineImpl() override {
    if (engine_internal::UnlockRegions(locked_) != 0) {
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
    const engine_internal::SpillCounters& sc = spills_.counters();
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
  uint64_t locked_bytes() const override { return engine_internal::RegionBytes(locked_); }
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
  engine_internal::ParkStore parks_;
  engine_internal::SpillStore spills_;  // SpillSlot / RestoreSession
  engine_internal::PoolBuffer arena_;   // plan_.total_bytes (engine_plan.h)
  bool huge_pages_ = true;              // the pools' pages (engine_internal::ChooseHugePages)
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
  std::vector<engine_internal::MemoryRegion> locked_;  // LockMemory()
  engine_internal::PrefixStore prefixes_;              // AddPrefix (engine_prefix.h)
  uint64_t model_id_ = 0;                              // the prefix files' model identity
  bool building_prefix_ = false;
  uint64_t prefix_hits_ = 0, prefix_tokens_ = 0, prefix_misses_ = 0;
  // Memory yield (ReleaseMemory / Rewarm): the anonymous regions released, to prefault
  // again, and whether LockMemory's regions are to be locked again.
  bool released_ = false;
  bool relock_ = false;
  bool precision_used_[2] = {false, false};  // [W8, W4] ran since start: Rewarm warms them
  std::vector<engine_internal::MemoryRegion> released_regions_;
};

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
  huge_pages_ = engine_internal::ChooseHugePages(o.huge_pages, "/", plan_.notes);
  if (auto r = CarveArena(o, layout); !r) return r;
  if (auto r = parks_.Init(*model_, o.park_areas, o.kv_type, ctx_, o.max_chunk, o.max_output,
                           packed_.has_value(), huge_pages_, o.prefault ? pool_.get() : nullptr);
      !r) {
    return r;
  }
  if (o.prefault && o.park_areas > 0) {
    plan_.notes.push_back(engine_internal::DescribePrefault("park areas", parks_.prefault()));
  }
  // The prefaults ran on the pool; the CPUs a chunk reports (TakeObserved) are the chunk's.
  pool_->TakeObserved();
  if (o.park_areas > 0) {
    plan_.notes.push_back("park areas: " + std::to_string(o.park_areas) + " x " +
                          std::to_string(parks_.bytes_per_area()) + " bytes, outside the arena" +
                          (o.prefault ? "" : ", touched only when a turn is parked"));
  }
  if (!o.prefix_cache.dir.empty() && packed_) {
    auto id = engine_internal::PrefixModelId(loaded_path_);
    if (!id) return std::unexpected(id.error());
    model_id_ = *id;
    prefixes_.Init(o.prefix_cache.dir, o.prefix_cache.max_bytes);
  }
  if (!o.spill.dir.empty() && packed_) {
    auto id = engine_internal::PrefixModelId(loaded_path_);
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
  arena_ = engine_internal::PoolBuffer(plan_.total_bytes, align_, huge_pages_);
  if (o.prefault) {
    const engine_internal::PrefaultReport rep = engine_internal::PrefaultOnPool(*pool_, arena_);
    plan_.notes.push_back("arena, park areas and slot text buffers prefaulted at start");
    plan_.notes.push_back(engine_internal::DescribePrefault("arena", rep));
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
  std::vector<engine_internal::MemoryRegion> regions{{arena_.data(), plan_.total_bytes}};
  parks_.AppendRegions(regions);
  for (Slot& s : slots_) regions.push_back({s.text.data(), s.text.capacity()});
  auto r = engine_internal::LockRegions(regions);
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
    if (engine_internal::UnlockRegions(locked_) != 0) {
      return MakeError(ErrorCode::kIo, "engine: munlock of the locked regions failed");
    }
    locked_.clear();
  }
  std::vector<engine_internal::MemoryRegion> kv;
  for (int32_t i = 0; i < num_slots(); ++i) {
    ResetSlot(i);
    const Slot& s = slots_[static_cast<size_t>(i)];
    kv.push_back({s.kv.k, s.kv_half});
    kv.push_back({s.kv.v, s.kv_half});
  }
  std::vector<engine_internal::MemoryRegion> parks;
  parks_.AppendFreeRegions(parks);
  MemoryYield y;
  y.kv_bytes = engine_internal::ReleaseRegions(kv);
  y.park_bytes = engine_internal::ReleaseRegions(parks);
  released_regions_ = std::move(kv);
  released_regions_.insert(released_regions_.end(), parks.begin(), parks.end());
  released_ = true;  // from here on Rewarm restores, whatever fails below
  auto m = engine_internal::DropMapping(model_->file().bytes());
  if (!m) return std::unexpected(m.error());
  y.model_bytes = *m;
  if (drop_page_cache) {
    if (auto d = engine_internal::DropPageCache(loaded_path_); !d)
      return std::unexpected(d.error());
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
  auto warmed = engine_internal::WarmMapping(model_->file().bytes(), MergeRanges(weights));
  if (opts_.prefault) {
    for (const engine_internal::MemoryRegion& r : released_regions_) {
      engine_internal::Prefault(r.begin, r.bytes);
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

Result<void> EngineImpl::ApplyKv(Slot& s, KvType want, ChunkResult& r) {
  if (!packed_) {
    r.kv_type = KvType::kF32;  // the reference path keeps its fp32 cache
    return {};
  }
  if (want == KvType::kInt8 && s.kv.type != KvType::kInt8 &&
      KvCacheView::Int8Group(model_->config()) > 0) {
    if (auto cv = ff_.ConvertKv(s.kv, KvType::kInt8, s.position); !cv) return cv;
    // Release the pages the INT8 rows no longer use (anonymous arena memory: they come
    // back zero-filled if the slot returns to F16). One madvise per half, per conversion.
    const uint64_t used = KvCacheView::Bytes(model_->config(), KvType::kInt8, ctx_) / 2;
    for (void* half : {s.kv.k, s.kv.v}) {
      const ByteRange tail =
          PageInterior(reinterpret_cast<uintptr_t>(half) + used, s.kv_half - used, PageSize());
      if (!tail.empty() &&
          ::madvise(reinterpret_cast<void*>(tail.begin), tail.size, MADV_DONTNEED) != 0) {
        // The conversion stands; only the release failed: the pages stay resident.
        std::fprintf(stderr, "ari: engine: INT8 KV: spare pages not released (madvise: %s)\n",
                     std::strerror(errno));
      }
    }
    r.kv_converted = true;
  } else if (want != KvType::kInt8 && s.kv.type != s.home_kv && s.position == 0) {
    s.kv.type = s.home_kv;
  }
  r.kv_type = s.kv.type;
  return {};
}

Result<bool> EngineImpl::Shrink(Slot& s, int32_t cap) {
  if (cap <= 0 || s.hist_len <= cap) return false;
  const int32_t keep = std::max(1, cap - cap / 4);
  const int32_t pin = std::min(s.pinned, keep / 2);
  const int32_t recent = keep - pin;
  std::copy(s.history + s.hist_len - recent, s.history + s.hist_len, s.history + pin);
  s.hist_len = keep;
  s.pinned = pin;
  // KV of positions < pin depends only on tokens < pin (causal): it stays valid. The
  // recent tokens are re-prefilled at their new positions pin, pin + 1, ...
  s.position = std::min(s.position, pin);
  if (s.ref) {
    if (auto t = s.ref->Truncate(s.position); !t) return std::unexpected(t.error());
  }
  return true;
}

uint64_t EngineImpl::WeightBytesPerToken(Precision p) const {
  const ModelWeights& w = model_->weights();
  const uint64_t embd_row = w.token_embd.row_bytes;
  if (p == Precision::kReference || !packed_)
    return w.TotalBytes() - w.token_embd.row_bytes * w.token_embd.rows + embd_row;
  return packed_->BytesPerToken(p == Precision::kW4A8 ? kernels::PackedPrecision::kW4
                                                      : kernels::PackedPrecision::kW8) +
         embd_row;
}

void EngineImpl::ApplyKnobs(const ChunkKnobs& k, ChunkResult& r) {
  // A tier of the other family is refused without building its error (that allocates).
  r.isa_refused =
      !kernels::IsaTierInFamily(k.max_isa) || !kernels::SetMaxIsaTier(k.max_isa).has_value();
  // A refused re-pin is counted per worker (pool_->pin_failures(), in RunChunk) and named
  // by Pinning(); the chunk still runs, wherever the OS lets the workers run.
  if (k.cpu_mask != 0 && !pool_->SetCpuMask(k.cpu_mask)) ++cpu_mask_refusals_;
  if (k.threads > 0) threads_ = std::min(k.threads, pool_->max_participants());
  const int32_t n_layers = model_->config().n_layers;
  const int32_t want = packed_ && !packed_->layer_importance.empty()
                           ? std::clamp(k.layer_drop, 0, std::max(0, n_layers - 2))
                           : 0;
  if (want != drop_level_) {
    // The `want` least influential blocks among 1 .. n_layers-2 (ties: lower index first).
    std::fill(drop_mask_, drop_mask_ + n_layers, uint8_t{0});
    for (int32_t d = 0; d < want; ++d) {
      int32_t best = -1;
      for (int32_t l = 1; l + 1 < n_layers; ++l) {
        if (drop_mask_[l]) continue;
        if (best < 0 || packed_->layer_importance[static_cast<size_t>(l)] <
                            packed_->layer_importance[static_cast<size_t>(best)]) {
          best = l;
        }
      }
      if (best >= 0) drop_mask_[best] = 1;
    }
    drop_level_ = want;
  }
  r.precision = packed_ ? k.precision : Precision::kReference;  // RunChunk refused kReference
  // The reference forward pass is plain C++: it dispatches to no ISA kernels.
  r.isa = packed_ ? kernels::ActiveIsaTier() : kernels::IsaTier::kScalar;
  r.threads = packed_ ? threads_ : 1;
  r.layers_dropped = packed_ ? drop_level_ : 0;
}

Result<void> EngineImpl::StartTurn(int32_t slot, const TurnSpec& turn) {
  if (slot < 0 || slot >= num_slots()) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!turn.keep_context) ResetSlot(slot);
  if (s.hist_len + static_cast<int64_t>(turn.prompt.size()) >= ctx_) {  // room for 1 more
    return MakeError(ErrorCode::kOutOfMemory, "engine: prompt does not fit the context");
  }
  const int32_t vocab = model_->config().vocab_size;
  for (TokenId id : turn.prompt) {
    if (id < 0 || id >= vocab) return MakeError(ErrorCode::kInvalidArgument, "engine: token id");
  }
  if (turn.prompt.empty() && s.hist_len == s.position) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: empty prompt");
  }
  if (s.hist_len == 0) {
    const auto n = static_cast<int32_t>(turn.prompt.size());
    s.pinned = turn.pinned_prefix < 0 ? n : std::min(turn.pinned_prefix, n);
  }
  std::copy(turn.prompt.begin(), turn.prompt.end(), s.history + s.hist_len);
  s.hist_len += static_cast<int32_t>(turn.prompt.size());
  s.sampler->SetParams(turn.sampling);
  if (s.decoder) s.decoder->Reset(std::span<const TokenId>(s.history, s.hist_len));  // continues
  s.generated = 0;
  s.max_tokens = std::clamp(turn.max_tokens, 1, opts_.max_output);
  s.active = true;
  s.finished = false;
  return {};
}

Result<float*> EngineImpl::Forward(Slot& s, int32_t n, Precision p) {
  std::span<const TokenId> toks(s.history + s.position, static_cast<size_t>(n));
  if (s.ref) {
    auto r = runtime::Forward(*s.ref, toks);
    if (!r) return std::unexpected(r.error());
    s.position = s.ref->position();
    return s.ref->mutable_last_logits().data();
  }
  precision_used_[p == Precision::kW4A8 ? 1 : 0] = true;
  auto r =
      ff_.Run(toks, s.position, s.kv,
              p == Precision::kW4A8 ? kernels::PackedPrecision::kW4 : kernels::PackedPrecision::kW8,
              drop_level_ > 0 ? drop_mask_ : nullptr, *pool_, threads_);
  if (!r) return std::unexpected(r.error());
  s.position += n;
  return *r;
}

bool EngineImpl::Emit(Slot& s, float* logits, bool greedy, ChunkResult& r) {
  const int32_t vocab = model_->config().vocab_size;
  TokenId next = 0;
  const TokenConstraint* constraint = s.sampler->params().constraint;
  if (greedy && constraint == nullptr) {
    next = static_cast<TokenId>(std::max_element(logits, logits + vocab) - logits);
  } else {
    const int64_t mask_before = s.sampler->constraint_ns();
    next = s.sampler->Sample(std::span<float>(logits, static_cast<size_t>(vocab)),
                             std::span<const TokenId>(s.history, static_cast<size_t>(s.hist_len)));
    if (constraint != nullptr) {
      r.mask_ns += s.sampler->constraint_ns() - mask_before;
      ++r.masked_tokens;
    }
  }
  if (next < 0) {  // a grammar no token can continue, in a vocabulary without EOG
    r.stop_reason = StopReason::kGrammarDeadEnd;
    if (s.decoder) s.decoder->Flush(s.text);
    s.finished = r.finished = true;
    return true;
  }
  s.out[s.generated++] = next;
  s.history[s.hist_len++] = next;
  const Tokenizer* tok = model_->tokenizer();
  bool stop = false;
  if (tok && tok->IsEog(next)) {
    r.stop_reason = StopReason::kEndOfGen;
    stop = true;
  } else if (tok && next == tok->Bos()) {
    r.stop_reason = StopReason::kBos;
    stop = true;
  } else {
    if (s.decoder) s.decoder->Push(next, s.text);
    if (s.generated >= s.max_tokens || (s.out_cap > 0 && s.generated >= s.out_cap)) {
      r.stop_reason = StopReason::kMaxTokens;
      stop = true;
    } else if (s.hist_len >= ctx_) {
      r.stop_reason = StopReason::kContextFull;
      stop = true;
    }
  }
  if (constraint != nullptr && constraint->Finished()) {  // wins over max_tokens: it is valid
    r.stop_reason = constraint->Complete() ? StopReason::kGrammarDone : StopReason::kGrammarDeadEnd;
    stop = true;
  }
  if (stop) {
    if (s.decoder) s.decoder->Flush(s.text);
    s.finished = true;
    r.finished = true;
  }
  return stop;
}

Result<ChunkResult> EngineImpl::RunChunk(int32_t slot, const ChunkKnobs& knobs) {
  if (slot < 0 || slot >= num_slots()) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.finished) return MakeError(ErrorCode::kInvalidArgument, "engine: no turn running in slot");
  if (packed_ && knobs.precision == Precision::kReference) {  // never W8A16 in its place
    return MakeError(ErrorCode::kInvalidArgument,
                     "engine: the fp32 reference path needs the plain GGUF (a pack keeps no fp32 "
                     "weights): EngineOptions::plain_gguf = kReference");
  }
  const auto t0 = std::chrono::steady_clock::now();
  ChunkResult r;
  ApplyKnobs(knobs, r);
  // The calling thread computes too (participant 0, and all of a threads = 1 chunk): it
  // runs the chunk on the chunk's CPU set and gets its own affinity back afterwards.
  const bool caller_pinned = pool_->PinCaller().has_value();
  r.pin_failures = pool_->pin_failures() + (caller_pinned ? 0 : 1);
  pool_->NoteCallerCpu();
  ff_.ResetMatmulsRan();  // matmuls outside chunks (e.g. prefix-cache scoring) are not this one's
  const int pi = r.precision == Precision::kW4A8 ? 1 : 0;
  if (packed_ && prefetch_ctl_.Recheck(pi)) {
    ff_.SetPrefetch(prefetch_ctl_.Active(0), prefetch_ctl_.Active(1));
  }
  const uint64_t prefetches = ff_.prefetch_calls();
  const Result<void> ran = Compute(s, knobs, r);
  r.layer_prefetches = static_cast<int32_t>(ff_.prefetch_calls() - prefetches);
  prefetch_ctl_.Ran(pi, int64_t{r.prompt_tokens} + static_cast<int64_t>(r.tokens.size()));
  pool_->NoteCallerCpu();
  const ThreadPool::Observed seen = pool_->TakeObserved();
  const FastForward::MatmulsRan mm = ff_.TakeMatmulsRan();
  r.tile_gemms = static_cast<int32_t>(mm.tile_gemms);
  r.gemv_tiers = mm.gemv_tiers;
  r.gemm_tiers = mm.gemm_tiers;
  if (!pool_->RestoreCaller()) ++r.pin_failures;
  r.cpus_ran = seen.cpus;
  r.threads_ran = seen.participants;
  pin_failures_ += static_cast<uint64_t>(r.pin_failures);
  isa_refusals_ += r.isa_refused ? 1 : 0;
  if (!ran) return std::unexpected(ran.error());
  r.compute_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  return r;
}

Result<void> EngineImpl::Compute(Slot& s, const ChunkKnobs& knobs, ChunkResult& r) {
  if (auto kv = ApplyKv(s, knobs.kv_type, r); !kv) return kv;
  s.out_cap = knobs.output_cap;
  s.text.clear();
  const int32_t first = s.generated;
  if (s.out_cap > 0 && s.generated >= s.out_cap) {  // the cap fell below this turn's output
    if (s.decoder) s.decoder->Flush(s.text);
    s.finished = r.finished = true;
    r.stop_reason = StopReason::kMaxTokens;
    r.text = s.text;
    return {};
  }
  auto shrunk = Shrink(s, knobs.context_cap);
  if (!shrunk) return std::unexpected(shrunk.error());
  r.context_shrunk = *shrunk;
  if (s.position == 0 && s.generated == 0 && prefixes_.size() > 0 && !building_prefix_) {
    // The first prefill chunk of an empty slot: the prefix cache (engine_prefix.h).
    r.prefix_tokens = drop_level_ == 0
                          ? engine_internal::UsePrefix(prefixes_, s, r.precision, model_->config())
                          : 0;
    prefix_hits_ += r.prefix_tokens > 0 ? 1 : 0;
    prefix_misses_ += r.prefix_tokens > 0 ? 0 : 1;
    prefix_tokens_ += static_cast<uint64_t>(r.prefix_tokens);
  }
  const bool greedy = knobs.greedy_only;
  if (s.generated == 0 || s.hist_len - s.position > 1) {  // prompt, or re-prefill after a cap
    r.phase = ChunkPhase::kPrefill;
    const int32_t pending = s.hist_len - s.position;
    const int32_t n = std::min({pending, std::max(1, knobs.prefill_tokens), opts_.max_chunk});
    auto logits = Forward(s, n, r.precision);
    if (!logits) return std::unexpected(logits.error());
    r.prompt_tokens = n;
    r.prompt_remaining = s.hist_len - s.position;
    if (r.prompt_remaining == 0) Emit(s, *logits, greedy, r);
  } else {
    r.phase = ChunkPhase::kDecode;
    for (int32_t i = 0; i < std::max(1, knobs.decode_tokens) && !s.finished; ++i) {
      if (i > 0) {
        auto cut = Shrink(s, knobs.context_cap);
        if (!cut) return std::unexpected(cut.error());
        if (*cut) {  // re-prefill in the next chunk
          r.context_shrunk = true;
          break;
        }
      }
      auto logits = Forward(s, s.hist_len - s.position, r.precision);
      if (!logits) return std::unexpected(logits.error());
      Emit(s, *logits, greedy, r);
    }
  }
  r.tokens = std::span<const TokenId>(s.out + first, static_cast<size_t>(s.generated - first));
  r.text = s.text;
  return {};
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& opts) {
  auto e = std::make_unique<EngineImpl>();
  if (auto r = e->Init(opts); !r) return std::unexpected(r.error());
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace ari::runtime
