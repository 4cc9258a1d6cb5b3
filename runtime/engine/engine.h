// The engine: what the scheduler drives. One model (a dual-precision pack; a plain GGUF is
// packed once into the pack cache, or run on the reference path when asked), N preallocated
// session slots, a pinned thread pool, and one operation:
// "run the next chunk of this slot with these knobs" (prefill chunk or decode tokens).
//
// Memory: everything RunChunk touches (activations, scratch, KV slots, sampling buffers,
// token/text output buffers) is carved at Create() from one arena, aligned to
// EngineOptions::alignment (128 bytes by default). After warm-up, StartTurn/RunChunk and
// knob changes (precision, threads/CPU set, ISA tier, layer drop, KV precision and its
// in-place INT8 conversion, context-cap shrinks, output cap) perform no heap allocation.
// No locks are held while computing. KV modes and the context cap: docs/memory.md.
//
// Threading: an Engine is driven by one thread at a time (the scheduler loop). Its pool
// workers are created once and re-pinned when the CPU set changes; the calling thread is
// pinned to the chunk's CPU set for the duration of each RunChunk (threads = 1 too) and
// gets its previous affinity back afterwards. ChunkResult says what ran, CPUs observed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"
#include "runtime/generate/sampler.h"
#include "runtime/kernels/cpu_features.h"
#include "runtime/model/pack_cache.h"

namespace ari::runtime {

class Model;

// MADV_WILLNEED on layer l + 1's packed weights while layer l computes (docs/memory.md).
enum class LayerPrefetch : uint8_t {
  kAuto,  // on when the model file was not fully resident at Create(), else off
  kOn,
  kOff,
};

// Transparent huge pages for the engine's pools (the arena, the park areas; docs/memory.md).
enum class HugePages : uint8_t {
  kAuto,  // on, unless the kernel reports free memory to a hypervisor (virtio-balloon free
          // page reporting): there a fresh 2 MiB page took up to ~80 ms to back at start
  kOn,
  kOff,  // 4 kB pages (MADV_NOHUGEPAGE)
};

// What the engine does with a plain (unpacked) GGUF.
enum class PlainGguf : uint8_t {
  kAutoPack,   // pack it once into the pack cache (runtime/model/pack_cache.h), run the pack
  kReference,  // run it on the fp32 reference forward pass (the specification): one
               // precision, one thread, no layer drop, fp32 KV; chosen explicitly only
};

// The persistent prompt-prefix cache (Engine::AddPrefix, docs/memory.md "Prompt-prefix
// cache"): registered prefixes keep their KV in mmap'd files in `dir`.
struct PrefixCacheOptions {
  std::filesystem::path dir;          // empty: no prefix cache (AddPrefix is kUnsupported)
  uint64_t max_bytes = 256ull << 20;  // disk bound of the folder's *.kvprefix files (LRU)
};

// Idle multi-turn sessions spilled to disk (ChunkRunner::SpillSlot, docs/memory.md "Parked
// sessions on disk"): one zstd-compressed file per session in `dir`.
struct SpillOptions {
  std::filesystem::path dir;        // empty: no spill (SpillSlot is kUnsupported)
  uint64_t max_bytes = 1ull << 30;  // disk bound of the folder's *.kvspill files (oldest go)
  int level = 1;                    // zstd level
};

struct EngineOptions {
  std::filesystem::path model_path;  // a pack, or a plain GGUF (see plain_gguf)
  PlainGguf plain_gguf = PlainGguf::kAutoPack;
  PackCacheOptions pack_cache;     // where automatic packs live (kAutoPack)
  int32_t slots = 2;               // session slots (KV caches) preallocated
  int32_t context_length = 2048;   // KV capacity per slot, tokens (capped by the model's)
  int32_t max_chunk = 128;         // most prompt tokens one prefill chunk may hold
  int32_t max_output = 1024;       // most generated tokens per turn (output buffers)
  size_t alignment = 128;          // arena alignment (bytes, power of two >= 64)
  KvType kv_type = KvType::kF16;   // KV precision of every slot (its "home" type): a slot is
                                   // sized for it; kInt8 needs a pack (head_dim % 4 == 0)
  std::vector<int> cpus;           // initial CPU set of the pool; empty = all online CPUs
  int32_t threads = 0;             // pool size; 0 = cpus.size()
  bool require_tokenizer = false;  // without a tokenizer: no text, no EOG stop (tests)
  LayerPrefetch layer_prefetch = LayerPrefetch::kAuto;  // packed path only
  // kAuto: a precision's residency is sampled again after this many tokens ran on it
  // (runtime/engine/layer_prefetch.h); 0 = only at Create.
  int32_t layer_prefetch_recheck_tokens = 256;
  // Park areas preallocated at Create (ChunkRunner::ParkSlot): each holds one in-progress
  // turn moved out of its slot (KV sized like a slot's, history, output). 0 = no parking.
  int32_t park_areas = 1;
  // Touch every page of the arena, the park areas and the slots' text buffers at Create,
  // so no first-touch page fault happens inside the chunk loop (docs/reliability.md,
  // "Allocations on the real-time path"). Off: pages are backed when first used.
  bool prefault = true;
  HugePages huge_pages = HugePages::kAuto;
  PrefixCacheOptions prefix_cache;
  SpillOptions spill;
};

// What is applied before a chunk runs (the governor's decision, in runtime terms).
struct ChunkKnobs {
  Precision precision = Precision::kW8A16;          // falls back to kReference without a pack
  kernels::IsaTier max_isa = kernels::kTopIsaTier;  // clamped to what the CPU has
  uint64_t cpu_mask = 0;          // CPUs for the workers (bit i = CPU i); 0 = keep current
  int32_t threads = 0;            // workers used; 0 = keep
  int32_t prefill_tokens = 64;    // prompt tokens at most in a prefill chunk
  int32_t decode_tokens = 8;      // tokens at most in a decode chunk
  int32_t layer_drop = 0;         // skip the k least influential blocks (0 = none)
  KvType kv_type = KvType::kF16;  // kInt8: a live F16/F32 slot is converted to INT8 in
                                  // place (packed path); other values never convert a live
                                  // slot back (a slot returns to its home type when reset)
  bool greedy_only = false;       // memory ladder: sampling replaced by argmax
  int32_t context_cap = 0;        // 0 = none; else when a slot holds more tokens than this it
                                  // keeps its pinned prefix + the most recent tokens, in
                                  // all cap - cap / 4 (docs/memory.md section 2)
  int32_t output_cap = 0;         // 0 = none; else a turn finishes (kMaxTokens) once it has
                                  // generated this many tokens
};

struct TurnSpec {
  std::span<const TokenId> prompt;  // new tokens of this turn (copied into the slot)
  SamplingParams sampling;
  int32_t max_tokens = 64;   // capped by EngineOptions::max_output
  bool keep_context = true;  // multi-turn: continue the slot's conversation
  // Tokens at the start of a conversation that a context cap keeps (the system prompt).
  // Used by the turn that starts an empty slot: -1 = its whole prompt, n >= 0 = its first
  // n tokens (clamped to the prompt). A cap keeps at most half its budget pinned.
  int32_t pinned_prefix = -1;
  // The turn's decode is masked by a response format: sampling.constraint, or (for a
  // runner without real sampling, the simulator) a turn whose mask cost it must charge.
  bool masked = false;
};

enum class ChunkPhase : uint8_t { kPrefill, kDecode };

struct ChunkResult {
  ChunkPhase phase = ChunkPhase::kPrefill;
  int32_t prompt_tokens = 0;        // prompt tokens processed by this chunk
  int32_t prompt_remaining = 0;     // still to prefill
  std::span<const TokenId> tokens;  // tokens generated by this chunk (valid until the
  std::string_view text;            //   next RunChunk/StartTurn on this slot); text is
                                    //   complete UTF-8 of those tokens
  bool finished = false;
  StopReason stop_reason = StopReason::kMaxTokens;
  int64_t compute_ns = 0;  // wall time of the chunk's compute
  // Constrained decoding (SamplingParams::constraint): tokens sampled under the mask and
  // the part of compute_ns spent masking and advancing the constraint.
  int32_t masked_tokens = 0;
  int64_t mask_ns = 0;
  // What actually ran (knobs as applied, next to ChunkKnobs, what was asked):
  Precision precision = Precision::kReference;       // kReference: plain GGUF, fp32 reference path
  kernels::IsaTier isa = kernels::IsaTier::kScalar;  // tier the kernels dispatched to
                                                     // (reference path: kScalar)
  int32_t threads = 1;  // participants the chunk's dispatches were given (reference path: 1)
  // Observed from inside the compute: the union of sched_getcpu() of every participant of
  // every pool dispatch of this chunk and of the calling thread at the chunk's start and
  // end (bit i = CPU i; bit 63 also stands for any CPU id >= 63), and how many distinct
  // participants noted one (<= threads; a dynamic dispatch may leave a late worker out).
  uint64_t cpus_ran = 0;
  int32_t threads_ran = 0;
  // GEMM calls of this chunk that ran on AMX tiles, counted by the kernels on the threads
  // that ran them (isa kAmx and 16 tokens or more in a chunk; 0 otherwise).
  int32_t tile_gemms = 0;
  // The tiers of the matmul kernels this chunk called, noted by the forward pass as it
  // called them (bit t = IsaTier t; 0: no such call): the GEMVs (one token at a time:
  // decode, the classifier) and the GEMMs (prefill). A tier below `isa` where the tier
  // choice measured a lower tier's kernel faster (kernels::ChosenTiers) or the tier shares
  // a lower one's (amx's GEMV is the AVX-512 one). Reference path: 0.
  uint32_t gemv_tiers = 0;
  uint32_t gemm_tiers = 0;
  // Threads whose pinning to the chunk's CPU set failed: workers whose last re-pin was
  // refused, + 1 if pinning the calling thread failed, + 1 if restoring it failed. The
  // chunk still runs (where the OS lets it); Engine::Pinning() names the errors.
  int32_t pin_failures = 0;
  bool isa_refused = false;       // ChunkKnobs::max_isa could not be applied (other family)
  int32_t layers_dropped = 0;     // blocks skipped (0 when the pack has no importance)
  KvType kv_type = KvType::kF32;  // the slot's KV precision after this chunk
  bool kv_converted = false;      // this chunk converted the slot's KV to INT8 in place
  bool context_shrunk = false;    // this chunk applied ChunkKnobs::context_cap
  // Prompt tokens whose KV this chunk copied from the prefix cache instead of computing
  // them (the first prefill chunk of an empty slot; not counted in prompt_tokens).
  int32_t prefix_tokens = 0;
  // Next-layer page-cache prefetches (MADV_WILLNEED) this chunk's forward passes made,
  // counted where they are made: 0 when the layer prefetch of the chunk's precision is off
  // (EngineOptions::layer_prefetch; kAuto switches it by residency, layer_prefetch.h).
  int32_t layer_prefetches = 0;
};

// Bytes per part of the arena, as printed by `ari-run --memory-plan`.
struct MemoryPlan {
  struct Part {
    std::string name;
    uint64_t bytes = 0;
  };
  std::vector<Part> parts;
  uint64_t total_bytes = 0;
  uint64_t model_file_bytes = 0;   // mapped, not counted in total
  std::vector<std::string> notes;  // e.g. INT8 KV bytes of an F16 slot, layer prefetch
  std::string ToString() const;
};

// Where the pool's workers really run (read back from the OS after pinning).
struct PinningReport {
  std::vector<int> requested;
  std::vector<std::vector<int>> worker_cpus;  // per worker, from sched_getaffinity
  std::vector<std::string> failures;          // pinning errors, reported not hidden
};

// Totals since Create (ChunkResult has them per chunk).
struct EngineCounters {
  uint64_t pin_failures = 0;       // sum of ChunkResult::pin_failures
  uint64_t cpu_mask_refusals = 0;  // chunks whose cpu_mask a worker's re-pin refused
  uint64_t isa_refusals = 0;       // chunks with ChunkResult::isa_refused
  uint64_t prefix_hits = 0;        // turns that started from a cached prefix
  uint64_t prefix_tokens = 0;      // prompt tokens taken from the prefix cache, not computed
  uint64_t prefix_misses = 0;      // empty-slot prefills no cached prefix served (once any
                                   // prefix is registered)
  uint64_t spills = 0;             // idle sessions written to the spill folder
  uint64_t restores = 0;           // sessions restored from a spill file
  uint64_t spill_rejected = 0;     // spill files not trusted (corrupt, truncated, foreign)
  uint64_t spill_failures = 0;     // spills that could not be written (bound, disk full)
  uint64_t spill_bytes = 0;        // bytes of the spill folder's files, last known
  uint64_t prefetch_failures = 0;  // next-layer MADV_WILLNEED calls refused (cost: speed only)
  uint64_t prefetch_rechecks = 0;  // kAuto residency samples after Create
  uint64_t prefetch_switches = 0;  // ... that turned a precision's prefetch on or off
  uint64_t parks_offloaded = 0;    // parked turns whose KV went to disk (OffloadParked)
  uint64_t parks_reloaded = 0;     // ... and came back for their resume
};

// What ChunkRunner::ReleaseMemory handed back (docs/memory.md "Memory yield").
struct MemoryYield {
  uint64_t model_bytes = 0;         // bytes of the model mapping dropped from the process
  uint64_t kv_bytes = 0;            // slots' KV pages released (page interiors)
  uint64_t park_bytes = 0;          // pages of park areas holding no turn, released
  bool page_cache_dropped = false;  // the file's pages also left the page cache
};

// A prefix registered with Engine::AddPrefix.
struct PrefixInfo {
  std::filesystem::path path;  // its cache file
  uint64_t file_bytes = 0;
  bool built = false;          // computed and written by this call (else loaded)
  std::string rebuilt_reason;  // why a file present was not trusted (empty: none)
};

// A park area holding a parked turn (ChunkRunner::ParkSlot).
using ParkId = int32_t;

// The chunk operations the scheduler drives (qos/scheduler.h). Engine implements them
// with real compute; the simulator (sim/sim_engine.h) with a cost model in virtual time.
class ChunkRunner {
 public:
  virtual ~ChunkRunner() = default;
  virtual int32_t num_slots() const = 0;
  // See Engine::StartTurn / Engine::RunChunk.
  virtual Result<void> StartTurn(int32_t slot, const TurnSpec& turn) = 0;
  virtual Result<ChunkResult> RunChunk(int32_t slot, const ChunkKnobs& knobs) = 0;
  // The largest layer_drop level RunChunk can apply (0: none, e.g. a pack without layer
  // importance). The scheduler clamps its decisions to it, so what is decided is what runs.
  virtual int32_t MaxLayerDrop() const { return 1 << 20; }

  // Slot parking (docs/scheduler.md, "Slot parking"). ParkSlot moves the slot's turn in
  // progress (started, not finished) whole out of the slot into a free preallocated park
  // area: its KV positions so far (in the slot's current KV type), pending tokens,
  // position, sampler (RNG, repetition history, constraint pointer), decoder/stop state,
  // remaining max_tokens and prefill progress. The slot is left empty (its conversation
  // moved with the turn). ResumeParked restores it into `slot` (whose conversation is
  // forgotten) and frees the area: the next RunChunk on `slot` continues exactly where the
  // turn stopped. DropParked frees an area without resuming (the turn is abandoned).
  // No heap allocation after warm-up. Errors: kOutOfMemory when every area is in use,
  // kInvalidArgument for a bad slot/id or a slot without a turn in progress, kUnsupported
  // (the default) when the runner cannot park: the scheduler then waits for a slot.
  virtual int32_t num_park_areas() const { return 0; }
  virtual Result<ParkId> ParkSlot(int32_t /*slot*/) {
    return MakeError(ErrorCode::kUnsupported, "engine: slot parking not supported");
  }
  virtual Result<void> ResumeParked(ParkId /*id*/, int32_t /*slot*/) {
    return MakeError(ErrorCode::kUnsupported, "engine: slot parking not supported");
  }
  virtual void DropParked(ParkId /*id*/) {}

  // Parked sessions on disk (docs/memory.md "Parked sessions on disk"). SpillSlot writes the
  // idle slot's conversation (between two turns of session `session`) compressed to the
  // spill folder and resets the slot; the bytes written. Errors leave no file (kIo: bound or
  // disk full; kUnsupported: no spill folder or the reference path) and the slot unchanged.
  // RestoreSession resets `slot` and loads the session's file into it: true when restored
  // (the next StartTurn continues it with keep_context), false when there is none or it is
  // not trusted (`*rejected` says why: the session then restarts fresh). ForgetSession
  // deletes a session's file (its conversation ended).
  virtual Result<uint64_t> SpillSlot(int32_t /*slot*/, uint64_t /*session*/) {
    return MakeError(ErrorCode::kUnsupported, "engine: session spill not supported");
  }
  virtual Result<bool> RestoreSession(int32_t /*slot*/, uint64_t /*session*/,
                                      std::string* /*rejected*/) {
    return false;
  }
  virtual void ForgetSession(uint64_t /*session*/) {}
  // Parked turns on disk (memory ladder action park_to_disk, docs/memory.md "Parked turns
  // on disk"): OffloadParked writes parked turn `id`'s KV rows and history to the spill
  // folder (zstd, as a session spill, file "*.kvpark") and releases its area's KV pages;
  // ResumeParked then reads them back first (an untrusted or missing file is kIo: the turn
  // cannot continue). The bytes written, 0 when already on disk. kUnsupported without a
  // spill folder (the default). ReleaseFreeParkAreas hands the pages of the areas holding
  // no turn back (the next park touches them again): the bytes released.
  virtual Result<uint64_t> OffloadParked(ParkId /*id*/) {
    return MakeError(ErrorCode::kUnsupported, "engine: parked turns stay in RAM");
  }
  virtual uint64_t ReleaseFreeParkAreas() { return 0; }
  // Resets an idle slot and hands its KV pages back to the kernel (MADV_DONTNEED of the
  // halves' page interiors): the bytes released. The next turn in the slot touches them
  // again (zero-filled pages, page faults). 0 when the slot has a turn in progress.
  virtual uint64_t ReleaseSlotPages(int32_t /*slot*/) { return 0; }

  // Memory yield on command (docs/memory.md "Memory yield"). Resets every slot (a turn
  // left in one is abandoned, as a cancelled one; parked turns keep their areas), hands the
  // slots' KV pages and the free park areas' pages back to the kernel and drops the model
  // mapping's pages from the process (MADV_DONTNEED: clean file pages; with
  // drop_page_cache the file's pages also leave the page cache, POSIX_FADV_DONTNEED).
  // Memory locked by LockMemory is unlocked first and locked again by Rewarm. Idle
  // conversations must be spilled first (SpillSlot): they are forgotten. No chunk may run
  // until Rewarm. kInvalidArgument when already released; kUnsupported (the default) when
  // the runner cannot yield.
  virtual Result<MemoryYield> ReleaseMemory(bool /*drop_page_cache*/) {
    return MakeError(ErrorCode::kUnsupported, "engine: memory yield not supported");
  }
  // Undoes ReleaseMemory: MADV_WILLNEED over the packed weights of the precisions that ran
  // since start (W8A16 when none did; the other precision, the norms and the embedding
  // table fault in on first use), then reads them in (MADV_POPULATE_READ, or a read per
  // page), rewrites the released KV and park pages (prefault) and locks again what was
  // locked. The model bytes warmed. kInvalidArgument when nothing is released.
  virtual Result<uint64_t> Rewarm() {
    return MakeError(ErrorCode::kUnsupported, "engine: memory yield not supported");
  }
  virtual bool memory_released() const { return false; }
};

class Engine : public ChunkRunner {
 public:
  static Result<std::unique_ptr<Engine>> Create(const EngineOptions& opts);
  ~Engine() override = default;

  virtual const Model& model() const = 0;
  virtual bool has_pack() const = 0;  // both precisions available in the mapped file
  // The file the engine runs: the pack (given, or the automatic one), else the plain GGUF.
  virtual const std::filesystem::path& loaded_path() const = 0;
  virtual const MemoryPlan& memory_plan() const = 0;
  int32_t num_slots() const override = 0;

  // Starts a turn in `slot`: with keep_context the prompt continues the slot's
  // conversation (only the new tokens are prefilled), otherwise the slot is reset.
  Result<void> StartTurn(int32_t slot, const TurnSpec& turn) override = 0;
  // Runs the next chunk of the slot's current turn with `knobs`.
  Result<ChunkResult> RunChunk(int32_t slot, const ChunkKnobs& knobs) override = 0;
  // Forgets the slot's conversation.
  virtual void ResetSlot(int32_t slot) = 0;
  virtual int32_t SlotPosition(int32_t slot) const = 0;  // tokens in the slot's KV
  // The slot's context: KV'd tokens followed by pending ones (valid until the next call on
  // the slot). Empty for a bad slot.
  virtual std::span<const TokenId> SlotTokens(int32_t /*slot*/) const { return {}; }
  virtual KvType SlotKvType(int32_t /*slot*/) const { return KvType::kF32; }
  // Converts an idle (or running) slot's KV to INT8 in place now, as the kv_type knob does
  // at a chunk's start (for slots holding a conversation between turns). kInvalidArgument
  // for a bad slot; a no-op on the reference path or when already INT8.
  virtual Result<void> ConvertSlotKv(int32_t /*slot*/, KvType /*to*/) {
    return MakeError(ErrorCode::kUnsupported, "engine: KV conversion not supported");
  }

  // Registers a prompt prefix (a system prompt's tokens) in the prefix cache: its KV, as
  // `precision` and the engine's KV type compute it with the current ISA tier, is loaded
  // from its file when valid, else computed now in an empty slot and written. From then on,
  // the first prefill chunk of a turn starting an empty slot with the same compute settings
  // (and no layer drop) copies the KV of the longest run of leading tokens it shares with a
  // registered prefix (at most all but the prompt's last token) and computes only the rest.
  // Call between turns (start-up). Errors (no cache folder, reference path, bound or disk
  // full, unwritable folder) leave the prefix unregistered; turns then run uncached.
  virtual Result<PrefixInfo> AddPrefix(std::span<const TokenId> /*tokens*/,
                                       Precision /*precision*/ = Precision::kW8A16) {
    return MakeError(ErrorCode::kUnsupported, "engine: prefix cache not supported");
  }

  virtual PinningReport Pinning() const = 0;
  // Bytes of weights one decoded token reads in `p` (packed matrices + one embedding row;
  // kReference: the plain file's linear weights). For roofline figures.
  virtual uint64_t WeightBytesPerToken(Precision p) const = 0;
  // Thread-pool dispatches (each a barrier with more than one thread) since Create: the
  // per-token synchronization count of profiles (ari-bench). 0 when not tracked.
  virtual uint64_t PoolDispatches() const { return 0; }
  virtual EngineCounters Counters() const { return {}; }
  // mlock()s what the chunk loop touches outside the model mapping: the arena, the park
  // areas and the slots' text buffers (unlocked at destruction). The bytes locked; a
  // refusal (RLIMIT_MEMLOCK, no CAP_IPC_LOCK) leaves nothing locked and says so, naming the
  // limit. The mapped weights are not locked (they page per docs/memory.md).
  virtual Result<uint64_t> LockMemory() {
    return MakeError(ErrorCode::kUnsupported, "engine: memory locking not supported");
  }
  virtual uint64_t locked_bytes() const { return 0; }
};

}  // namespace ari::runtime
